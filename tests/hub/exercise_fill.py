"""The hub tests' way to fill the released exercise cell (a helper module: several conftest.py share that name)."""

from __future__ import annotations


def fill_blanks(source: str, var_line: str) -> str:
    """The release's fill-in cell `source` with its two blanks filled: `var_line`, and the zero-variance return."""
    lines = []
    for line in source.split("\n"):
        indent = line[:len(line) - len(line.lstrip())]
        if line.strip().startswith("var = ______"):
            line = indent + var_line
        elif line.strip() == "return ______":
            line = indent + "return [0.0] * len(rewards)"
        lines.append(line)
    filled = "\n".join(lines)
    assert "______" not in filled, "the release's blanks changed; update this test"
    return filled
