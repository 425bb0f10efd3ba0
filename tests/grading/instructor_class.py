"""A small class for the instructor's tools (class report, copy check, export, formgrader): eight
students with planned code mistakes (two of each, so they are common) and written answers from
answer_texts.py, planned so that exactly these copy flags are expected:

    s01 copied_reference(q2 …)           the reference Q2 pasted from the solution site
    s02 copied_reference(q1 …)           a lightly edited copy of the reference Q1
    s03, s04 similar_answers(q3: s03, s04 …)   s04 lightly edited s03's Q3
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat
from answer_texts import CLASSMATE_EDITED, EDITED, INDEPENDENT, PARAPHRASED, QUESTIONS, references, site_text
from submission_kinds import _cells, k_correct, k_hard_coded, k_sample_variance, k_std_eq_zero, k_untouched

CODE = {"s01": k_correct, "s02": k_correct, "s03": k_sample_variance, "s04": k_sample_variance,
        "s05": k_std_eq_zero, "s06": k_std_eq_zero, "s07": k_hard_coded, "s08": k_untouched}
SHORT = {"s06": "同上。", "s07": "同上。"}  # identical, but too short to compare


def _answers() -> dict[str, dict[str, str]]:
    refs = references()
    ind0, ind1, ind2 = ({q: INDEPENDENT[q][k] for q in QUESTIONS} for k in range(3))
    plan = {  # question -> student -> text
        "explanation": {"s01": ind0, "s02": ind1, "s03": ind2, "s04": PARAPHRASED},
        "q1": {"s01": ind0, "s02": EDITED, "s03": ind2, "s04": PARAPHRASED, "s05": ind1},
        "q2": {"s01": {"q2": site_text(refs["q2"])}, "s02": ind0, "s03": ind1, "s04": ind2, "s05": PARAPHRASED},
        "q3": {"s01": ind0, "s02": ind2, "s03": ind1, "s04": CLASSMATE_EDITED, "s05": PARAPHRASED},
    }
    out: dict[str, dict[str, str]] = {sid: {} for sid in CODE if sid != "s08"}
    for qid, students in plan.items():
        for sid in out:
            out[sid][qid] = students[sid][qid] if sid in students else SHORT.get(sid, "还没想好。")
    return out


ANSWERS = _answers()
EXPECTED_COPY_FLAGS = {"s01": {"copied_reference"}, "s02": {"copied_reference"},
                       "s03": {"similar_answers"}, "s04": {"similar_answers"}}


def write_instructor_class(release: Path, folder: Path) -> None:
    """One notebook per student in `folder` (student id = file name)."""
    folder.mkdir(parents=True, exist_ok=True)
    base = nbformat.read(release, as_version=4)
    for sid, build in CODE.items():
        nb = build(copy.deepcopy(base))
        if sid in ANSWERS:  # replace submission_kinds.ANSWERS, which every solved kind shares
            for qid, text in ANSWERS[sid].items():
                cell = _cells(nb, qid)[0]
                cell.source = cell.source.split("\n\n", 1)[0] + "\n\n" + text
        (folder / f"{sid}.ipynb").write_text(json.dumps(nb, ensure_ascii=False), encoding="utf-8")
