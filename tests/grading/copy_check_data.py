"""The copy-check calibration data (tests/grading/data/copy_check/explanation.yml) as samples: honest
answers, hand-edited copies (synonym-swapped, back-translated) and the mechanical copies built here
(verbatim, re-ordered, partial), each with its source: `reference` or an honest answer's id."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

import yaml
from answer_texts import references, site_text

DATA = Path(__file__).resolve().parent / "data" / "copy_check" / "explanation.yml"
_SENTENCE_END = re.compile(r"(?<=[。；;！？!?])|\n")


@dataclass(frozen=True)
class Sample:
    name: str
    text: str
    source: str = ""      # "" for an honest answer, else `reference` or the copied honest answer's id
    level: str = "honest"  # verbatim, reordered, synonyms, back_translated, partial
    kept: float = 0.0     # share of the source's sentences the copy keeps (1 for whole copies)
    filler: str = ""      # the honest answer whose sentences fill a partial copy


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text) if s and s.strip()]


def reordered(text: str) -> str:
    """The source's sentences in another order (the odd ones first, then the even ones, from the end),
    re-paired two to a line."""
    parts = sentences(text)
    order = parts[1::2][::-1] + parts[0::2][::-1]
    return "\n".join("".join(order[k:k + 2]) for k in range(0, len(order), 2))


def partial(text: str, kept: float, filler: str) -> str:
    """`kept` of the source's sentences (evenly spread), each followed by one of the filler's, and the
    filler's remaining sentences up to the source's length."""
    parts, own = sentences(text), sentences(filler)
    keep = max(1, math.ceil(kept * len(parts)))
    chosen = [parts[round(k * (len(parts) - 1) / max(keep - 1, 1))] for k in range(keep)] if keep > 1 else parts[:1]
    mixed = []
    for k, sentence in enumerate(chosen):
        mixed.append(sentence)
        if k < len(own):
            mixed.append(own[k])
    mixed += own[len(chosen):len(parts)]
    return "\n".join(mixed)


def load() -> tuple[str, list[Sample]]:
    """(the reference as a student copies it from the solution site, every sample)."""
    data = yaml.safe_load(DATA.read_text(encoding="utf-8"))
    reference = site_text(references()["explanation"])
    honest = {name: text.strip() for name, text in data["honest"].items()}
    texts = {"reference": reference, **honest}
    samples = [Sample(name, text) for name, text in honest.items()]
    for name, item in data["edited"].items():
        samples.append(Sample(name, item["text"].strip(), item["source"], item["level"], 1.0))
    for item in data["mechanical"]:
        source, level = item["source"], item["level"]
        if level == "verbatim":
            text, kept, name = texts[source], 1.0, f"{source}_verbatim"
        elif level == "reordered":
            text, kept, name = reordered(texts[source]), 1.0, f"{source}_reordered"
        else:
            kept = item["kept"]
            text = partial(texts[source], kept, texts[item["filler"]])
            name = f"{source}_partial{round(kept * 100)}_{item['filler']}"
        samples.append(Sample(name, text, source, level, kept, item.get("filler", "")))
    return reference, samples
