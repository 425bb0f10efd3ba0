"""The copy check's calibration: ROC of candidate measures on tests/grading/data/copy_check/ (honest
answers and copies of the reference or of a classmate) plus tests/grading/answer_texts.py, and the
chosen measure's precision and recall per edit level. Prints the Markdown tables of docs/copy_check.md.

Reference check: negatives are honest answers, positives copies of the reference. Pair check:
negatives are pairs of honest answers, positives (copy, its source) pairs. "Required" copies keep at
least half of their source's sentences (verbatim, re-ordered, synonym-swapped, partial >= 50 %);
back-translated and 25 % partial copies are reported but not required.
Run: .venv/bin/python bench/copy_check_roc.py
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "grading"))

from answer_texts import (  # noqa: E402
    CLASSMATE_EDITED,
    EDITED,
    INDEPENDENT,
    PARAPHRASED,
    QUESTIONS,
    references,
    site_text,
)
from copy_check_data import load  # noqa: E402

from coursekit.grading.records import similarity as S  # noqa: E402

REFS = references()
Scored = list[tuple[float, str, bool, bool]]  # score, name, is a copy, required to be caught


def grams(text: str, n: int) -> set[str]:
    return S.shingles(text, n)


def ref_grams(qid: str, n: int) -> set[str]:
    return S.shingles(REFS[qid], n) | S.shingles(REFS[qid], n, keep_math=True)


def required(level: str, kept: float) -> bool:
    return level != "back_translated" and kept >= 0.5


def reference_scores(measure: Callable[[set[str], set[str]], float], n: int) -> Scored:
    _, samples = load()
    out: Scored = []
    for s in samples:
        if not s.source or s.source == "reference":
            out.append((measure(grams(s.text, n), ref_grams("explanation", n)), s.name, bool(s.source),
                        bool(s.source) and required(s.level, s.kept)))
    for qid in QUESTIONS:
        ref = ref_grams(qid, n)
        out.append((measure(grams(site_text(REFS[qid]), n), ref), f"site_{qid}", True, True))
        out.append((measure(grams(EDITED[qid], n), ref), f"edited_{qid}", True, True))
        for k, text in enumerate([PARAPHRASED[qid], *INDEPENDENT[qid]]):
            out.append((measure(grams(text, n), ref), f"own{k}_{qid}", False, False))
    return out


def pair_scores(measure: Callable[[set[str], set[str]], float], n: int) -> Scored:
    _, samples = load()
    texts = {s.name: s.text for s in samples}

    def own(text: str, qid: str = "explanation") -> set[str]:
        return grams(text, n) - ref_grams(qid, n)

    honest = [s for s in samples if not s.source]
    out: Scored = [(measure(own(a.text), own(b.text)), f"{a.name}~{b.name}", False, False)
                   for a, b in itertools.combinations(honest, 2)]
    out += [(measure(own(s.text), own(texts[s.source])), s.name, True, required(s.level, s.kept))
            for s in samples if s.source and s.source != "reference"]
    for qid in QUESTIONS:
        out.append((measure(own(CLASSMATE_EDITED[qid], qid), own(INDEPENDENT[qid][1], qid)), f"mate_{qid}", True, True))
        others = [EDITED[qid], PARAPHRASED[qid], *INDEPENDENT[qid]]
        out += [(measure(own(a, qid), own(b, qid)), f"own_{qid}", False, False)
                for a, b in itertools.combinations(others, 2)]
    return out


def auc(scored: Scored) -> float:
    pos = [s for s, _, copy, _ in scored if copy]
    neg = [s for s, _, copy, _ in scored if not copy]
    return sum((p > q) + 0.5 * (p == q) for p in pos for q in neg) / (len(pos) * len(neg))


def roc_row(label: str, scored: Scored, thresholds: list[float]) -> str:
    neg = [s for s, _, copy, _ in scored if not copy]
    pos = [s for s, _, copy, _ in scored if copy]
    req = [s for s, _, _, must in scored if must]
    cells = [f"{sum(p >= t for p in pos) / len(pos):.2f} / {sum(q >= t for q in neg) / len(neg):.3f}"
             for t in thresholds]
    return (f"| {label} | {auc(scored):.3f} | {max(neg):.3f} | {min(req):.3f} | " + " | ".join(cells) + " |")


def main() -> int:
    thresholds_ref = [0.2, 0.25, 0.3, 0.33, 0.4, 0.5]
    thresholds_pair = [0.05, 0.08, 0.1, 0.15, 0.2, 0.35]
    containment = S.containment
    print("Reference check (TPR / FPR at each threshold; 'honest max' and 'required min' are scores)\n")
    print("| measure | AUC | honest max | required min | " + " | ".join(f"≥ {t}" for t in thresholds_ref) + " |")
    print("|---" * (4 + len(thresholds_ref)) + "|")
    for label, measure, n in (("2-gram containment (before)", containment, 2), ("3-gram overlap", S.overlap, 3),
                              ("4-gram overlap", S.overlap, 4), ("5-gram overlap (chosen)", S.overlap, 5),
                              ("6-gram overlap", S.overlap, 6), ("8-gram overlap", S.overlap, 8)):
        print(roc_row(label, reference_scores(measure, n), thresholds_ref))
    print("\nPair check\n")
    print("| measure | AUC | honest max | required min | " + " | ".join(f"≥ {t}" for t in thresholds_pair) + " |")
    print("|---" * (4 + len(thresholds_pair)) + "|")
    for label, measure, n in (("2-gram Jaccard (before)", S.jaccard, 2), ("3-gram Jaccard", S.jaccard, 3),
                              ("4-gram Jaccard", S.jaccard, 4), ("5-gram Jaccard (chosen)", S.jaccard, 5),
                              ("6-gram Jaccard", S.jaccard, 6)):
        print(roc_row(label, pair_scores(measure, n), thresholds_pair))
    print(f"\nChosen: {S.SHINGLE}-grams, reference overlap ≥ {S.REFERENCE_THRESHOLD}, "
          f"pair Jaccard ≥ {S.PAIR_THRESHOLD}\n")
    print("| check | level | copies | caught | lowest score |\n|---|---|---|---|---|")
    _, samples = load()
    level = {s.name: (s.level if s.level != "partial" else f"partial {round(s.kept * 100)} %") for s in samples}
    for check, scored, cut in (("reference", reference_scores(S.overlap, S.SHINGLE), S.REFERENCE_THRESHOLD),
                               ("pair", pair_scores(S.jaccard, S.SHINGLE), S.PAIR_THRESHOLD)):
        groups: dict[str, list[float]] = {}
        for score, name, copy, _ in scored:
            if copy:
                groups.setdefault(level.get(name, "answer_texts.py copy"), []).append(score)
        for name, scores in sorted(groups.items()):
            print(f"| {check} | {name} | {len(scores)} | {sum(s >= cut for s in scores)} | {min(scores):.2f} |")
        tp = sum(1 for s, _, copy, _ in scored if copy and s >= cut)
        fp = sum(1 for s, _, copy, _ in scored if not copy and s >= cut)
        pos = sum(1 for *_, copy, _ in scored if copy)
        req = [s for s, _, _, must in scored if must]
        print(f"| {check} | **all** | {pos} | {tp} (precision {tp / max(tp + fp, 1):.2f}, recall {tp / pos:.2f}; "
              f"required {sum(s >= cut for s in req)}/{len(req)}; honest flagged {fp}) | |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
