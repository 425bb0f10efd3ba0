"""`coursekit formgrader`: nbgrader's formgrader on localhost, for grading the manual answers.

Starts JupyterLab (with nbgrader's server extensions) in the course folder, so nbgrader reads
autograder/nbgrader_config.py, and prints the one URL to open: /formgrader with its token.
It works offline:
- MathJax: nbgrader's submission page loads MathJax 2 from cdnjs; the course's config points its
  template at templates/formgrade/mathjax.html.j2 (beside this file), which loads MathJax 3 from
  node_modules, served here as /static/mathjax/ (ServerApp.extra_static_paths);
- Figure 11-1 is embedded in the nbgrader source notebook (coursekit branches), so no URL to resolve;
- the exchange lives in the course (autograder/exchange/, created here), so no missing-exchange banner.
Safe with student text: the server loads coursekit.grading.formgrader_extension (a Content-Security-Policy
without inline script, and the student's flags and vetoes above each submission); the submission page's
scripts are served from templates/static/ (ServerApp.extra_static_paths). The gradebook may be sqlite or
any database nbgrader's CourseDirectory.db_url names (PostgreSQL). Ctrl-C, SIGTERM or SIGHUP stops the
server (`coursekit.childproc`) with one line; a busy port is an error before any address is printed.
How to grade and how to record a veto: autograder/README.md.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import sys
import warnings
from pathlib import Path

import nbgrader
from nbgrader.api import Gradebook, MissingEntry
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from coursekit.childproc import exit_status, run_until_stopped
from coursekit.errors import CourseError
from coursekit.grading.course import DEFAULT_ROOT, Course, put_venv_on_path

# HTMLExporter.extra_template_basedirs for nbgrader_config.py: ours first (formgrade/mathjax.html.j2), then
# nbgrader's own (formgrade/, feedback/), which nbgrader would otherwise set.
TEMPLATE_DIRS = [str(Path(__file__).resolve().parent / "templates"),
                 str(Path(nbgrader.__file__).resolve().parent / "server_extensions" / "formgrader" / "templates")]
# The pages' own scripts: served as /static/<name>, and on the template path of every HTMLExporter
# (HTMLExporter.extra_template_paths, set by coursekit.grading.records.feedback) for the feedback page,
# which inlines them.
STATIC = Path(__file__).resolve().parent / "templates" / "static"
TEMPLATE_PATHS = [str(STATIC)]
EXTENSION = "coursekit.grading.formgrader_extension"
INTERRUPTED = exit_status(signal.SIGINT)  # 130 after Ctrl-C, as a shell reports it (as `coursekit grade`)
# holds mathjax/es5/tex-chtml.js (npm ci, run by `make setup`): the kit's own, whatever the server's folder
# (the hub's instructor server runs in build/hub/course, its spawner in build/hub/runtime)
NODE_MODULES = Path(__file__).resolve().parents[3] / "node_modules"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--course", type=Path, default=DEFAULT_ROOT, help="nbgrader course folder")
    parser.add_argument("--port", type=int, default=8890, help="port on 127.0.0.1 (default 8890)")
    parser.add_argument("--node-modules", type=Path, default=NODE_MODULES,
                        help=f"npm folder holding mathjax/ (default: {NODE_MODULES})")


def safe_page_options(node_modules: Path = NODE_MODULES) -> list[str]:
    """ServerApp options every server that shows formgrader needs: MathJax and the pages' scripts served
    as /static/, and the Content-Security-Policy extension (also used by the hub's instructor server)."""
    return [f"--ServerApp.extra_static_paths={node_modules.resolve()}", f"--ServerApp.extra_static_paths={STATIC}",
            f"--ServerApp.jpserver_extensions={EXTENSION}=True"]


def command(course: Course, port: int, token: str, node_modules: Path = NODE_MODULES) -> list[str]:
    """The JupyterLab command line: 127.0.0.1 only, this token, MathJax served from node_modules."""
    cmd = [sys.executable, "-m", "jupyter", "lab", "--ServerApp.ip=127.0.0.1", f"--ServerApp.port={port}",
           "--ServerApp.port_retries=0", "--ServerApp.open_browser=False", f"--ServerApp.root_dir={course.root}",
           f"--IdentityProvider.token={token}", *safe_page_options(node_modules),
           "--ServerApp.log_level=WARN", "--LabApp.log_level=WARN"]  # start-up lines mask the token: ours is printed
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # containers often run as root
    return cmd


def prepare(course: Course, node_modules: Path = NODE_MODULES) -> None:
    """Check what formgrader needs and create the course's exchange folder."""
    check_gradebook(course)
    mathjax = node_modules / "mathjax" / "es5" / "tex-chtml.js"
    if not mathjax.is_file():
        raise CourseError(f"{mathjax}: missing (formgrader serves MathJax from it); run 'make setup'")
    exchange = course.config.Exchange.get("root")
    if exchange:
        Path(exchange).mkdir(parents=True, exist_ok=True)


def check_gradebook(course: Course) -> None:
    """The course's gradebook (sqlite file or database server) exists and holds the lesson."""
    url = make_url(course.db_url)
    if url.get_backend_name() == "sqlite":
        if not url.database or not Path(url.database).is_file():
            raise CourseError(f"{url.database}: no gradebook yet; run 'make release' "
                              "(and 'make grade SUBMISSIONS=...') first")
        return
    shown = url.render_as_string(hide_password=True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # nbgrader's SQLAlchemy warnings are about its own sessions
            with Gradebook(course.db_url, course.coursedir().course_id) as gb:
                gb.find_assignment(course.assignment)
    except MissingEntry:
        raise CourseError(f"{shown}: the gradebook has no {course.assignment} yet; run 'make release' "
                          "(and 'make grade SUBMISSIONS=...') first") from None
    except SQLAlchemyError as exc:
        reason = str(exc.orig if getattr(exc, "orig", None) else exc).strip().splitlines()[0]
        raise CourseError(f"{shown}: cannot open the gradebook: {reason}") from None


def serve(cmd: list[str], cwd: Path) -> int:
    """Run the server until it ends or Ctrl-C, SIGTERM or SIGHUP; then stop it (SIGINT: Jupyter's quiet
    shutdown when stdin is not a terminal) and say so in one line."""
    code, stopped_by = run_until_stopped(cmd, cwd=cwd, stop_signal=signal.SIGINT)
    if stopped_by is None:
        return code
    print("formgrader: stopped (grades and comments are saved as you type them); "
          "run 'make formgrader' to go on, 'make report' for the CSV", file=sys.stderr)
    return exit_status(stopped_by)


def check_port_free(port: int) -> None:
    """A CourseError when something already listens on 127.0.0.1:`port` (say, a formgrader left running)."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: TIME_WAIT is free
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise CourseError(f"127.0.0.1:{port}: port in use ({exc.strerror}); stop what serves there (an "
                              "earlier formgrader?) or pick another port (--port)") from None


def run(args: argparse.Namespace) -> int:
    course = Course.at(args.course)
    prepare(course, args.node_modules)
    check_port_free(args.port)
    put_venv_on_path()
    token = os.environ.get("JUPYTER_TOKEN") or secrets.token_hex(24)
    print(f"formgrader: open http://127.0.0.1:{args.port}/formgrader?token={token}\n"
          "Ctrl-C stops it; then run 'make report'", flush=True)
    return serve(command(course, args.port, token, args.node_modules), course.root)
