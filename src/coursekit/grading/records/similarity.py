"""Copy check for the written answers (explanation, Q1–Q3): flags for the instructor, never a score.

Text is compared as sets of character n-grams ("shingles"), which needs no word segmentation and so
works for Chinese as for English. Before shingling, an answer is normalised: NFKC, lower case, math
(`$…$`) dropped, and only letters and digits kept (spaces, punctuation and Markdown never count).

- copied_reference(q2 0.93): 93 % of the answer's shingles occur in the lesson's reference answer
  for that question (containment |A ∩ R| / |A|, so copying part of a long reference counts too);
  flagged at REFERENCE_THRESHOLD.
- similar_answers(q1: s03, s17 0.88): two students' answers share 88 % of their shingles (Jaccard
  |A ∩ B| / |A ∪ B|), after removing every shingle of the reference answer and of the question,
  so two copies of the reference are not "similar" to each other for that reason alone; flagged at
  PAIR_THRESHOLD. Students joined by such pairs form one group.

Pairs come from MinHash LSH (datasketch): each answer is hashed once and only answers that agree on
some LSH band are scored (exactly), so a class of thousands is far from n²/2 comparisons
(bench/bench_similarity.py). With 170 bands of 3 rows, a pair exactly at PAIR_THRESHOLD is missed
with probability 6e-4, one at 0.5 with 1e-10, while a pair of independent answers (Jaccard about
0.05) becomes a candidate with probability 0.02 (candidate_probability).
Answers shorter than MIN_CHARS normalised characters are not compared: too little text to tell
copying from a common short phrase. Thresholds: autograder/README.md; tests: tests/grading/test_similarity.py.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from datasketch import MinHash, MinHashLSH

from coursekit.grading.judge.flags import COPIED_REFERENCE, SIMILAR_ANSWERS, flag

SHINGLE = 2                # characters per shingle: about one Chinese word
MIN_CHARS = 40             # shorter normalised answers are not compared
REFERENCE_THRESHOLD = 0.5  # containment of the answer in the reference answer
PAIR_THRESHOLD = 0.35      # Jaccard between two students' answers (reference and question text removed)
LSH_BANDS, LSH_ROWS = 170, 3  # 510 MinHash values; a pair is a candidate if one band of 3 values agrees
NUM_PERM = LSH_BANDS * LSH_ROWS
MAX_LISTED = 6             # students named in one similar_answers flag

_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$", re.S)


def normalize(text: str) -> str:
    """Letters and digits only, NFKC, lower case, math removed."""
    text = _MATH.sub(" ", unicodedata.normalize("NFKC", text)).lower()
    return "".join(ch for ch in text if unicodedata.category(ch)[0] in "LN")


def shingles(text: str, n: int = SHINGLE) -> set[str]:
    """Character n-grams of the normalised text."""
    norm = normalize(text)
    return {norm[k:k + n] for k in range(len(norm) - n + 1)}


def containment(part: set[str], whole: set[str]) -> float:
    return len(part & whole) / len(part) if part else 0.0


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def candidate_probability(similarity: float) -> float:
    """Chance that LSH proposes a pair of this Jaccard similarity: 1 - (1 - s^rows)^bands."""
    return 1 - (1 - similarity ** LSH_ROWS) ** LSH_BANDS


def candidate_pairs(sets: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Pairs (a, b), a < b, that agree on at least one LSH band of their MinHash signatures."""
    names = sorted(n for n, s in sets.items() if s)
    if len(names) < 2:
        return set()
    hashes = MinHash.bulk([[s.encode() for s in sorted(sets[n])] for n in names], num_perm=NUM_PERM, seed=1)
    lsh = MinHashLSH(num_perm=NUM_PERM, params=(LSH_BANDS, LSH_ROWS))
    found = set()
    for name, minhash in zip(names, hashes, strict=True):
        for other in lsh.query(minhash):
            found.add((min(name, other), max(name, other)))
        lsh.insert(name, minhash)
    return found


def similar_pairs(sets: dict[str, set[str]], threshold: float = PAIR_THRESHOLD) -> list[tuple[str, str, float]]:
    """Pairs (a, b, Jaccard) with Jaccard >= threshold, a < b: LSH candidates, scored exactly."""
    scored = ((a, b, jaccard(sets[a], sets[b])) for a, b in sorted(candidate_pairs(sets)))
    return [(a, b, s) for a, b, s in scored if s >= threshold]


@dataclass
class QuestionCheck:
    """One question's results: reference containment per student, and groups of similar answers."""

    copied: dict[str, float]
    pairs: list[tuple[str, str, float]]


def check_question(answers: dict[str, str], reference: str, question: str = "") -> QuestionCheck:
    """Compare each answer with the reference, and every answer with every other (through LSH)."""
    long_enough = {sid: shingles(text) for sid, text in answers.items() if len(normalize(text)) >= MIN_CHARS}
    ref = shingles(reference)
    copied = {sid: c for sid, s in long_enough.items() if (c := containment(s, ref)) >= REFERENCE_THRESHOLD}
    common = ref | shingles(question)
    own = {sid: s - common for sid, s in long_enough.items()}
    own = {sid: s for sid, s in own.items() if len(s) >= MIN_CHARS - SHINGLE + 1}
    return QuestionCheck(copied, similar_pairs(own))


def copy_flags(answers: dict[str, dict[str, str]], references: dict[str, str],
               questions: dict[str, str] | None = None) -> dict[str, list[str]]:
    """answers[student][question] -> {student: [flag, ...]} with copied_reference / similar_answers."""
    questions = questions or {}
    copied: dict[str, list[str]] = {}
    similar: dict[str, list[str]] = {}
    for qid in references:
        result = check_question({sid: a[qid] for sid, a in answers.items() if qid in a}, references[qid],
                                questions.get(qid, ""))
        for sid, value in sorted(result.copied.items()):
            copied.setdefault(sid, []).append(f"{qid} {value:.2f}")
        for sid, (group, best) in groups(result.pairs).items():
            listed = ", ".join(group[:MAX_LISTED]) + (f", … (+{len(group) - MAX_LISTED})"
                                                      if len(group) > MAX_LISTED else "")
            similar.setdefault(sid, []).append(flag(SIMILAR_ANSWERS, f"{qid}: {listed} {best:.2f}"))
    flags: dict[str, list[str]] = {}
    for sid in sorted(set(copied) | set(similar)):
        flags[sid] = ([flag(COPIED_REFERENCE, ", ".join(copied[sid]))] if sid in copied else []) + similar.get(sid, [])
    return flags


def groups(pairs: list[tuple[str, str, float]]) -> dict[str, tuple[list[str], float]]:
    """Connected groups of similar pairs: student -> (sorted members, its highest similarity in the group)."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    best: dict[str, float] = {}
    for a, b, s in pairs:
        parent[root(a)] = root(b)
        best[a], best[b] = max(best.get(a, 0.0), s), max(best.get(b, 0.0), s)
    members: dict[str, list[str]] = {}
    for sid in sorted(best):
        members.setdefault(root(sid), []).append(sid)
    return {sid: (members[root(sid)], best[sid]) for sid in best}
