"""Shared fixtures: the project root and the seed's exercise cell."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SEED_DIR = ROOT.parent / "shared" / "seed"


def _seed_exercise_cell(seed_text: str) -> str:
    start = seed_text.index("Code\n\nimport math") + len("Code\n\n")
    last = "assert sum(ratios)/len(ratios) == 2.125"
    return seed_text[start:seed_text.index(last, start) + len(last)] + "\n"


@pytest.fixture(scope="session")
def seed_exercise_cell() -> str:
    """The seed's exercise cell: read from ../shared/seed when present (CI), else the committed copy of it."""
    fixture = (ROOT / "tests" / "fixtures" / "seed_exercise_cell.txt").read_text(encoding="utf-8")
    for seed in sorted(SEED_DIR.glob("*.txt")):
        from_seed = _seed_exercise_cell(seed.read_text(encoding="utf-8"))
        assert from_seed == fixture, f"tests/fixtures/seed_exercise_cell.txt has drifted from {seed}"
    return fixture
