"""The grading kernel's tracebacks (sandbox.kernel_side): set up once in the zygote before the kernels are
forked (`_tracebacks_ready`) and formatted once per error (`_one_traceback_per_error`), with the same text
as IPython's own."""

from __future__ import annotations

import json
import subprocess
import sys

from IPython.core.interactiveshell import InteractiveShell
from IPython.core.ultratb import AutoFormattedTB
from pygments.lexer import RegexLexerMeta
from stack_data import core

from coursekit.grading.sandbox import kernel_side


def _mean(values):
    return _total(values) / len(values)


def _total(values):
    """A frame of its own: the traceback shows two frames of this file and their highlighted source."""
    return sum(values) + values[0] / 0


def _traceback_text() -> list[str]:
    try:
        _mean([1.0, 2.0])
    except ZeroDivisionError as error:
        formatter = AutoFormattedTB(mode="Context", theme_name=InteractiveShell.colors.default_value)
        return formatter.structured_traceback(type(error), error, error.__traceback__)
    raise AssertionError("no error")


def test_after_the_zygotes_set_up_a_traceback_compiles_no_lexer_rules_and_reads_the_same(monkeypatch):
    """Stands in for a kernel forked from the zygote: its tracebacks find IPython's traceback formatting
    set up (stack_data made a new lexer class, whose rules pygments compiled again, for each frame shown)."""
    monkeypatch.setattr(core, "_pygmented_with_ranges", core._pygmented_with_ranges)  # put back after the test
    stock = _traceback_text()
    assert any("_total" in line for line in stock) and any("\x1b[" in line for line in stock)
    kernel_side._tracebacks_ready()
    compiled = []
    process_tokendef = RegexLexerMeta.process_tokendef

    def counted(cls, *args, **kwargs):
        compiled.append(cls.__name__)
        return process_tokendef(cls, *args, **kwargs)

    monkeypatch.setattr(RegexLexerMeta, "process_tokendef", counted)
    assert _traceback_text() == stock
    assert _traceback_text() == stock
    assert compiled == []


SHELL = """
import json, sys
from IPython.core import ultratb
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config
from coursekit.grading.sandbox import kernel_side
if sys.argv[1] == "kernel":
    kernel_side._one_traceback_per_error()
formatted = []
structured_traceback = ultratb.AutoFormattedTB.structured_traceback
def counted(self, *args, **kwargs):
    formatted.append(1)
    return structured_traceback(self, *args, **kwargs)
ultratb.AutoFormattedTB.structured_traceback = counted
config = Config()
config.HistoryManager.enabled = False
shell = InteractiveShell.instance(config=config)
shell.run_cell("def f(x):\\n    return x / 0\\n", store_history=True)
shell.run_cell("f(1)", store_history=True)
print("RESULT", json.dumps({"formatted": len(formatted), "history": list(shell.history_manager.exceptions.values())}))
"""


def _shell(role: str) -> tuple[str, dict]:
    done = subprocess.run([sys.executable, "-c", SHELL, role], capture_output=True, text=True, check=True, timeout=60)
    shown, _, result = done.stdout.rpartition("RESULT ")
    return shown, json.loads(result)


def test_a_grading_kernel_formats_each_error_once_and_shows_the_same_traceback():
    """IPython formats a cell's error for its output and again for the history; a grading kernel only once."""
    stock_shown, stock = _shell("stock")
    shown, kernel = _shell("kernel")
    assert "ZeroDivisionError" in shown and shown == stock_shown
    assert stock["formatted"] == 2 and kernel["formatted"] == 1
    assert kernel["history"] == [{"ename": "ZeroDivisionError", "evalue": "division by zero", "traceback": []}]
