"""Hypothesis strategies that mutate a submission's JSON (issue 30's fuzzer, tests/grading/test_notebook_fuzz.py).

A mutant is (base, ops): `base` names the notebook mutated ("correct": the reference solution,
"blank": the release as handed out) and `ops` is a list of plain-data operations, so that a finding
can be written down as a Hypothesis `@example` and replayed. `apply_ops` applies them to the JSON
(a dict), never raising: an operation that does not fit the notebook it meets does nothing.

Every string a mutant can put in a page carries MARKER, so a test can tell the student's markup
from the page's own.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import strategies as st

MARKER = "ckfuzz"
HOSTILE_TEXT = [
    f"<script>window.{MARKER}=1</script>", f"<img src=x onerror={MARKER}()>", f"1 onerror={MARKER}()",
    f'1" onerror="{MARKER}()', f"1 style=position:fixed;inset:0;{MARKER}", f"javascript:{MARKER}()",
    f"<a href='javascript:{MARKER}()'>x</a>", f"<svg onload={MARKER}()>", f"<style>*{{{MARKER}:1}}</style>",
    f"$\\href{{javascript:{MARKER}()}}{{x}}$", f"<iframe src=javascript:{MARKER}()>", f"[x](javascript:{MARKER}())",
]
GRADE_IDS = ["group_advantages", "test_normal", "test_boundary", "test_aggregation", "explanation", "q1", "q2",
             "q3", "", "nope", "test_normal ", "../x"]
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 1 << 40), st.floats(allow_nan=True),
                    st.sampled_from(HOSTILE_TEXT), st.sampled_from(GRADE_IDS), st.text(max_size=12))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                     st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                    max_leaves=8)
NBGRADER_FIELDS = ["solution", "grade", "locked", "points", "grade_id", "schema_version", "checksum", "task",
                   "cell_type"]
NBGRADER_VALUES = st.one_of(st.booleans(), st.none(), st.sampled_from([0, 1, 1.5, 3, 99, -1, "1", "lots", [], {}]),
                            st.sampled_from(GRADE_IDS), JSON)
CELL_PATHS = [("transient",), ("transient", "remove_source"), ("jupyter", "source_hidden"),
              ("jupyter", "outputs_hidden"), ("collapsed",), ("hide_input",), ("tags",), ("course_answer_id",),
              ("editable",), ("deletable",), ("trusted",), ("execution",), ("magics_language",), ("echo",),
              ("scrolled",), ("nbgrader",)]
TAGS = st.lists(st.sampled_from(["course-exercise", "course-answer", "remove-input", "remove_cell", "hide-cell",
                                 "hide_input", "remove-output", f"x{MARKER}", "raises-exception"]), max_size=3)
NB_PATHS = [("kernelspec",), ("kernelspec", "name"), ("language_info",), ("hide_input",), ("widgets",), ("title",),
            ("nbgrader",), ("coursekit_findings",), ("jupytext",)]
OUTPUT_TYPES = ["display_data", "execute_result", "stream", "error", "update_display_data", "weird"]
MIMES = ["text/plain", "text/html", "text/markdown", "image/png", "image/jpeg", "image/svg+xml",
         "application/javascript", "text/latex", "application/vnd.jupyter.widget-view+json", "text/x-junk"]
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
IMAGE_METADATA = st.fixed_dictionaries({}, optional={
    "width": st.one_of(st.sampled_from(HOSTILE_TEXT), st.integers(-5, 5000), st.floats()),
    "height": st.one_of(st.sampled_from(HOSTILE_TEXT), st.integers(-5, 5000)),
    "unconfined": st.booleans(), "needs_background": st.sampled_from(["light", "dark", MARKER]),
    "filenames": st.just({"image/png": f"x onerror={MARKER}()"}),
    "image/png": st.fixed_dictionaries({}, optional={"width": st.sampled_from(HOSTILE_TEXT + [40]),
                                                     "height": st.sampled_from(HOSTILE_TEXT + [40])}),
})
OUTPUTS = st.fixed_dictionaries(
    {"output_type": st.sampled_from(OUTPUT_TYPES)},
    optional={"data": st.dictionaries(st.sampled_from(MIMES), st.one_of(st.sampled_from(HOSTILE_TEXT), st.just(PNG)),
                                      max_size=3),
              "metadata": st.one_of(IMAGE_METADATA, JSON), "name": st.sampled_from(["stdout", "stderr", MARKER]),
              "text": st.sampled_from(HOSTILE_TEXT), "execution_count": st.one_of(st.none(), st.integers(-1, 5)),
              "ename": st.sampled_from(HOSTILE_TEXT), "evalue": st.sampled_from(HOSTILE_TEXT),
              "traceback": st.lists(st.sampled_from(HOSTILE_TEXT), max_size=2), "transient": JSON})
INDEX = st.integers(0, 63)  # taken modulo the number of cells
CELL_FIELDS = ["source", "outputs", "execution_count", "attachments", "metadata", "cell_type", "id"]

OPS = st.one_of(
    st.tuples(st.just("cell_meta"), INDEX, st.sampled_from(CELL_PATHS), st.one_of(JSON, TAGS, st.just(True))),
    st.tuples(st.just("nbgrader"), INDEX, st.sampled_from(NBGRADER_FIELDS), NBGRADER_VALUES),
    st.tuples(st.just("nbgrader_del"), INDEX, st.sampled_from(NBGRADER_FIELDS)),
    st.tuples(st.just("nb_meta"), st.sampled_from(NB_PATHS), JSON),
    st.tuples(st.just("cell_type"), INDEX, st.sampled_from(["code", "markdown", "raw", "heading", "", 5])),
    st.tuples(st.just("cell_id"), INDEX, st.one_of(st.sampled_from(["DUP", "DELETE", "a" * 65, "bad id!", "", 7]),
                                                   st.text(max_size=8))),
    st.tuples(st.just("cell_field"), INDEX, st.sampled_from(CELL_FIELDS), st.one_of(st.just("DELETE"), JSON)),
    st.tuples(st.just("output"), INDEX, OUTPUTS),
    st.tuples(st.just("attachment"), INDEX, st.sampled_from(["a.png", "b.svg", f"{MARKER}.html"]),
              st.sampled_from(["image/png", "image/svg+xml", "text/html"]),
              st.sampled_from([PNG, f"<svg onload={MARKER}()>", "not base64 !"])),
    st.tuples(st.just("markdown_text"), INDEX, st.sampled_from(HOSTILE_TEXT)),
    st.tuples(st.just("nbformat"), st.sampled_from([3, 4, 5, "4", None]), st.sampled_from([0, 4, 5, 99, "5", None])),
    st.tuples(st.just("top"), st.sampled_from(["cells", "metadata", "nbformat", "nbformat_minor", "extra"]),
              st.one_of(st.just("DELETE"), JSON)),
    st.tuples(st.just("dup_cell"), INDEX), st.tuples(st.just("del_cell"), INDEX),
    st.tuples(st.just("move_cell"), INDEX, INDEX), st.tuples(st.just("grow"), INDEX, st.integers(2, 2000)),
)
MUTANTS = st.tuples(st.sampled_from(["correct", "blank"]), st.lists(OPS, min_size=1, max_size=4))


def _cell(nb: dict, index: int) -> dict | None:
    cells = nb.get("cells")
    if not isinstance(cells, list) or not cells:
        return None
    cell = cells[index % len(cells)]
    return cell if isinstance(cell, dict) else None


def _set_path(target: Any, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        if not isinstance(target, dict):
            return
        if not isinstance(target.get(key), dict):
            target[key] = {}
        target = target[key]
    if isinstance(target, dict):
        target[path[-1]] = copy.deepcopy(value)


def _meta(owner: dict | None) -> dict | None:
    if owner is None:
        return None
    if not isinstance(owner.get("metadata"), dict):
        owner["metadata"] = {}
    return owner["metadata"]


def apply_ops(nb: dict, ops: list) -> dict:
    """The mutant: a deep copy of nb with ops applied in order."""
    nb = copy.deepcopy(nb)
    for op in ops:
        kind, *args = op
        cells = nb.get("cells") if isinstance(nb.get("cells"), list) else []
        if kind == "cell_meta":
            _set_path(_meta(_cell(nb, args[0])), tuple(args[1]), args[2])
        elif kind == "nbgrader":
            meta = _meta(_cell(nb, args[0]))
            if meta is not None:
                _set_path(meta, ("nbgrader", args[1]), args[2])
        elif kind == "nbgrader_del":
            meta = _meta(_cell(nb, args[0]))
            if meta is not None and isinstance(meta.get("nbgrader"), dict):
                meta["nbgrader"].pop(args[1], None)
        elif kind == "nb_meta":
            _set_path(_meta(nb), tuple(args[0]), args[1])
        elif kind == "cell_type" and _cell(nb, args[0]) is not None:
            _cell(nb, args[0])["cell_type"] = args[1]
        elif kind == "cell_id" and _cell(nb, args[0]) is not None:
            cell = _cell(nb, args[0])
            if args[1] == "DELETE":
                cell.pop("id", None)
            elif args[1] == "DUP":
                cell["id"] = next((c.get("id") for c in cells if isinstance(c, dict) and c is not cell), "x")
            else:
                cell["id"] = args[1]
        elif kind == "cell_field" and _cell(nb, args[0]) is not None:
            if args[2] == "DELETE":
                _cell(nb, args[0]).pop(args[1], None)
            else:
                _cell(nb, args[0])[args[1]] = copy.deepcopy(args[2])
        elif kind == "output" and _cell(nb, args[0]) is not None:
            cell = _cell(nb, args[0])
            if not isinstance(cell.get("outputs"), list):
                cell["outputs"] = []
            cell["outputs"].append(copy.deepcopy(args[1]))
        elif kind == "attachment" and _cell(nb, args[0]) is not None:
            cell = _cell(nb, args[0])
            _set_path(cell, ("attachments", args[1]), {args[2]: args[3]})
            if isinstance(cell.get("source"), str):
                cell["source"] += f"\n\n![{MARKER}](attachment:{args[1]})"
        elif kind == "markdown_text" and _cell(nb, args[0]) is not None:
            cell = _cell(nb, args[0])
            if cell.get("cell_type") in ("markdown", "raw") and isinstance(cell.get("source"), str):
                cell["source"] += "\n\n" + args[1]
        elif kind == "nbformat":
            nb["nbformat"], nb["nbformat_minor"] = args
        elif kind == "top":
            if args[1] == "DELETE":
                nb.pop(args[0], None)
            else:
                nb[args[0]] = copy.deepcopy(args[1])
        elif kind == "dup_cell" and _cell(nb, args[0]) is not None:
            cells.insert(args[0] % len(cells), copy.deepcopy(_cell(nb, args[0])))
        elif kind == "del_cell" and cells:
            del cells[args[0] % len(cells)]
        elif kind == "move_cell" and cells:
            cells.insert(args[1] % len(cells), cells.pop(args[0] % len(cells)))
        elif kind == "grow" and _cell(nb, args[0]) is not None:
            cell = _cell(nb, args[0])
            if isinstance(cell.get("source"), str) and len(cell["source"]) * args[1] < 2_000_000:
                cell["source"] = (cell["source"] + "\n") * args[1]
    return nb


def mutant_json(nb: dict) -> str:
    """The mutant as a file would hold it (NaN and infinities as Python's json writes them)."""
    return json.dumps(nb, ensure_ascii=False)


# ---------------------------------------------------------------- mutants that stay valid nbformat 4
# Most mutants above are not valid nbformat and stop at ingest (invalid_notebook). These keep the notebook
# valid (each is checked with nbformat.validate in the strategy, against the notebook it mutates), so they
# reach nbgrader's steps and the kernels: well-formed outputs of every type, metadata nbformat allows
# (hiding flags, tags, nbgrader fields, kernelspec), fresh cell ids, cells added, copied, retyped, moved or
# removed, and code cells of their own. Those never touch the exercise cell's code, and their code can only
# cost points (no function that passes a check): a mutant of the blank submission still scores no more than it.

CELL_ID = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)
TEXTS = st.one_of(st.sampled_from(HOSTILE_TEXT), st.text(max_size=20))
MIME_DATA = st.dictionaries(st.sampled_from(["text/plain", "text/html", "text/markdown", "text/latex",
                                             "image/svg+xml", "application/javascript"]), TEXTS, max_size=3) \
    | st.just({"image/png": PNG})
VALID_OUTPUTS = st.one_of(
    st.fixed_dictionaries({"output_type": st.just("stream"), "name": st.sampled_from(["stdout", "stderr"]),
                           "text": TEXTS}),
    st.fixed_dictionaries({"output_type": st.just("display_data"), "data": MIME_DATA,
                           "metadata": st.one_of(IMAGE_METADATA, st.just({}))}),
    st.fixed_dictionaries({"output_type": st.just("execute_result"), "data": MIME_DATA, "metadata": st.just({}),
                           "execution_count": st.one_of(st.none(), st.integers(0, 99))}),
    st.fixed_dictionaries({"output_type": st.just("error"), "ename": TEXTS, "evalue": TEXTS,
                           "traceback": st.lists(TEXTS, max_size=2)}),
)
VALID_CELL_META = st.one_of(
    st.tuples(st.sampled_from([("jupyter", "source_hidden"), ("jupyter", "outputs_hidden"), ("collapsed",),
                               ("transient", "remove_source"), ("hide_input",), ("editable",), ("deletable",)]),
              st.booleans()),
    st.tuples(st.just(("tags",)), TAGS.map(lambda tags: list(dict.fromkeys(tags)))),
    st.tuples(st.sampled_from([("course_answer_id",), ("name",), ("magics_language",), ("echo",)]), TEXTS),
    st.tuples(st.just(("nbgrader",)), st.dictionaries(st.sampled_from(NBGRADER_FIELDS), NBGRADER_VALUES,
                                                       max_size=4)),
)
# code of a cell of the mutant's own: printed or displayed markup, the kernel ended or its function removed
CODE = [f"print({text!r})" for text in HOSTILE_TEXT[:4]] + [
    f"from IPython.display import HTML, Markdown, display\ndisplay(HTML({HOSTILE_TEXT[1]!r}))\n"
    f"display(Markdown({HOSTILE_TEXT[-1]!r}))",
    "del group_advantages", "group_advantages = None", "exit()", "import os\nos._exit(0)", "raise SystemExit(3)",
    "1 / 0", "import sys\nsys.stdout.write('x' * 100_000)", "open('/etc/shadow')",
    "get_ipython().run_cell('1 / 0')",
]
VALID_OPS = st.one_of(
    st.tuples(st.just("code_output"), INDEX, VALID_OUTPUTS),
    st.tuples(st.just("cell_meta"), INDEX, VALID_CELL_META).map(lambda t: (t[0], t[1], *t[2])),
    st.tuples(st.just("nbgrader"), INDEX, st.sampled_from(NBGRADER_FIELDS), NBGRADER_VALUES),
    st.tuples(st.just("nbgrader_del"), INDEX, st.sampled_from(NBGRADER_FIELDS)),
    st.tuples(st.just("nb_meta"), st.sampled_from([("kernelspec", "name"), ("kernelspec", "display_name"),
                                                   ("language_info", "name"), ("title",), ("widgets",),
                                                   ("nbgrader",), ("coursekit_findings",)]), TEXTS | JSON),
    st.tuples(st.just("cell_id"), INDEX, CELL_ID),
    st.tuples(st.just("attachment"), INDEX, st.sampled_from(["a.png", "b.svg"]),
              st.sampled_from(["image/png", "image/svg+xml", "text/html"]),
              st.sampled_from([PNG, f"<svg onload={MARKER}()>"])),
    st.tuples(st.just("markdown_text"), INDEX, st.sampled_from(HOSTILE_TEXT)),
    st.tuples(st.just("new_cell"), INDEX, st.sampled_from(["code", "markdown", "raw"]), st.sampled_from(CODE)),
    st.tuples(st.just("copy_cell"), INDEX), st.tuples(st.just("retype"), INDEX, st.sampled_from(["code", "markdown",
                                                                                                   "raw"])),
    st.tuples(st.just("del_cell"), INDEX), st.tuples(st.just("move_cell"), INDEX, INDEX),
)


def _fresh_id(nb: dict) -> str:
    taken = {c.get("id") for c in nb.get("cells", []) if isinstance(c, dict)}
    return next(f"{MARKER}-{k}" for k in range(len(taken) + 1) if f"{MARKER}-{k}" not in taken)


def _new_cell(cell_type: str, source: str, cell_id: str) -> dict:
    cell = {"cell_type": cell_type, "id": cell_id, "metadata": {}, "source": source}
    if cell_type == "code":
        cell.update(outputs=[], execution_count=None)
    return cell


def apply_valid_ops(nb: dict, ops: list) -> dict:
    """apply_ops, with the operations only VALID_OPS has: an output of a code cell (`code_output`: the
    index counts code cells), a new cell (`new_cell`; a markdown or raw one holds the code as text), a
    copy with an id of its own (`copy_cell`), a cell retyped with the fields its new type has (`retype`)."""
    nb = copy.deepcopy(nb)
    for op in ops:
        kind, *args = op
        cells = nb.get("cells") if isinstance(nb.get("cells"), list) else []
        code = [c for c in cells if isinstance(c, dict) and c.get("cell_type") == "code"]
        if kind == "code_output":
            if code:
                code[args[0] % len(code)].setdefault("outputs", []).append(copy.deepcopy(args[1]))
        elif kind == "new_cell":
            cells.insert(args[0] % (len(cells) + 1), _new_cell(args[1], args[2], _fresh_id(nb)))
        elif kind == "copy_cell" and _cell(nb, args[0]) is not None:
            twin = copy.deepcopy(_cell(nb, args[0]))
            twin["id"] = _fresh_id(nb)
            cells.insert(args[0] % len(cells), twin)
        elif kind == "retype" and _cell(nb, args[0]) is not None:
            cell = _cell(nb, args[0])
            retyped = _new_cell(args[1], cell.get("source", ""), cell.get("id", _fresh_id(nb)))
            retyped["metadata"] = cell.get("metadata", {})
            cells[next(k for k, c in enumerate(cells) if c is cell)] = retyped
        else:
            nb = apply_ops(nb, [op])
    return nb


def is_valid(nb: dict) -> bool:
    """Whether nb is a valid nbformat 4 notebook (nbformat.validate, as ingest checks it)."""
    import nbformat
    from nbformat import ValidationError

    try:
        nbformat.validate(nbformat.from_dict(nb))
    except ValidationError:
        return False
    return nb.get("nbformat") == 4


def valid_mutants(bases: dict[str, dict]) -> st.SearchStrategy:
    """(base, ops) whose mutant (apply_valid_ops) of bases[base] is valid nbformat 4."""
    return st.tuples(st.sampled_from(sorted(bases)), st.lists(VALID_OPS, min_size=1, max_size=4)).filter(
        lambda mutant: is_valid(apply_valid_ops(bases[mutant[0]], mutant[1])))
