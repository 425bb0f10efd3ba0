"""Copy check for the written answers (explanation, Q1–Q3): flags for the instructor, never a score.

Text is compared as sets of character n-grams ("shingles", SHINGLE = 5 characters), which needs no
word segmentation and so works for Chinese as for English. Before shingling, an answer is normalised:
NFKC, lower case, math (`$…$`) dropped, letters taken apart from their marks (NFKD) and only letters
and digits kept, then recomposed (NFC): spaces, punctuation, Markdown, format characters (zero-width
spaces and joiners, Cf), combining and variation marks (M) and the invisible Hangul fillers that
Unicode counts as letters (FILLERS) never count, so text padded with invisible characters is
compared as the text it shows. Last, every character Unicode lists as confusable with others
(confusables.txt, as the confusable-homoglyphs package ships it) becomes one character for its whole
class (`lookalikes`: Cyrillic а and Greek α as Latin a, Greek ο as o, 1 and I as l), so a copy
spelled with lookalike letters is compared as the text it shows; NFKC alone does not fold them.

The cost of one answer is bounded: at most MAX_CHARS normalised characters of it (read from at most
MAX_RAW characters of text) are compared, and a longer answer is flagged over_budget(copy check: ...)
with the question and its length, for the instructor to read; each MinHash is built MINHASH_CHUNK
shingles at a time (its matrix of shingles × permutations would otherwise grow with the answer).

- copied_reference(q2 0.93): the answer and the lesson's reference answer for that question overlap
  by 0.93: the larger of the two containments |A ∩ R| / |A| and |A ∩ R| / |R|, so pasting half of a
  long reference among one's own sentences counts as much as a short answer made of reference text,
  in any order. The reference's shingles are taken as written and as rendered (its math's letters
  kept, as a student copying the page gets them). Flagged at REFERENCE_THRESHOLD.
- similar_answers(q1: s03, s17 0.88): two students' answers share 88 % of their shingles (Jaccard),
  after removing every shingle of the reference answer and of the question, so two copies of the
  reference are not "similar" to each other for that reason alone; flagged at PAIR_THRESHOLD.
  Students joined by such pairs form one group.

Shingle length and thresholds come from a calibration (docs/copy_check.md; data and test in
tests/grading/data/copy_check/ and tests/grading/test_copy_check_calibration.py): 40 honest answers
written independently from the points a good answer makes, and 21 copies of the reference or of a
classmate, verbatim, re-ordered, synonym-swapped, back-translated and partial. With 2-character
shingles (the earlier measure) honest answers that follow the prompt's structure reached 0.54
containment in the reference, above its 0.5 threshold; with 5, honest answers reach 0.29 against the
reference and 0.067 against each other, and every copy keeping half of its source's sentences
0.38 and 0.13 or more.

Pairs come from MinHash LSH (datasketch): each answer is hashed once and only answers that agree on
some LSH band are scored (exactly), so a class of thousands is far from n²/2 comparisons
(bench/bench_similarity.py). With 700 bands of 2 rows, a pair at PAIR_THRESHOLD is missed with
probability 9e-4, one at 0.13 (the calibration's lowest for a copy keeping half its source's
sentences) with 7e-6, while a pair of independent answers (Jaccard about 0.005) becomes a candidate
with probability 0.02 (candidate_probability). Answers shorter than MIN_CHARS normalised characters
are not compared: too little text to tell copying from a common short phrase. Thresholds:
autograder/README.md; tests: tests/grading/test_similarity.py, test_copy_check_calibration.py.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass, field

from datasketch import MinHash, MinHashLSH

from coursekit.grading.judge.flags import COPIED_REFERENCE, OVER_BUDGET, SIMILAR_ANSWERS, flag

SHINGLE = 5                 # characters per shingle: two to three Chinese words (calibrated: docs/copy_check.md)
MIN_CHARS = 40              # shorter normalised answers are not compared
REFERENCE_THRESHOLD = 0.33  # overlap of the answer and the reference answer
PAIR_THRESHOLD = 0.10       # Jaccard of two students' answers (reference and question text removed)
LSH_BANDS, LSH_ROWS = 700, 2  # 1400 MinHash values; a pair is a candidate if one band of 2 values agrees
NUM_PERM = LSH_BANDS * LSH_ROWS
MAX_LISTED = 6             # students named in one similar_answers flag
MAX_CHARS = 4000           # normalised characters of one answer compared (8x the longest reference answer)
MAX_RAW = 16 * MAX_CHARS   # characters of an answer's text read to find them
MINHASH_CHUNK = 256        # shingles hashed at once into a MinHash (its memory: chunk x NUM_PERM x 8 bytes)
# letters (category Lo) that show nothing: the Hangul fillers; Unicode's other invisible characters are
# format characters (Cf) or marks (Mn), which normalize drops by category
FILLERS = frozenset("\u115f\u1160\u3164\uffa0")

_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]*\$", re.S)
_TEX_COMMAND = re.compile(r"\\([A-Za-z]+)")
GREEK = {name: chr(0x3B1 + k) for k, name in enumerate(  # \pi -> π, as MathJax shows it; other commands vanish
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho varsigma sigma "
    "tau upsilon phi chi psi omega".split())}


def normalize(text: str, keep_math: bool = False) -> str:
    """Letters and digits only, NFKC, lower case, math removed (kept as its letters and digits with
    `keep_math`: what a student copying the rendered page gets, e.g. `$\\pm 1$` -> `pm1`), without
    marks, format characters and fillers, lookalikes folded (see the module's docstring); of the first
    MAX_RAW characters."""
    text = unicodedata.normalize("NFKC", text[:MAX_RAW])
    text = _TEX_COMMAND.sub(lambda m: GREEK.get(m[1], ""), text) if keep_math else _MATH.sub(" ", text)
    # lookalikes folded before lower case (Greek Ν is drawn as N, its lower case ν as v) and again after it
    text = unicodedata.normalize("NFKD", text.translate(lookalikes()).lower())
    kept = "".join(ch for ch in text if unicodedata.category(ch)[0] in "LN" and ch not in FILLERS)
    return unicodedata.normalize("NFC", kept).translate(lookalikes())


@functools.cache
def lookalikes() -> dict[int, str]:
    """A str.translate table: each character of a class of confusable characters -> the class's
    prototype, as in Unicode's skeleton (confusables.txt maps each confusable character to its class's
    prototype; the package lists each link both ways, so the prototype is the member with the most
    links), among the members NFKC leaves as they are (the text was NFKC-normalised: 大, not the Kangxi
    radical ⼤); of a pair, the first. Any one representative would do, as long as every text is folded alike."""
    from confusable_homoglyphs.confusables import confusables_data  # 0.9 MB of JSON: loaded on first use

    parent: dict[str, str] = {}
    root = functools.partial(_root, parent)

    for text, homoglyphs in confusables_data.items():
        for homoglyph in homoglyphs:
            a, b = root(text), root(homoglyph["c"])
            if a != b:
                parent[a] = b
    classes: dict[str, list[str]] = {}
    for text in parent:
        classes.setdefault(root(text), []).append(text)
    table = {}
    for members in classes.values():  # a class is a star: its prototype is linked to each of the others
        one = min(members, key=lambda t: (unicodedata.normalize("NFKC", t) != t, -len(confusables_data.get(t, ())), t))
        table.update((ord(t), one) for t in members if len(t) == 1 and t != one)
    return table


def shingles(text: str, n: int = SHINGLE, keep_math: bool = False) -> set[str]:
    """Character n-grams of the normalised text (its first MAX_CHARS characters)."""
    return _shingles_of(normalize(text, keep_math)[:MAX_CHARS], n)


def _shingles_of(norm: str, n: int = SHINGLE) -> set[str]:
    return {norm[k:k + n] for k in range(len(norm) - n + 1)}


def reference_shingles(reference: str) -> set[str]:
    """The reference's shingles as written and as rendered (its math's letters kept)."""
    return shingles(reference) | shingles(reference, keep_math=True)


def containment(part: set[str], whole: set[str]) -> float:
    return len(part & whole) / len(part) if part else 0.0


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def overlap(a: set[str], b: set[str]) -> float:
    """The larger containment: |A ∩ B| / min(|A|, |B|)."""
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def candidate_probability(similarity: float) -> float:
    """Chance that LSH proposes a pair of this Jaccard similarity: 1 - (1 - s^rows)^bands."""
    return 1 - (1 - similarity ** LSH_ROWS) ** LSH_BANDS


def candidate_pairs(sets: dict[str, set[str]]) -> set[tuple[str, str]]:
    """Pairs (a, b), a < b, that agree on at least one LSH band of their MinHash signatures."""
    names = sorted(n for n, s in sets.items() if s)
    if len(names) < 2:
        return set()
    lsh = MinHashLSH(num_perm=NUM_PERM, params=(LSH_BANDS, LSH_ROWS))
    found = set()
    for name in names:
        minhash = _minhash(sets[name])
        for other in lsh.query(minhash):
            found.add((min(name, other), max(name, other)))
        lsh.insert(name, minhash)
    return found


def _minhash(items: set[str]) -> MinHash:
    """The MinHash of a set, hashed MINHASH_CHUNK items at a time (the same values as in one batch)."""
    minhash = MinHash(num_perm=NUM_PERM, seed=1)
    ordered = [s.encode() for s in sorted(items)]
    for start in range(0, len(ordered), MINHASH_CHUNK):
        minhash.update_batch(ordered[start:start + MINHASH_CHUNK])
    return minhash


def similar_pairs(sets: dict[str, set[str]], threshold: float = PAIR_THRESHOLD) -> list[tuple[str, str, float]]:
    """Pairs (a, b, Jaccard) with Jaccard >= threshold, a < b: LSH candidates, scored exactly."""
    scored = ((a, b, jaccard(sets[a], sets[b])) for a, b in sorted(candidate_pairs(sets)))
    return [(a, b, s) for a, b, s in scored if s >= threshold]


@dataclass
class QuestionCheck:
    """One question's results: reference containment per student, groups of similar answers, and the
    answers longer than MAX_CHARS (student -> characters of its text), of which the first were compared."""

    copied: dict[str, float]
    pairs: list[tuple[str, str, float]]
    cut: dict[str, int] = field(default_factory=dict)


def check_question(answers: dict[str, str], reference: str, question: str = "") -> QuestionCheck:
    """Compare each answer with the reference, and every answer with every other (through LSH)."""
    normalized = {sid: normalize(text) for sid, text in answers.items()}
    cut = {sid: len(answers[sid]) for sid, norm in normalized.items()
           if len(norm) > MAX_CHARS or len(answers[sid]) > MAX_RAW}
    long_enough = {sid: _shingles_of(norm[:MAX_CHARS]) for sid, norm in normalized.items() if len(norm) >= MIN_CHARS}
    ref = reference_shingles(reference)
    copied = {sid: c for sid, s in long_enough.items() if (c := overlap(s, ref)) >= REFERENCE_THRESHOLD}
    common = ref | shingles(question)
    own = {sid: s - common for sid, s in long_enough.items()}
    own = {sid: s for sid, s in own.items() if len(s) >= MIN_CHARS - SHINGLE + 1}
    return QuestionCheck(copied, similar_pairs(own), cut)


def copy_flags(answers: dict[str, dict[str, str]], references: dict[str, str],
               questions: dict[str, str] | None = None) -> dict[str, list[str]]:
    """answers[student][question] -> {student: [flag, ...]} with copied_reference / similar_answers, and
    over_budget for an answer of which only the first MAX_CHARS normalised characters were compared."""
    questions = questions or {}
    copied: dict[str, list[str]] = {}
    similar: dict[str, list[str]] = {}
    cut: dict[str, list[str]] = {}
    for qid in references:
        result = check_question({sid: a[qid] for sid, a in answers.items() if qid in a}, references[qid],
                                questions.get(qid, ""))
        for sid, value in sorted(result.copied.items()):
            copied.setdefault(sid, []).append(f"{qid} {value:.2f}")
        for sid, (group, best) in groups(result.pairs).items():
            listed = ", ".join(group[:MAX_LISTED]) + (f", … (+{len(group) - MAX_LISTED})"
                                                      if len(group) > MAX_LISTED else "")
            similar.setdefault(sid, []).append(flag(SIMILAR_ANSWERS, f"{qid}: {listed} {best:.2f}"))
        for sid, length in sorted(result.cut.items()):
            cut.setdefault(sid, []).append(flag(OVER_BUDGET, f"copy check: {qid} has {length} characters, "
                                                             f"its first {MAX_CHARS} letters and digits compared"))
    flags: dict[str, list[str]] = {}
    for sid in sorted(set(copied) | set(similar) | set(cut)):
        flags[sid] = (([flag(COPIED_REFERENCE, ", ".join(copied[sid]))] if sid in copied else [])
                      + similar.get(sid, []) + cut.get(sid, []))
    return flags


def _root(parent: dict[str, str], x: str) -> str:
    """The representative of x's set in a union-find forest (`parent`), halving the path on the way."""
    while parent.setdefault(x, x) != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


def groups(pairs: list[tuple[str, str, float]]) -> dict[str, tuple[list[str], float]]:
    """Connected groups of similar pairs: student -> (sorted members, its highest similarity in the group)."""
    parent: dict[str, str] = {}
    root = functools.partial(_root, parent)

    best: dict[str, float] = {}
    for a, b, s in pairs:
        parent[root(a)] = root(b)
        best[a], best[b] = max(best.get(a, 0.0), s), max(best.get(b, 0.0), s)
    members: dict[str, list[str]] = {}
    for sid in sorted(best):
        members.setdefault(root(sid), []).append(sid)
    return {sid: (members[root(sid)], best[sid]) for sid in best}
