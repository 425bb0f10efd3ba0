"""Benchmark: the copy check's MinHash LSH (coursekit.grading.records.similarity.similar_pairs) vs comparing
every pair of answers, on synthetic classes of 500, 1000 and 2000 answers to one question.

Answers are drawn from the test answers' words (so independent answers share topic words, as real ones
do), with 2 % planted copies that keep about 90 % of their original. Prints CPU seconds of both, their
ratio, the pairs each scored exactly, and how many of the pairs found by comparing all LSH found.
No speed target in seconds: the ratio should grow with the class (LSH is about linear, all pairs
quadratic). Run: .venv/bin/python bench/bench_similarity.py
"""

from __future__ import annotations

import itertools
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "grading"))

from answer_texts import INDEPENDENT, PARAPHRASED, QUESTIONS  # noqa: E402

from coursekit.grading.records import similarity as S  # noqa: E402


def synthetic_class(n: int, seed: int = 5) -> dict[str, set[str]]:
    """n answers of 60 two-character words drawn with the test answers' word frequencies (independent
    answers then share about 3 % of their shingles, as the real ones do), 2 % of them planted copies."""
    rng = random.Random(seed)
    text = "".join(S.normalize(t) for q in QUESTIONS for t in (*INDEPENDENT[q], PARAPHRASED[q]))
    words = [text[k:k + 2] for k in range(0, len(text) - 1, 2)]
    sets = {f"s{k:05d}": S.shingles("".join(rng.choice(words) for _ in range(60))) for k in range(n)}
    for k in range(0, n // 25, 2):
        base = sorted(sets[f"s{k:05d}"])
        sets[f"s{k + 1:05d}"] = set(rng.sample(base, int(len(base) * 0.9))) | {f"x{k}{j}" for j in range(8)}
    return sets


def all_pairs(sets: dict[str, set[str]]) -> list[tuple[str, str, float]]:
    scored = ((a, b, S.jaccard(sets[a], sets[b])) for a, b in itertools.combinations(sorted(sets), 2))
    return [p for p in scored if p[2] >= S.PAIR_THRESHOLD]


def cpu(run, *args):
    start = time.process_time()
    result = run(*args)
    return time.process_time() - start, result


def main() -> int:
    print("answers  all-pairs CPU s  LSH CPU s  ratio  pairs scored (all / LSH)  similar pairs found (LSH / all)")
    for n in (500, 1000, 2000):
        sets = synthetic_class(n)
        t_all, exact = cpu(all_pairs, sets)
        t_lsh, found = cpu(S.similar_pairs, sets)
        candidates = len(S.candidate_pairs(sets))
        print(f"{n:7d}  {t_all:15.2f}  {t_lsh:9.2f}  {t_all / t_lsh:5.1f}  {n * (n - 1) // 2:>10d} / {candidates:<9d}"
              f"  {len(set(found) & set(exact))} / {len(exact)}")
    print("(CPU seconds of this process; the machine may be loaded, compare the ratios)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
