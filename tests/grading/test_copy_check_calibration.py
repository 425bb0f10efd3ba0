"""The copy check on its calibration data (tests/grading/data/copy_check/, docs/copy_check.md): 40 honest
answers written independently (six follow the prompt's 实现/实际输出/边界/聚合 structure, as close to
the reference as honest answers get) and 21 copies of the reference or of a classmate, graded as one
class. No honest answer is flagged, and every copy that keeps at least half of its source's sentences is."""

from __future__ import annotations

import pytest
from answer_texts import references
from copy_check_data import load, sentences

from coursekit.grading.records import similarity as S

REFERENCE, SAMPLES = load()
BY_NAME = {s.name: s for s in SAMPLES}
KEEPING_HALF = [s for s in SAMPLES if s.source and s.kept >= 0.5 and s.level != "back_translated"]


@pytest.fixture(scope="module")
def flags() -> dict[str, list[str]]:
    answers = {s.name: {"explanation": s.text} for s in SAMPLES}
    return S.copy_flags(answers, {"explanation": references()["explanation"]})


def test_the_data_is_what_the_calibration_claims():
    honest = [s for s in SAMPLES if not s.source]
    assert len(honest) >= 30 and len({s.text for s in honest}) == len(honest)
    assert {s.level for s in SAMPLES if s.source} == {"verbatim", "reordered", "synonyms", "back_translated", "partial"}
    for s in SAMPLES:
        if s.level == "partial":  # the copy holds the share of its source's sentences it claims
            source = REFERENCE if s.source == "reference" else BY_NAME[s.source].text
            kept = [x for x in sentences(source) if x in sentences(s.text)]
            assert len(kept) >= s.kept * len(sentences(source)) - 1e-9, s.name


def test_no_honest_answer_is_flagged_as_a_copy_of_the_reference(flags):
    copied = [s.name for s in SAMPLES if not s.source
              and any(f.startswith("copied_reference") for f in flags.get(s.name, []))]
    assert copied == []


def test_honest_answers_are_similar_only_to_copies_of_themselves(flags):
    """An honest student appears in a similar_answers group only with a copy made from them (its
    source, or the answer whose sentences fill a partial copy) and that copy's other sources."""
    for s in SAMPLES:
        for found in flags.get(s.name, []):
            if found.startswith("similar_answers") and not s.source:
                members = found[found.index(": ") + 2:found.rindex(" ")].split(", ")
                copies = [BY_NAME[m] for m in members if BY_NAME[m].source]
                assert copies and all(m == s.name or BY_NAME[m].source or any(
                    m in (c.source, c.filler) for c in copies) for m in members), found
                assert any(s.name in (c.source, c.filler) for c in copies), found


@pytest.mark.parametrize("name", [s.name for s in KEEPING_HALF])
def test_every_copy_keeping_half_of_its_source_is_flagged(flags, name):
    sample = BY_NAME[name]
    found = flags.get(name, [])
    if sample.source == "reference":
        assert any(f.startswith("copied_reference(explanation") for f in found), found
    else:
        assert any(f.startswith("similar_answers(explanation") and sample.source in f for f in found), found
