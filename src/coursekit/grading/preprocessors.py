"""nbgrader preprocessors used by the lesson 11 course (configured in autograder/nbgrader_config.py).

- `BlankSolutions` (generate_assignment): the fill-in shows `var = ______` / `return ______` exactly
  as the exercise branch does, not nbgrader's `raise NotImplementedError()` stub.
- `SandboxExecute` (autograde): nbgrader's Execute with each kernel in an OS sandbox (limits, no
  course, no network), test cells judged by their whole source outside the kernel
  (coursekit.grading.trusted), a per-notebook time limit, and a kernel that dies (`os._exit`, out
  of memory) turned into error outputs instead of a crash.
- `CapOutput` (autograde): nbgrader's LimitOutput plus a cap on the characters of each output, so a
  submission that prints 50 MB leaves a small autograded notebook and feedback page.
- `SanitizeStudentContent` (autograde): student HTML, Markdown and outputs lose active content
  before the autograded notebook is stored (formgrader and feedback show that notebook).
- `HideHiddenTests` (generate_feedback): test cells show their visible asserts only, and failures
  show the diagnostic without the traceback (which would quote hidden test lines).
"""

from __future__ import annotations

import contextlib
import copy
import html
import json
import os
import queue
import re
import signal
import time

import bleach
import nbformat
from jupyter_core.utils import ensure_async, run_sync
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.api import Gradebook
from nbgrader.preprocessors import ClearSolutions, Execute, LimitOutput, NbGraderPreprocessor
from traitlets import Bool, Integer

from coursekit.errors import CourseError
from coursekit.grading import kernel_side, trusted
from coursekit.grading.sandbox import KernelZygote, Limits, SandboxKernelManager, processes_in, reap
from coursekit.lesson import blank_answers, has_answer_markers, visible_test_code

GIB = 1 << 30
KERNEL_DIED = "DeadKernelError"
TIMED_OUT = "CellTimeoutError"
KERNEL = "__import__('sys').modules['_coursekit_kernel']"
ARM_LINE = f"{KERNEL}.arm()"
FINDINGS = "coursekit_findings"  # notebook metadata key of SandboxExecute.findings


def error_output(ename: str, evalue: str) -> NotebookNode:
    return nbformat.v4.new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


class BlankSolutions(ClearSolutions):
    """ClearSolutions that blanks `# SOLUTION`-marked code lines with coursekit.lesson.blank_answers."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and utils.is_solution(cell):
            if not has_answer_markers(cell.source):
                grade_id = cell.metadata.nbgrader.get("grade_id", f"#{cell_index}")
                raise CourseError(f"source notebook, cell '{grade_id}': a code solution cell without "
                                  "answer markers; end each answer line with '# SOLUTION' "
                                  "(run 'make branches' to regenerate the source notebook)")
            cell.source = blank_answers(cell.source)
            return cell, resources
        return super().preprocess_cell(cell, resources, cell_index)


class SandboxExecute(Execute):
    """Execute in a sandboxed kernel, with the test cells judged outside it.

    Each kernel runs in its own bubblewrap sandbox (coursekit.grading.sandbox) with the limits
    below. A test cell's visible lines run in the kernel, as the notebook's own cell; its whole
    source, hidden tests included, runs afterwards in this process (coursekit.grading.trusted)
    against the student's names as they were just before the cell, and decides the cell: its
    kernel errors are replaced by the one diagnostic of the trusted run (an error output), its
    stderr shown as stdout (the verdict alone decides). The trusted runs come after the last
    cell, so nothing the student's code saw of the hidden calls can reach a stored output.
    Afterwards `findings` holds what the kernel reported (sandbox_violation / suspicious_code).
    """

    timeout = Integer(10, help="seconds one cell (or one call of a hidden check) may run "
                      "before it is interrupted").tag(config=True)
    notebook_timeout = Integer(60, help="seconds for the whole notebook; later cells are not run "
                               "and get a CellTimeoutError output").tag(config=True)
    memory_limit = Integer(2 * GIB, help="address-space cap of the kernel in bytes "
                           "(allocations beyond it raise MemoryError)").tag(config=True)
    file_size_limit = Integer(256 << 20, help="largest file the kernel may write, in bytes").tag(config=True)
    process_limit = Integer(64, help="processes and threads of one sandbox (RLIMIT_NPROC)").tag(config=True)
    scratch_size = Integer(256 << 20, help="bytes of the kernel's writable home folder").tag(config=True)
    sandbox = Bool(True, help="run each kernel in a bubblewrap sandbox (coursekit grade --no-sandbox "
                   "turns it off)").tag(config=True)
    show_hidden_inputs = Bool(False, help="diagnostics of hidden checks quote their inputs (by default "
                              "they describe them by kind)").tag(config=True)
    # A kernel that exits by itself is reaped inside its sandbox, so the sandbox ends at once with no
    # process left over and its CPU time counts to the grader (a killed one's does not); see
    # SandboxKernelManager for the short waits.
    shutdown_kernel = "graceful"
    replay = Bool(False, help="internal: this run only re-judges the test cells of a kernel that died later")

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("kernel_manager_class", SandboxKernelManager)
        super().__init__(*args, **kwargs)
        self.zygote: KernelZygote | None = None  # a grading worker's; else each kernel has one of its own

    def create_kernel_manager(self):
        km = super().create_kernel_manager()
        km.limits = Limits(memory=self.memory_limit, file_size=self.file_size_limit,
                           processes=self.process_limit, scratch=self.scratch_size)
        km.sandboxed = self.sandbox
        km.zygote = self.zygote
        return km

    async def async_start_new_kernel(self, **kwargs):
        # Here rather than in preprocess: `coursekit grade` starts a worker's next kernel ahead of time.
        self.extra_arguments = [arg for arg in self.extra_arguments if "IPKernelApp" not in arg] + [
            f"--IPKernelApp.exec_lines={[ARM_LINE]!r}",
            "--IPKernelApp.log_level=CRITICAL",  # not the kernel's connection notes on every start
            "--HistoryManager.enabled=False"]  # no history database (and its thread) per throw-away kernel
        await super().async_start_new_kernel(**kwargs)

    start_new_kernel = run_sync(async_start_new_kernel)  # nbclient binds the sync name to its own

    def preprocess(self, nb, resources=None, km=None):
        self._deadline = time.monotonic() + self.notebook_timeout
        self._stopped: tuple[str, str] | None = None
        self._pending: list[tuple[NotebookNode, dict]] = []
        self._kernel_errors: list[list[str]] = []  # errors of test cells' visible lines in the kernel
        self._own_classes: set[str] = set()  # the student's own subclasses of list, float... returned
        self._replay_findings: dict[str, list] = {}
        self.findings: dict[str, list] = {}
        self._tests = test_sources(resources, nb)
        NotebookClient.__init__(self, nb, km)
        self.reset_execution_trackers()
        self._check_assign_resources(resources)
        with self.setup_kernel():
            manager = self.km
            info = self.wait_for_reply(self.kc.kernel_info())
            self.nb.metadata["language_info"] = info["content"]["language_info"]
            started = len(manager.sandbox_processes())
            for index, cell in enumerate(self.nb.cells):
                self.preprocess_cell(cell, resources, index)
            self.judge_tests(resources)
            self.collect_findings(manager, started)
        if not self.owns_km:  # a kernel started ahead by a grading worker ends here too
            if self.kc is not None:  # nbclient keeps a client it did not start: its heartbeat thread and
                self.kc.stop_channels()  # zmq context were left running, three threads per notebook
                self.kc = None
            if manager.has_kernel:
                run_sync(manager.shutdown_kernel)(now=False)
        self.check_teardown(manager)
        self.nb.metadata[FINDINGS] = self.findings  # for coursekit grade's record(); replaces any student value
        return self.nb, self.resources

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.source.strip():
            return cell, resources
        if self._stopped is None and time.monotonic() > self._deadline:
            self._stopped = (TIMED_OUT, f"not run: the notebook time limit ({self.notebook_timeout} s) "
                             "was reached")
        if self._stopped is not None:
            cell.outputs.append(error_output(*self._stopped))
            return cell, resources
        test = self._tests.get(cell.metadata.get("nbgrader", {}).get("grade_id"))
        try:
            if test is None:
                return super().preprocess_cell(cell, resources, index)
            snapshot = self.ask("snapshot")  # the student's names as this cell finds them
            source = cell.source
            cell.source = visible_test_code(test)  # the kernel never receives hidden test text
            try:
                super().preprocess_cell(cell, resources, index)
            finally:
                cell.source = source
            self._pending.append((cell, snapshot))
        except (DeadKernelError, trusted.KernelDied):
            cell.outputs.append(error_output(KERNEL_DIED, "the kernel died while running this cell "
                                             "(os._exit, a crash, or memory beyond the cap)"))
            self._stopped = (KERNEL_DIED, "not run: the kernel died in an earlier cell")
        except trusted.GraderAbort as abort:
            cell.outputs.append(error_output(abort.ename, abort.message))
        return cell, resources

    # ---- the trusted half of the test cells

    def judge_tests(self, resources) -> None:
        """Decide each test cell by running its whole source here (see coursekit.grading.trusted)."""
        options = {"_SHOW_HIDDEN_INPUTS": self.show_hidden_inputs}
        for cell, snapshot in self._pending:
            errors = [o for o in cell.outputs if o.output_type == "error"]
            self._kernel_errors += [[o.ename, o.evalue[:200]] for o in errors]  # for the error flag
            cell.outputs = [_as_stdout(o) for o in cell.outputs if o.output_type != "error"]
            stopped = next((o.ename for o in errors if o.ename in (TIMED_OUT, KERNEL_DIED)), None)
            if stopped == TIMED_OUT:
                failure = trusted.Failure(TIMED_OUT, f"运行超过 {self.timeout} 秒，已中断（死循环？）")
            elif stopped == KERNEL_DIED:
                failure = trusted.Failure(KERNEL_DIED, "内核在运行这个单元格时退出（os._exit、崩溃或内存超限）")
            elif time.monotonic() > self._deadline:
                failure = trusted.Failure(TIMED_OUT, "没有运行：达到整本笔记本的时间上限"
                                          f"（{self.notebook_timeout} 秒）")
            else:
                grade_id = cell.metadata.nbgrader.grade_id
                failure = trusted.run_test_cell(self._tests[grade_id], grade_id, snapshot, self, options)
                if failure is not None and failure.ename == KERNEL_DIED and not self.replay:
                    return self.judge_in_replay(resources)  # it died after its test cells ran
            if failure is not None:
                cell.outputs.append(error_output(failure.ename, failure.evalue))

    def judge_in_replay(self, resources) -> None:
        """The kernel died after the test cells (`exit()` in a later cell): run the notebook again
        up to the last test cell in a fresh sandbox and take that run's verdicts."""
        positions = [next(k for k, c in enumerate(self.nb.cells) if c is cell) for cell, _ in self._pending]
        again = nbformat.from_dict(copy.deepcopy(self.nb))
        again.cells = again.cells[: max(positions) + 1]
        for cell in again.cells:
            if cell.cell_type == "code":
                cell.outputs = []
        replay = SandboxExecute(config=self.config, replay=True)
        replay.zygote = self.zygote
        replay.preprocess(again, copy.deepcopy(resources))
        for position, (cell, _) in zip(positions, self._pending, strict=True):
            verdict = [o for o in again.cells[position].outputs if o.output_type == "error"]
            cell.outputs = [_as_stdout(o) for o in cell.outputs if o.output_type != "error"] + verdict
        self._replay_findings = replay.findings

    def call(self, ref: int, payload: str) -> dict:
        """trusted.Kernel: one call of a student's function, with the cell timeout."""
        limit = min(self.timeout, max(1.0, self._deadline - time.monotonic()))
        reply = self.ask("call", [int(ref), payload], limit)
        _own_classes(reply.get("value") if isinstance(reply, dict) else None, self._own_classes)
        return reply

    def ask(self, helper: str, args: list | None = None, timeout: float | None = None) -> dict:
        """Call a kernel_side helper (kernel_side.REQUEST); return its decoded JSON reply."""
        return run_sync(self._async_ask)(helper, args or [], timeout or self.timeout)

    async def _async_ask(self, helper: str, args: list, timeout: float) -> dict:
        if self._stopped and self._stopped[0] == KERNEL_DIED:
            raise trusted.KernelDied("内核已经退出，检查无法运行")
        request = self.kc.session.msg(kernel_side.REQUEST, {"helper": helper, "args": args})
        self.kc.shell_channel.send(request)
        msg_id = request["header"]["msg_id"]
        deadline, interrupted = time.monotonic() + timeout, False
        while True:
            wait = deadline - time.monotonic()
            if wait <= 0:
                if interrupted:  # the student's code ignores interrupts: end the sandbox
                    await ensure_async(self.km.shutdown_kernel(now=True))
                    self._stopped = (KERNEL_DIED, "not run: the kernel was stopped after a timeout")
                    raise trusted.KernelTimeout(f"运行超过 {timeout:g} 秒，内核无法中断，已结束")
                await ensure_async(self.km.interrupt_kernel())
                deadline, interrupted = time.monotonic() + 5, True
                continue
            try:
                msg = await self.kc.shell_channel.get_msg(timeout=min(wait, 1.0))
            except queue.Empty:
                if not await ensure_async(self.km.is_alive()):
                    self._stopped = (KERNEL_DIED, "not run: the kernel died in an earlier cell")
                    raise trusted.KernelDied("内核在检查时退出（os._exit、崩溃或内存超限）") from None
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if interrupted:
                raise trusted.KernelTimeout(f"运行超过 {timeout:g} 秒，已中断（死循环？）")
            try:
                reply = msg["content"]["reply"] if msg["msg_type"] == kernel_side.REPLY else None
                if not isinstance(reply, str) or len(reply) > trusted.MAX_REPLY:
                    raise ValueError("not a reply")
                return json.loads(reply)
            except (KeyError, TypeError, ValueError):
                raise trusted.InvalidReply("内核没有按协议回答（评分辅助代码被改动？）") from None

    # ---- what the kernel and its sandbox report

    def collect_findings(self, manager: SandboxKernelManager, started: int) -> None:
        """sandbox_violation and suspicious_code details: the kernel's records and processes left."""
        violations, patched = [], []
        if not (self._stopped and self._stopped[0] == KERNEL_DIED):
            try:
                report = self.ask("report")
                for kind, detail in report.get("events", [])[:40]:
                    (patched if kind in ("frames", "trace", "ctypes") else violations).append(f"{kind}: {detail}")
                patched += [str(name) for name in report.get("patched", [])[:20]]
            except (trusted.GraderAbort, AttributeError, TypeError, ValueError):
                patched.append("the grader's helpers in the kernel")
        patched += [f"returned its own {name}" for name in sorted(self._own_classes)]
        if any(has_active_content(cell) for cell in self.nb.cells):
            patched.append("active content in outputs or text (removed)")
        if manager.sandboxed and manager.has_kernel:
            left = len(manager.sandbox_processes()) - started
            if left > 0:
                violations.append(f"processes left: {left}")
        again = self._replay_findings
        self.findings = {"sandbox_violation": list(dict.fromkeys(violations + again.get("sandbox_violation", []))),
                         "suspicious_code": list(dict.fromkeys(patched + again.get("suspicious_code", []))),
                         "kernel_errors": self._kernel_errors + again.get("kernel_errors", [])}

    def check_teardown(self, manager: SandboxKernelManager) -> None:
        """No process of the sandbox may outlive its kernel; end any that did and say so."""
        survivors = []
        if manager.namespace:
            deadline = time.monotonic() + 5
            while (survivors := processes_in(manager.namespace)) and time.monotonic() < deadline:
                reap(survivors)  # handed to a grading worker, a subreaper (coursekit.grading.execute)
                time.sleep(0.01)
            for pid in survivors:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        manager.remove_socket_dir()
        if survivors:
            self.findings.setdefault("sandbox_violation", []).append(
                f"processes outlived the sandbox: {len(survivors)}, killed")


def test_sources(resources: dict | None, nb: NotebookNode) -> dict[str, str]:
    """grade id -> source of each test cell (locked code cells) that the trusted runs execute, never a
    student's text: from the gradebook when this process has it, else from the notebook the trusted
    recorder sanitised (its OverwriteCells put the gradebook's locked cells back; ingest dropped
    nbgrader metadata of grade ids the release does not have)."""
    info = (resources or {}).get("nbgrader", {})
    if info.get("db_url"):
        with Gradebook(info["db_url"]) as gb:
            cells = gb.find_notebook(info["notebook"], info["assignment"]).source_cells
            return {c.name: c.source for c in cells if c.locked and c.cell_type == "code"}
    return {cell.metadata.nbgrader.grade_id: cell.source for cell in nb.cells
            if cell.cell_type == "code" and utils.is_grade(cell) and utils.is_locked(cell)
            and not utils.is_solution(cell)}


def _own_classes(value, found: set[str], depth: int = 0) -> None:
    """Names of subclasses defined in the student's notebook (`__main__`) inside a call's result."""
    if depth > 40:
        return
    if isinstance(value, list):
        for item in value:
            _own_classes(item, found, depth + 1)
    elif isinstance(value, dict):
        if value.get("$") == "sub" and str(value.get("type", "")).startswith("__main__."):
            found.add(f"{value.get('base')} subclass {str(value['type'])[9:49]}")
        for item in value.values():
            _own_classes(item, found, depth + 1)


def _as_stdout(output: NotebookNode) -> NotebookNode:
    if output.output_type == "stream" and output.name == "stderr":
        output.name = "stdout"
    return output


class CapOutput(LimitOutput):
    """LimitOutput that also caps the characters of every output (long single lines included)."""

    max_chars = Integer(20000, help="maximum characters kept per output").tag(config=True)

    def _cap(self, text: str) -> str:
        if len(text) <= self.max_chars:
            return text
        return text[: self.max_chars] + f"\n... output truncated ({len(text)} characters) ..."

    def preprocess_cell(self, cell, resources, cell_index):
        cell, resources = super().preprocess_cell(cell, resources, cell_index)
        if cell.cell_type != "code":
            return cell, resources
        for output in cell.outputs:
            if output.output_type == "stream":
                output.text = self._cap(output.text)
            elif output.output_type == "error":
                output.evalue = self._cap(output.evalue)
                output.traceback = [self._cap(line) for line in output.traceback]
            elif "data" in output:
                for mime, value in list(output.data.items()):
                    text = value if isinstance(value, str) else "".join(value)
                    if mime == "text/plain":
                        output.data[mime] = self._cap(text)
                    elif len(text) > self.max_chars:
                        del output.data[mime]
                        output.data.setdefault("text/plain", f"[{mime} output of {len(text)} "
                                               "characters removed]")
        return cell, resources


class HideHiddenTests(NbGraderPreprocessor):
    """Feedback shows test cells' visible lines and failures' messages, never hidden test source."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type != "code" or not (utils.is_grade(cell) and utils.is_locked(cell)):
            return cell, resources
        visible = visible_test_code(cell.source)
        if visible != cell.source.strip("\n"):
            cell.source = visible + "\n# （另有隐藏测试，源代码不在反馈中显示）"
        for k, output in enumerate(cell.outputs):
            if output.output_type == "error":
                cell.outputs[k] = nbformat.v4.new_output("stream", name="stderr",
                                                         text=f"未通过：{output.evalue or output.ename}\n")
        return cell, resources


def _instructors(cell: NotebookNode) -> bool:
    """A locked, non-solution cell with a grade id: nbgrader restored its source from the gradebook."""
    info = cell.metadata.get("nbgrader", {})
    return bool(info.get("grade_id") and info.get("locked") and not info.get("solution"))


def has_active_content(cell: NotebookNode) -> bool:
    """Scripts, event handlers, javascript: links or frames in student text or outputs."""
    if cell.cell_type in ("markdown", "raw"):
        return not _instructors(cell) and _is_active(cell.source)
    for output in cell.get("outputs", []):
        data = output.get("data", {})
        if any(mime not in SAFE_MIME | SANITIZED_MIME for mime in data):
            return True
        if any(_is_active(v if isinstance(v, str) else "".join(v)) for m, v in data.items() if m in SANITIZED_MIME):
            return True
    return False


def _is_active(text: str) -> bool:
    return bool(ACTIVE.search(text) or TEX_ACTIVE.search(_plain_refs(text)))


class SanitizeStudentContent(NbGraderPreprocessor):
    """Nothing a student wrote or printed can run in the instructor's (or a student's) browser.

    Code outputs keep text, images and sanitised HTML/Markdown (bleach: no scripts, event
    handlers, javascript: links, iframes, styles; clean_tex: no TeX macro that makes a link, a class,
    a style, an id or a definition); every other type (JavaScript, SVG, LaTeX, widgets) becomes a
    line of text. Markdown and raw cells are sanitised unless they are the
    instructor's (a locked, non-solution cell that nbgrader restored from the gradebook), and
    widget state is dropped from the notebook metadata.
    """

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)
        return super().preprocess(nb, resources)

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type in ("markdown", "raw") and not _instructors(cell):
            cell.source = clean_markdown(cell.source)
        elif cell.cell_type == "code":
            cell.outputs = [sanitize_output(o) for o in cell.outputs]
        return cell, resources


SAFE_TAGS = {"a", "abbr", "acronym", "b", "blockquote", "br", "code", "dd", "del", "div", "dl", "dt", "em",
             "h1", "h2", "h3", "h4", "h5", "h6", "hr", "i", "kbd", "li", "ol", "p", "pre", "q", "s", "samp",
             "small", "span", "strong", "sub", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr",
             "tt", "u", "ul", "var"}
SAFE_ATTRIBUTES = {"*": ["class", "title"], "a": ["href"], "td": ["colspan", "rowspan", "align"],
                   "th": ["colspan", "rowspan", "align"]}
SAFE_SCHEMES = {"http", "https", "mailto"}
SAFE_MIME = {"text/plain", "image/png", "image/jpeg", "image/gif"}
SANITIZED_MIME = {"text/html", "text/markdown"}
ACTIVE = re.compile(r"<\s*(script|iframe|object|embed)\b|\bon[a-z]+\s*=|javascript:", re.I)
# TeX macros that MathJax 3 turns into attributes or definitions (\href, \class, \style, \cssId, \data: its
# html extension; \unicode: a font; \mmlToken: any attribute; \require: an extension; the rest define macros
# that could rebuild them). Student TeX loses them, whatever the delimiters; the pages' MathJax also loads
# the `safe` extension (templates/static/safe_mathjax.js). Case matters, as in TeX.
TEX_ACTIVE = re.compile(r"\\(href|url|class|style|cssId|data|unicode|mmlToken|require|def|gdef|edef|xdef|let|"
                        r"newcommand|renewcommand|newenvironment|renewenvironment|DeclareMathOperator|"
                        r"Newextarrow|toggle|mathtip|texttip)(?![A-Za-z])")
TEX_BACKSLASH = "\u29f5"  # REVERSE SOLIDUS OPERATOR: shows as a backslash, starts no macro
CHAR_REF = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);?")


def clean_html(text: str) -> str:
    """Escape every tag and attribute outside a small safe list (links: http, https, mailto only)."""
    return bleach.clean(text, tags=SAFE_TAGS, attributes=SAFE_ATTRIBUTES, protocols=SAFE_SCHEMES,
                        strip=False, strip_comments=True)


def clean_html_and_tex(text: str) -> str:
    return clean_tex(clean_html(text))


def _plain_refs(text: str) -> str:
    """Character references that stand for a letter, a digit or a backslash written as that character
    (the browser decodes `&#92;h&#x72;ef` to `\\href` before MathJax reads it); the others are kept."""
    def plain(match: re.Match) -> str:
        char = html.unescape(match.group(0))
        return char if len(char) == 1 and char.isascii() and (char.isalnum() or char == "\\") else match.group(0)
    return CHAR_REF.sub(plain, text)


def clean_tex(text: str) -> str:
    """The backslash of every TEX_ACTIVE macro becomes TEX_BACKSLASH, in HTML that bleach has already
    cleaned (its comments are gone, so `\\h<!---->ref` is already `\\href` here)."""
    return TEX_ACTIVE.sub(lambda m: TEX_BACKSLASH + m.group(1), _plain_refs(text))


def clean_markdown(text: str) -> str:
    """clean_html, and Markdown links and link definitions whose target is not http(s), mailto or
    a relative path are broken (`](` becomes `]\\(`), so `[x](javascript:...)` renders as text."""
    def guard(match: re.Match) -> str:
        target = re.sub(r"[\x00-\x20<>]", "", html.unescape(match.group(2))).lower()
        scheme = re.match(r"[a-z][a-z0-9+.-]*:", target)
        if scheme and scheme.group(0)[:-1] not in SAFE_SCHEMES:
            return match.group(1) + "\\" + match.group(0)[len(match.group(1)):]
        return match.group(0)
    text = clean_tex(clean_html(text))
    text = re.sub(r"(\])\(\s*([^)\s]*)", guard, text)
    return re.sub(r"(?m)^( {0,3}\[[^\]]+\]):\s*(\S*)", guard, text)


def sanitize_output(output: NotebookNode) -> NotebookNode:
    if "data" not in output:
        return output
    removed = []
    for mime in list(output.data):
        value = output.data[mime]
        if mime in SANITIZED_MIME:
            clean = clean_markdown if mime == "text/markdown" else clean_html_and_tex
            output.data[mime] = clean(value if isinstance(value, str) else "".join(value))
        elif mime not in SAFE_MIME:
            removed.append(mime)
            del output.data[mime]
    if removed and "text/plain" not in output.data:
        output.data["text/plain"] = f"[{', '.join(removed)} output removed: only text, images and HTML are kept]"
    return output
