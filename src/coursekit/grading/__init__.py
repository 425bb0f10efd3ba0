"""Grading lesson 11 with nbgrader: release, grade, check, report and formgrader commands.

The nbgrader course lives in `autograder/` (config `autograder/nbgrader_config.py`, gradebook
`autograder/gradebook.db`, the standard source/release/submitted/autograded/feedback folders).
"""

import sys

# nbformat imports jsonschema, which, when the optional rfc3987_syntax package is installed (jupyter's
# dependencies bring it), builds ~40 lark parsers for the "iri" string formats at import: about
# 2 CPU-seconds per process, for formats that no notebook or nbgrader schema uses. Grading processes
# (the recorder, its workers, nbgrader run from them) do without it.
sys.modules.setdefault("rfc3987_syntax", None)
