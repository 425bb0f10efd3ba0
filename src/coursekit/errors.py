"""The one exception class users see: printed by the CLI as a single line, exit status 1."""


class CourseError(Exception):
    """A user-facing error; the message names the file (and line) and the fix."""
