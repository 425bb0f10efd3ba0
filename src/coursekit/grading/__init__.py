"""Grading lesson 11 with nbgrader: release, grade, check, report and formgrader commands.

The nbgrader course lives in `autograder/` (config `autograder/nbgrader_config.py`, gradebook
`autograder/gradebook.db`, the standard source/release/submitted/autograded/feedback folders).
"""
