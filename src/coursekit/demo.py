"""`coursekit demo`: run the GRPO demo notebook with papermill (CPU defaults; README has the GPU command).

By default it writes a scratch run, `build/demo/<notebook>` and its figures and numbers in `build/demo/figs/`,
and the committed run (the notebook in lessons/, its figures in assets/figs/) stays as it is: a run on
another CPU samples other trajectories, so its numbers differ. `--commit` (`make demo COMMIT=1`) replaces the
committed run; review it with `git diff`, then commit. Either way it says where it writes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from coursekit.errors import CourseError

DEMO = Path("lessons/lesson11_grpo_demo.ipynb")
SCRATCH = Path("build/demo")
FIGS = "figs"  # the scratch run's fig_dir (the notebook's parameter), beside its notebook


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--commit", action="store_true",
                        help="replace the committed run (the notebook in place, figures in assets/figs/)")
    parser.add_argument("--notebook", type=Path, default=DEMO, help=f"the demo notebook (default {DEMO})")
    parser.add_argument("--out", type=Path, default=SCRATCH, help=f"the scratch run's folder (default {SCRATCH})")


def run(args: argparse.Namespace) -> int:
    import papermill

    notebook = args.notebook
    if not notebook.is_file():
        raise CourseError(f"{notebook}: no such notebook")
    if args.commit:
        out, cwd, parameters = notebook, notebook.parent, {}
        print(f"demo: replacing the committed run ({notebook} and its figures); review it with git diff, "
              "then commit", flush=True)
    else:
        out, cwd, parameters = args.out / notebook.name, args.out, {"fig_dir": FIGS}
        (args.out / FIGS).mkdir(parents=True, exist_ok=True)
        print(f"demo: writing {args.out}/ (the committed run is untouched; make demo COMMIT=1 replaces it)",
              flush=True)
    papermill.execute_notebook(str(notebook), str(out), parameters=parameters, cwd=str(cwd))
    where = "the committed run" if args.commit else f"{out} and {args.out / FIGS}/"
    print(f"demo: wrote {where}" + ("" if args.commit else "; make demo COMMIT=1 replaces the committed run"))
    return 0
