"""nbgrader preprocessors used by the lesson 11 course (configured in autograder/nbgrader_config.py).

- `BlankSolutions` (generate_assignment): the fill-in shows `var = ______` / `return ______` exactly
  as the exercise branch does, not nbgrader's `raise NotImplementedError()` stub.
- `SandboxExecute` (autograde): nbgrader's Execute with a memory cap, a per-notebook time limit, and a
  kernel that dies (`os._exit`, out of memory) turned into error outputs instead of a crash.
- `CapOutput` (autograde): nbgrader's LimitOutput plus a cap on the characters of each output, so a
  submission that prints 50 MB leaves a small autograded notebook and feedback page.
- `ReplayExecution` (autograde, used by `coursekit grade`): takes the outputs of a notebook already
  executed by a parallel worker instead of running the kernel again.
- `HideHiddenTests` (generate_feedback): test cells show their visible asserts only, and failures
  show the error message without the traceback (which would quote hidden test lines).
"""

from __future__ import annotations

import os
import time

import nbformat
from nbclient.exceptions import DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader import utils
from nbgrader.preprocessors import ClearSolutions, Execute, LimitOutput, NbGraderPreprocessor
from traitlets import Integer, Unicode

from coursekit.errors import CourseError
from coursekit.grading.sandbox import startup_line
from coursekit.lesson import blank_answers, has_answer_markers, visible_test_code

GIB = 1 << 30
KERNEL_DIED = "DeadKernelError"
TIMED_OUT = "CellTimeoutError"


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
    """Execute with resource limits, a notebook time limit and survival of a dying kernel."""

    timeout = Integer(10, help="seconds one cell may run before it is interrupted").tag(config=True)
    notebook_timeout = Integer(60, help="seconds for the whole notebook; later cells are not run "
                               "and get a CellTimeoutError output").tag(config=True)
    memory_limit = Integer(2 * GIB, help="address-space cap of the kernel in bytes "
                           "(allocations beyond it raise MemoryError)").tag(config=True)
    file_size_limit = Integer(256 << 20, help="largest file the kernel may write, in bytes").tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self.extra_arguments = [arg for arg in self.extra_arguments if "IPKernelApp" not in arg] + [
            f"--IPKernelApp.exec_lines={[startup_line(self.memory_limit, self.file_size_limit)]!r}",
            "--IPKernelApp.log_level=ERROR"]  # not the kernel's TCP warning on every start
        self._deadline = time.monotonic() + self.notebook_timeout
        self._stopped: tuple[str, str] | None = None
        return super().preprocess(nb, resources, km)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.source.strip():
            return cell, resources
        if self._stopped is None and time.monotonic() > self._deadline:
            self._stopped = (TIMED_OUT, f"not run: the notebook time limit ({self.notebook_timeout} s) "
                             "was reached")
        if self._stopped is not None:
            cell.outputs.append(error_output(*self._stopped))
            return cell, resources
        try:
            return super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            cell.outputs.append(error_output(KERNEL_DIED, "the kernel died while running this cell "
                                             "(os._exit, a crash, or memory beyond the cap)"))
            self._stopped = (KERNEL_DIED, "not run: the kernel died in an earlier cell")
            return cell, resources


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


class ReplayExecution(NbGraderPreprocessor):
    """Copy outputs from the notebook a worker executed (same sanitised cells) instead of executing."""

    executed_directory = Unicode("", help="folder laid out as <student>/<assignment>/<notebook>.ipynb "
                                 "holding the executed notebooks").tag(config=True)

    def preprocess(self, nb, resources):
        info = resources["nbgrader"]
        path = os.path.join(self.executed_directory, info["student"], info["assignment"],
                            info["notebook"] + ".ipynb")
        if not os.path.isfile(path):  # the worker failed: no cell counts as run
            for cell in nb.cells:
                if cell.cell_type == "code":
                    cell.outputs = [error_output("GraderError", "not run: the grading worker failed")]
            return nb, resources
        executed = nbformat.read(path, as_version=4)
        if [c.source for c in executed.cells] != [c.source for c in nb.cells]:
            raise RuntimeError(f"{path}: executed notebook does not match the sanitised submission; "
                               "run 'coursekit grade' again")
        for cell, done in zip(nb.cells, executed.cells, strict=True):
            if cell.cell_type == "code":
                cell.outputs = done.outputs
                cell.execution_count = done.execution_count
        return nb, resources


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
                message = f"{output.ename}: {output.evalue}" if output.evalue else output.ename
                cell.outputs[k] = nbformat.v4.new_output("stream", name="stderr",
                                                         text=f"未通过：{message}\n")
        return cell, resources
