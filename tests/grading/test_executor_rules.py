"""Rules of the executing half that decide points and costs, on plain data (no kernel started):
what a test cell keeps of the kernel's run, which names a check is judged with, and which statement a
cell that used its CPU limit was running."""

from __future__ import annotations

import nbformat
from IPython.core.interactiveshell import InteractiveShell

from coursekit.grading.judge.verdicts import kernel_text
from coursekit.grading.sandbox.executor import interrupted_statement, own_data


def test_a_test_cell_keeps_only_printed_text_of_the_kernels_run():
    outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "'满分'"}, execution_count=1),
               nbformat.v4.new_output("display_data", data={"text/plain": "0.5"}),
               nbformat.v4.new_output("stream", name="stderr", text="warning\n"),
               nbformat.v4.new_output("stream", name="stdout", text="printed\n"),
               nbformat.v4.new_output("error", ename="NameError", evalue="x", traceback=[])]
    kept = kernel_text(outputs)
    assert [(o.output_type, o.name, o.text) for o in kept] == [("stream", "stdout", "warning\n"),
                                                             ("stream", "stdout", "printed\n")]


def test_data_comes_from_the_answer_cells_run_and_functions_from_the_test_cells():
    at_answer = {"ratios": [4.0, 0.25], "f": {"$": "callable", "ref": 0}}
    at_test = {"ratios": [1.0], "token_mean": 0.5, "f": {"$": "callable", "ref": 3},
               "math": {"$": "module", "name": "math"}}
    assert own_data(at_test, at_answer) == {"ratios": [4.0, 0.25], "f": {"$": "callable", "ref": 3},
                                            "math": {"$": "module", "name": "math"}}
    assert own_data(at_test, {}) == {"f": {"$": "callable", "ref": 3}, "math": {"$": "module", "name": "math"}}
    assert own_data("not a snapshot", None) == {}


def test_the_statement_a_cell_was_interrupted_on_is_read_from_the_kernels_traceback():
    shell = InteractiveShell.instance()
    tracebacks = []

    def keep(self, etype, value, tb, tb_offset=None):
        tracebacks.append(self.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset))

    shell.set_custom_exc((KeyboardInterrupt,), keep)
    source = "def f(rewards):\n    raise KeyboardInterrupt\n\nassert f([2., 2.]) == [0.0, 0.0]\n"
    shell.run_cell(source)
    cell = nbformat.v4.new_code_cell(source)
    cell.outputs = [nbformat.v4.new_output("error", ename="KeyboardInterrupt", evalue="", traceback=tracebacks[0])]
    assert interrupted_statement(cell) == ["assert f([2., 2.]) == [0.0, 0.0]"]
    cell.outputs = [nbformat.v4.new_output("error", ename="KeyboardInterrupt", evalue="", traceback=["garbled"])]
    assert interrupted_statement(cell) == []


def test_the_graders_resident_memory_is_read_through_one_open_file_per_process(monkeypatch):
    """executor._resident runs after every reply of the judge: /proc/<pid>/statm opened once per process
    (a forked worker opens its own), and each value is this process's resident set."""
    import os

    from coursekit.grading.sandbox import executor

    executor._resident()
    opened = []
    real_open = os.open

    def counting_open(path, *args, **kwargs):
        opened.append(path)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting_open)
    value = executor._resident()
    with open(f"/proc/{os.getpid()}/statm", encoding="ascii") as f:
        direct = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    assert opened == [] and abs(value - direct) < 16 << 20
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child's own statm, not its parent's file
        try:
            child = executor._resident()
            with open(f"/proc/{os.getpid()}/statm", encoding="ascii") as f:
                direct = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
            os.write(write, str(int(abs(child - direct) < 16 << 20 and len(opened) == 1)).encode())
        finally:
            os._exit(0)
    os.close(write)
    assert os.read(read, 8) == b"1"
    os.waitpid(pid, 0)
