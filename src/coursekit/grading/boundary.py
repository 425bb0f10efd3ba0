"""The one boundary around each student's grading: whatever one student's notebook makes fail is that
student's row, never the class's.

Every per-student step of `coursekit grade` (ingest, nbgrader's preprocessors and checksums, the
worker's execution and judging, recording, feedback) runs inside `StudentStep`. Any exception that
leaves it — `BaseException` subclasses such as the judge's OverBudget, a dead or disconnected worker,
an error raised deep inside nbgrader or nbformat — becomes one `error(step: Type: message)` flag on
that student's row, on one line. Only Ctrl-C (KeyboardInterrupt) passes through: it stops the run,
which the same command then resumes.
"""

from __future__ import annotations

from types import TracebackType

from coursekit.grading.judge import flags as F

MAX_REASON = 200  # characters of the exception's message quoted in the flag (the student may choose them)
PASSES_THROUGH = (KeyboardInterrupt, GeneratorExit)  # Ctrl-C stops the run; a closed generator is not a failure


def reason(exc: BaseException) -> str:
    """`Type: message` on one line, at most MAX_REASON characters."""
    text = " ".join(str(exc).split())
    line = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return line[:MAX_REASON]


class StudentStep:
    """`with StudentStep(flags, "what was being done"): ...` — a failure inside adds one error flag to
    `flags` and is swallowed; `failed` then says so. Ctrl-C is not caught."""

    def __init__(self, flags: list[str], step: str):
        self.flags = flags
        self.step = step
        self.failed = False
        self.error: BaseException | None = None

    def __enter__(self) -> StudentStep:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> bool:
        if kind is None or issubclass(kind, PASSES_THROUGH):
            return False
        self.failed, self.error = True, exc
        self.flags.append(F.flag(F.ERROR, f"{self.step}: {reason(exc)}"))
        return True
