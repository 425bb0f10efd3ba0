"""What runs with student code or launches it: the kernel side, the bubblewrap sandbox, the executor and the
grading workers. Nothing in judge/ or records/ imports this package (import-linter contract, pyproject.toml)."""
