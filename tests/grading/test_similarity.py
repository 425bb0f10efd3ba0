"""The copy check's measure and thresholds (coursekit.grading.records.similarity) on written answers that are
copied, lightly edited, paraphrased or independent (tests/grading/answer_texts.py)."""

from __future__ import annotations

import itertools
import random
import re
import tracemalloc

import pytest
from answer_texts import CLASSMATE_EDITED, EDITED, INDEPENDENT, PARAPHRASED, QUESTIONS, references, site_text

from coursekit.grading.records import similarity as S

REFS = references()


def reference_score(text: str, qid: str) -> float:
    return S.overlap(S.shingles(text), S.reference_shingles(REFS[qid]))


@pytest.mark.parametrize("qid", QUESTIONS)
def test_copied_and_lightly_edited_answers_reach_the_reference_threshold(qid):
    assert reference_score(site_text(REFS[qid]), qid) >= 0.8
    assert reference_score(EDITED[qid], qid) >= S.REFERENCE_THRESHOLD


@pytest.mark.parametrize("qid", QUESTIONS)
def test_paraphrased_and_independent_answers_stay_well_below_it(qid):
    for text in [PARAPHRASED[qid], *INDEPENDENT[qid]]:
        assert reference_score(text, qid) < S.REFERENCE_THRESHOLD - 0.1


def own(text: str, qid: str) -> set[str]:
    return S.shingles(text) - S.reference_shingles(REFS[qid])


@pytest.mark.parametrize("qid", QUESTIONS)
def test_a_classmates_edited_copy_is_similar_and_independent_answers_are_not(qid):
    assert S.jaccard(own(INDEPENDENT[qid][1], qid), own(CLASSMATE_EDITED[qid], qid)) >= S.PAIR_THRESHOLD
    others = [EDITED[qid], PARAPHRASED[qid], *INDEPENDENT[qid]]
    for a, b in itertools.combinations(others, 2):
        assert S.jaccard(own(a, qid), own(b, qid)) < S.PAIR_THRESHOLD / 2


def test_normalisation_ignores_markdown_spacing_punctuation_and_math():
    assert S.normalize("**总体方差**（除以 $G$）， std < eps！") == S.normalize("总体方差除以 std<eps")
    assert S.normalize("ＡＢＣ１２３") == S.normalize("abc123")  # NFKC: full-width letters and digits


def class_answers(qid: str) -> dict[str, str]:
    return {"copy": site_text(REFS[qid]), "edit": EDITED[qid], "para": PARAPHRASED[qid],
            "ind0": INDEPENDENT[qid][0], "ind1": INDEPENDENT[qid][1], "ind2": INDEPENDENT[qid][2],
            "mate": CLASSMATE_EDITED[qid]}


def test_copy_flags_name_exactly_the_copies():
    answers: dict[str, dict[str, str]] = {}
    for qid in QUESTIONS:
        for sid, text in class_answers(qid).items():
            answers.setdefault(sid, {})[qid] = text
    flags = S.copy_flags(answers, REFS)
    assert set(flags) == {"copy", "edit", "ind1", "mate"}
    assert [f.split("(")[0] for f in flags["copy"]] == ["copied_reference"]
    assert re.fullmatch(r"copied_reference\(explanation [01]\.\d\d, q1 [01]\.\d\d, q2 [01]\.\d\d, q3 [01]\.\d\d\)",
                        flags["copy"][0])
    assert flags["ind1"] == flags["mate"]
    assert [f.split(" 0.")[0] for f in flags["mate"]] == [
        f"similar_answers({qid}: ind1, mate" for qid in QUESTIONS]


def test_two_copies_of_the_reference_are_not_flagged_as_similar_to_each_other():
    text = site_text(REFS["q2"])
    flags = S.copy_flags({"a": {"q2": text}, "b": {"q2": text + "（抄自参考答案）"}}, REFS)
    assert {sid: [f.split(" ")[0] for f in found] for sid, found in flags.items()} == {
        "a": ["copied_reference(q2"], "b": ["copied_reference(q2"]}


def test_short_answers_are_not_compared():
    short = "输入一组回答与奖励，组内标准化得到优势，输出策略更新。"  # 25 characters, identical for both
    assert len(S.normalize(short)) < S.MIN_CHARS
    assert S.copy_flags({"a": {"q1": short}, "b": {"q1": short}}, REFS) == {}


def test_a_group_of_three_is_named_in_each_members_flag():
    text = INDEPENDENT["q3"][1]
    answers = {"s1": {"q3": text}, "s2": {"q3": CLASSMATE_EDITED["q3"]}, "s3": {"q3": text + "我同意。"},
               "s4": {"q3": INDEPENDENT["q3"][0]}}
    flags = S.copy_flags(answers, REFS)
    assert set(flags) == {"s1", "s2", "s3"}
    assert all(f[0].startswith("similar_answers(q3: s1, s2, s3 ") for f in flags.values())


def test_lsh_finds_the_same_pairs_as_comparing_every_pair():
    """300 answers built from the same topic sentences, with planted copies: LSH misses none of the
    pairs an exhaustive comparison finds at Jaccard 0.13 or more (the calibration's copies) and at most
    one in a thousand between the threshold and 0.15."""
    rng = random.Random(11)
    pool = [s for qid in QUESTIONS for t in (*INDEPENDENT[qid], PARAPHRASED[qid]) for s in t.split("，") if s]
    sets = {f"s{k:03d}": S.shingles("，".join(rng.sample(pool, 6))) for k in range(300)}
    for k in range(0, 40, 2):  # twenty planted pairs: a copy with about a tenth of its shingles changed
        base = sorted(sets[f"s{k:03d}"])
        sets[f"s{k + 1:03d}"] = set(rng.sample(base, int(len(base) * 0.9))) | {f"x{k}{j}" for j in range(8)}
    exhaustive = {(a, b, S.jaccard(sets[a], sets[b])) for a, b in itertools.combinations(sorted(sets), 2)
                  if S.jaccard(sets[a], sets[b]) >= S.PAIR_THRESHOLD}
    found = set(S.similar_pairs(sets))
    assert found <= exhaustive and {(f"s{k:03d}", f"s{k + 1:03d}") for k in range(0, 40, 2)} <= {p[:2] for p in found}
    missed = exhaustive - found
    assert all(score < 0.13 for *_, score in missed) and len(missed) <= len(exhaustive) / 1000, missed


def test_candidate_probability_at_the_thresholds():
    """0.13: the lowest Jaccard of a calibration copy that keeps half of its source's sentences; 0.005:
    about that of two independent answers (docs/copy_check.md)."""
    assert 1 - S.candidate_probability(S.PAIR_THRESHOLD) < 1e-3 and 1 - S.candidate_probability(0.13) < 1e-5
    assert S.candidate_probability(0.005) < 0.02


# ---------------------------------------------------------------- issue 30: invisible padding, long answers

INVISIBLE = {
    "hangul_filler": "\u1160", "hangul_choseong_filler": "\u115f", "hangul_compat_filler": "\u3164",
    "halfwidth_hangul_filler": "\uffa0", "zero_width_space": "\u200b", "zero_width_joiner": "\u200d",
    "word_joiner": "\u2060", "soft_hyphen": "\u00ad", "variation_selector": "\ufe0f",
    "combining_grapheme_joiner": "\u034f", "combining_dot": "\u0307", "tag_space": "\U000e0020",
}


@pytest.mark.parametrize("name", INVISIBLE)
@pytest.mark.parametrize("qid", QUESTIONS)
def test_a_reference_padded_with_an_invisible_character_is_still_the_reference(qid, name):
    """Issue 30, item 5: the reference with an invisible character after every letter shows as the
    reference (U+1160, a Hangul filler, is a letter for Unicode: it was kept and hid the copy)."""
    padded = "".join(ch + INVISIBLE[name] for ch in site_text(REFS[qid]))
    assert reference_score(padded, qid) >= 0.8
    flags = S.copy_flags({"s1": {qid: padded}, "s2": {qid: INDEPENDENT[qid][0]}}, {qid: REFS[qid]})
    assert S.COPIED_REFERENCE in " ".join(flags.get("s1", [])) and "s2" not in flags


def test_accented_and_decomposed_spellings_compare_alike():
    assert S.normalize("Cafe\u0301 déjà") == S.normalize("café deja") == "cafedeja"
    assert S.normalize("한국어") == "한국어"  # Hangul syllables recomposed after their jamo are taken apart


# Latin letters -> Cyrillic, Greek and Armenian letters drawn alike (written by hand, not from the table
# the check uses): what NFKC leaves as they are
LOOKALIKES = str.maketrans({
    "a": "\u0430", "c": "\u0441", "e": "\u0435", "i": "\u0456", "j": "\u0458", "o": "\u043e", "p": "\u0440",
    "s": "\u0455", "x": "\u0445", "y": "\u0443", "h": "\u04bb", "d": "\u0501", "l": "\u04c0", "v": "\u03bd",
    "u": "\u03c5", "w": "\u051d", "g": "\u0261", "n": "\u0578", "A": "\u0410", "B": "\u0392",
    "C": "\u0421", "E": "\u0395", "H": "\u041d", "K": "\u039a", "M": "\u041c", "O": "\u039f", "P": "\u0420",
    "T": "\u03a4", "X": "\u03a7", "Y": "\u03a5", "N": "\u039d", "Z": "\u0396", "I": "\u0399"})
ENGLISH = {  # a student answering q1 in English, and a classmate's honest answer of the same length
    "own": "Sequence-level normalisation divides each response's summed token losses by its own length, so "
           "every response weighs the same whatever its length; token-level normalisation divides the whole "
           "group's summed losses by the total token count, so a long wrong response gets more weight per "
           "response and its tokens are not diluted.",
    "other": "I think the main point is which denominator is used. With the mean over answers each completion "
             "is one vote; when averaging over tokens, longer completions contribute more terms, which changes "
             "how strongly verbose mistakes are punished during the policy update step.",
}


@pytest.mark.parametrize("qid", QUESTIONS)
def test_a_reference_spelled_with_lookalike_letters_is_still_the_reference(qid):
    """NFKC leaves Cyrillic а and Greek ο as they are: the reference with its Latin letters swapped for
    lookalikes scored 0.63-0.78 (its Chinese alone), now what the plain copy scores."""
    disguised = site_text(REFS[qid]).translate(LOOKALIKES)
    assert disguised != site_text(REFS[qid])
    assert reference_score(disguised, qid) == reference_score(site_text(REFS[qid]), qid) >= 0.8


def test_a_classmates_english_answer_in_lookalike_letters_is_similar_and_honest_answers_are_not():
    """A copy in another alphabet shared no shingle with its source (Jaccard 0); honest answers, the
    Chinese ones of every question and an English one, are flagged with nothing."""
    qid = "q1"
    answers = {"s1": {qid: ENGLISH["own"]}, "s2": {qid: ENGLISH["own"].translate(LOOKALIKES)},
               "s3": {qid: ENGLISH["other"]}}
    flags = S.copy_flags(answers, {qid: REFS[qid]})
    assert set(flags) == {"s1", "s2"}
    assert all(f.startswith(f"similar_answers({qid}: ") for f in flags["s1"] + flags["s2"]), flags
    honest = {f"ind{k}": {q: INDEPENDENT[q][k] for q in QUESTIONS} for k in range(3)}
    honest["en"] = {qid: ENGLISH["other"]}
    assert S.copy_flags(honest, REFS) == {}


def test_lookalikes_fold_to_one_letter_and_chinese_keeps_its_characters():
    assert S.normalize("Ρаѕѕwоrd Αlpha") == S.normalize("password alpha")
    table = S.lookalikes()
    chinese = {c for q in QUESTIONS for k in range(3) for c in INDEPENDENT[q][k] if "\u4e00" <= c <= "\u9fff"}
    folded = {c: table[ord(c)] for c in chinese if ord(c) in table}
    assert len(chinese) > 200 and len(folded) <= 5 and not any(t.isascii() for t in folded.values()), folded


def test_a_long_answer_costs_a_bounded_amount_and_is_flagged_with_what_was_compared():
    """A 150 000-character answer: only its first MAX_CHARS letters and digits are compared (the MinHash
    of an answer grew with its length: 1.8 GB for `make grade`), and the flag says so."""
    qid = QUESTIONS[0]
    rng = random.Random(3)
    long_answer = site_text(REFS[qid]) + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(150_000))
    assert len(S.shingles(long_answer)) <= S.MAX_CHARS
    short = {"short": {qid: INDEPENDENT[qid][0]}, "other": {qid: INDEPENDENT[qid][1]}}
    tracemalloc.start()
    S.copy_flags(short, {qid: REFS[qid]})
    without = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    flags = S.copy_flags({"long": {qid: long_answer}, **short}, {qid: REFS[qid]})
    with_long = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert with_long < 4 * without, (with_long, without)  # was 1.7 GB against 0.16 GB (peak RSS)
    text = " ".join(flags["long"])
    assert S.COPIED_REFERENCE in text  # the reference at its start is still found
    assert f"over_budget(copy check: {qid} has {len(long_answer)} characters, its first {S.MAX_CHARS}" in text
    assert "short" not in flags


def test_the_minhash_built_in_chunks_is_the_one_built_at_once():
    from datasketch import MinHash

    items = {f"s{k:05d}" for k in range(3 * S.MINHASH_CHUNK + 7)}
    whole = MinHash.bulk([[s.encode() for s in sorted(items)]], num_perm=S.NUM_PERM, seed=1)[0]
    assert (S._minhash(items).hashvalues == whole.hashvalues).all()
