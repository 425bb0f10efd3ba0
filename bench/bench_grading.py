"""Benchmark: `coursekit grade` against plain sequential `nbgrader autograde`, and its scaling curve.

1. Same run, same files: 60 mixed submissions (every kind of tests/grading/submission_kinds.py,
   cycled). Plain nbgrader autogrades the notebooks that `coursekit grade` put in submitted/ (it
   cannot read the broken files) with the same nbgrader_config.py, so the same sandboxed kernels,
   limits and judged test cells; `coursekit grade` also ingests, writes feedback HTML and the
   report. Prints wall and CPU seconds of both, the ratios against the targets (wall >= 3x faster,
   CPU <= 1.0x of plain nbgrader's) and whether the automatic scores agree for every gradable one;
   and the sandbox's own cost: `coursekit grade` vs `coursekit grade --no-sandbox`, same files.
   First, the stock arm (`stock_rounds`, --stock-rounds N, default 2): stock `nbgrader autograde`
   with nbgrader's default configuration in a course folder and config of its own (no sandbox,
   nbgrader's default Execute; stock_nbgrader says which two settings differ) against `make grade`
   on the same class, arms alternating round by round: wall and CPU ratios of `make grade` (sandbox
   on) against it (targets: >= 5x wall, <= 1x CPU), score agreement, load average beside each arm;
   before the rounds, both arms grade a small class once, not counted (`warm_up`).
2. Scaling: `coursekit grade` on 60, 240 (and with --large 960) generated submissions, same mix,
   each in a fresh course: seconds and CPU seconds per notebook, and peak memory of the grading
   process (the trusted recorder, which streams the class) and of the largest worker or kernel.
Each run is a subprocess; CPU seconds are those of it and everything it waited for (workers,
kernels). On a loaded machine wall times are noisy: read the CPU seconds and the ratios.
Run: .venv/bin/python bench/bench_grading.py [--large] [--sizes 60,240,960] [--skip-compare | --skip-scaling]
     [--stock-rounds N] [--stock-only]
"""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from nbgrader.api import Gradebook

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "grading"))

from submission_kinds import FILE_KINDS, NOTEBOOK_KINDS, write_class  # noqa: E402

from coursekit.grading.course import Course  # noqa: E402
from coursekit.grading.intake.release import release  # noqa: E402

COMPARE = 60  # write_class adds two students (two notebooks, bad id) to the kinds listed
SIZES = (60, 240)
LARGE = 960
TIMEOUT = "3"
TARGET_WALL, TARGET_CPU = 3.0, 1.0
TARGET_STOCK_WALL = 5.0  # against stock nbgrader (issue 27)
WARM_UP = 8  # submissions graded by both arms before the stock rounds (warm_up)
GRADE = """import json, resource, sys
from coursekit.cli import end, main
code = main(sys.argv[1:])
me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
print("BENCH", json.dumps({"main_kib": me.ru_maxrss, "largest_child_kib": kids.ru_maxrss}))
end(code)
"""  # as python -m coursekit (coursekit/__main__.py) ends


def children_cpu() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return kids.ru_utime + kids.ru_stime


def measured(command: list[str], **kwargs) -> tuple[float, float, subprocess.CompletedProcess]:
    """(wall seconds, CPU seconds of the command and all it waited for, the finished process)."""
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    wall, cpu = time.perf_counter(), children_cpu()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False, **kwargs)
    return time.perf_counter() - wall, children_cpu() - cpu, done


def make_course(root: Path) -> Course:
    root.mkdir(parents=True)
    shutil.copyfile(REPO / "autograder" / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(REPO / "autograder" / "source", root / "source")
    course = Course.at(root)
    release(course)
    return course


def mixed_class(course: Course, folder: Path, size: int) -> dict[str, str]:
    kinds = list(itertools.islice(itertools.cycle([*NOTEBOOK_KINDS, *FILE_KINDS]), size - 2))
    return write_class(course.release_notebook, folder, kinds)


def coursekit_grade(course: Course, folder: Path, *options: str) -> tuple[float, float, dict, dict]:
    """wall, CPU, {student: automatic scores}, peak memory (KiB) of `coursekit grade` in a subprocess."""
    wall, cpu, done = measured([sys.executable, "-c", GRADE, "grade", str(folder), "--course", str(course.root),
                                "--timeout", TIMEOUT, *options])
    if done.returncode != 0:
        raise SystemExit(f"coursekit grade failed:\n{done.stderr[-2000:]}")
    memory = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("BENCH "))[6:])
    with open(course.report_csv, encoding="utf-8") as f:
        scores = {row["student_id"]: tuple(float(row[c]) for c in course.rubric.columns) for row in csv.DictReader(f)}
    return wall, cpu, scores, memory


def plain_nbgrader(course: Course, submitted: Path) -> tuple[float, float, dict]:
    shutil.copytree(submitted, course.root / "submitted")
    wall, cpu, _ = measured([sys.executable, "-m", "nbgrader", "autograde", "lesson11", "--force",
                             f"--SandboxExecute.timeout={TIMEOUT}"], cwd=course.root)
    return wall, cpu, gradebook_scores(course.db_url, submitted)


STOCK_CONFIG = """c = get_config()  # noqa: F821 (nbgrader's defaults: no sandbox, nbgrader's own ExecutePreprocessor)
c.CourseDirectory.root = {root!r}
c.CourseDirectory.course_id = "lesson11"
"""
STOCK_MEMORY = 4 << 30  # address-space limit of stock nbgrader and its kernels: memory_hog's 8 GiB fails there too


def stock_nbgrader(root: Path, submitted: Path) -> tuple[float, float, dict]:
    """Stock `nbgrader autograde` as an instructor would run it without this kit: a fresh course folder
    whose nbgrader_config.py sets only the folder and course id (nbgrader's default preprocessors:
    the default Execute, no sandbox, no judge), the lesson's source released by stock
    `nbgrader generate_assignment`, then the same prepared notebooks autograded. Two settings differ
    from nbgrader's defaults, for the same reasons for both arms: the cell timeout (`TIMEOUT`, like
    `--timeout` of coursekit grade; nbgrader's default is 30 s) and an address-space limit so the
    memory_hog submission cannot take the machine (the kit's sandbox caps it at 2 GiB)."""
    root.mkdir(parents=True)
    shutil.copytree(REPO / "autograder" / "source", root / "source")
    (root / "nbgrader_config.py").write_text(STOCK_CONFIG.format(root=str(root)), encoding="utf-8")
    _, _, done = measured([sys.executable, "-m", "nbgrader", "generate_assignment", "lesson11", "--force"], cwd=root)
    if done.returncode != 0:
        raise SystemExit(f"stock nbgrader generate_assignment failed:\n{done.stderr[-2000:]}")
    shutil.copytree(submitted, root / "submitted")

    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (STOCK_MEMORY, STOCK_MEMORY))

    wall, cpu, _ = measured([sys.executable, "-m", "nbgrader", "autograde", "lesson11", "--force",
                             f"--Execute.timeout={TIMEOUT}"], cwd=root, preexec_fn=limit_memory)
    return wall, cpu, gradebook_scores(f"sqlite:///{root / 'gradebook.db'}", submitted)


def gradebook_scores(db_url: str, submitted: Path) -> dict:
    """{student: automatic scores in rubric order, or None when nbgrader did not grade it}."""
    checks = ("test_normal", "test_boundary", "test_aggregation")
    scores = {}
    with Gradebook(db_url) as gb:
        for student in sorted(p.name for p in submitted.iterdir()):
            try:
                nb = gb.find_submission_notebook("lesson11", "lesson11", student)
            except Exception:
                scores[student] = None
                continue
            grades = {g.name: g.score or 0.0 for g in nb.grades}
            scores[student] = tuple(grades[c] for c in checks)
    return scores


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def compare(tmp: Path) -> None:
    fast = make_course(tmp / "coursekit")
    bare = make_course(tmp / "unsandboxed")
    plain = make_course(tmp / "plain")
    folder = tmp / "lms"
    students = mixed_class(fast, folder, COMPARE)
    fast_s, fast_cpu, fast_scores, _ = coursekit_grade(fast, folder)
    bare_s, bare_cpu, bare_scores, _ = coursekit_grade(bare, folder, "--no-sandbox")
    plain_s, plain_cpu, plain_scores = plain_nbgrader(plain, fast.root / "submitted")
    agree = [sid for sid, s in plain_scores.items() if s == fast_scores.get(sid)]
    differ = sorted(set(plain_scores) - set(agree))
    wall_ratio, cpu_ratio = plain_s / fast_s, fast_cpu / plain_cpu
    print(f"bench_grading: {len(students)} submissions ({len(plain_scores)} gradable), sandbox on, cell timeout "
          f"{TIMEOUT} s, {os.cpu_count()} cores")
    print(f"  plain sequential nbgrader autograde : {plain_s:7.1f} s wall, {plain_cpu:6.1f} s CPU (autograde only)")
    print(f"  coursekit grade (make grade)        : {fast_s:7.1f} s wall, {fast_cpu:6.1f} s CPU "
          "(ingest + autograde + feedback + report)")
    print(f"  wall: coursekit {wall_ratio:5.2f}x faster      (target >= {TARGET_WALL:.1f}x: "
          f"{verdict(wall_ratio >= TARGET_WALL)})")
    print(f"  CPU : coursekit {cpu_ratio:5.2f}x of plain's  (target <= {TARGET_CPU:.1f}x: "
          f"{verdict(cpu_ratio <= TARGET_CPU)})")
    print(f"  automatic scores agree              : {len(agree)}/{len(plain_scores)}"
          + (f"; differ: {', '.join(differ)}" if differ else ""))
    same_bare = sum(bare_scores.get(sid) == s for sid, s in fast_scores.items())
    print(f"  coursekit grade --no-sandbox        : {bare_s:7.1f} s wall, {bare_cpu:6.1f} s CPU (same files)")
    print(f"  sandbox cost, sandboxed/unsandboxed : {fast_s / bare_s:7.2f}x wall, {fast_cpu / bare_cpu:5.2f}x CPU; "
          f"scores agree {same_bare}/{len(fast_scores)}")
    print(f"  load average (1 min) at the end     : {os.getloadavg()[0]:7.2f} on {os.cpu_count()} cores")


def load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def kit_arm(tmp: Path, n: int | str, folder: Path) -> tuple:
    course = make_course(tmp / f"round-{n}-coursekit")
    before = load()
    wall, cpu, scores, _ = coursekit_grade(course, folder)
    return wall, cpu, scores, f"{before}->{load()}", course.root / "submitted"


def stock_arm(tmp: Path, n: int | str, prepared: Path) -> tuple:
    before = load()
    wall, cpu, scores = stock_nbgrader(tmp / f"round-{n}-stock", prepared)
    return wall, cpu, scores, f"{before}->{load()}"


def warm_up(tmp: Path) -> None:
    """Both arms once on a class of WARM_UP mixed submissions, not counted: the first grading after a boot
    or an install reads the libraries from disk and writes their bytecode (measured on a quiet machine
    just set up: make grade 16.6 s, then 13.7 s on the same class), which is not what grading costs."""
    folder = tmp / "warm-up-lms"
    mixed_class(make_course(tmp / "warm-up-release"), folder, WARM_UP)
    kit_wall, _, _, _, submitted = kit_arm(tmp, "warm-up", folder)
    stock_wall, _, _, _ = stock_arm(tmp, "warm-up", submitted)
    print(f"  warm-up, not counted ({WARM_UP} submissions): make grade {kit_wall:5.1f} s, stock {stock_wall:5.1f} s")


def stock_rounds(tmp: Path, rounds: int) -> None:
    """`make grade` (sandbox on) against stock nbgrader (`stock_nbgrader`) on the same class, the arms
    alternating round by round (make grade first in rounds 1, 3...; stock first in rounds 2, 4...),
    each arm in a fresh course; stock autogrades the notebooks round 1's make grade prepared (it
    cannot read the broken files). Per round: wall and CPU of both, the ratios, the score agreement
    and the 1-minute load average at the start and end of each arm."""
    print(f"stock arm: make grade vs stock nbgrader autograde (defaults), {COMPARE} submissions, cell timeout "
          f"{TIMEOUT} s, {os.cpu_count()} cores, {rounds} rounds, arms alternating")
    folder = tmp / "lms"
    mixed_class(make_course(tmp / "release"), folder, COMPARE)
    warm_up(tmp)
    prepared = tmp / "prepared"
    walls, cpus = [], []
    for n in range(rounds):
        if n % 2 == 0:
            kit_wall, kit_cpu, kit_scores, kit_load, submitted = kit_arm(tmp, n, folder)
            if not prepared.exists():
                shutil.copytree(submitted, prepared)
            stock_wall, stock_cpu, stock_scores, stock_load = stock_arm(tmp, n, prepared)
        else:
            stock_wall, stock_cpu, stock_scores, stock_load = stock_arm(tmp, n, prepared)
            kit_wall, kit_cpu, kit_scores, kit_load, _ = kit_arm(tmp, n, folder)
        agree = [sid for sid, s in stock_scores.items() if s == kit_scores.get(sid)]
        wall_ratio, cpu_ratio = stock_wall / kit_wall, kit_cpu / stock_cpu
        walls.append(wall_ratio)
        cpus.append(cpu_ratio)
        print(f"  round {n + 1} ({'make grade' if n % 2 == 0 else 'stock'} first): make grade {kit_wall:6.1f} s wall "
              f"{kit_cpu:6.1f} s CPU (load {kit_load}); stock {stock_wall:6.1f} s wall {stock_cpu:6.1f} s CPU "
              f"(load {stock_load})")
        print(f"    wall {wall_ratio:5.2f}x faster than stock (target >= {TARGET_STOCK_WALL:.1f}x: "
              f"{verdict(wall_ratio >= TARGET_STOCK_WALL)}); CPU {cpu_ratio:5.2f}x of stock's (target <= "
              f"{TARGET_CPU:.1f}x: {verdict(cpu_ratio <= TARGET_CPU)}); scores agree {len(agree)}/{len(stock_scores)}"
              + "".join(f"; {sid} stock {stock_scores[sid]} vs {kit_scores.get(sid)}"
                        for sid in sorted(set(stock_scores) - set(agree))))
    print(f"  over {rounds} rounds: wall {min(walls):.2f}x-{max(walls):.2f}x faster, CPU {min(cpus):.2f}x-"
          f"{max(cpus):.2f}x of stock's")


def scaling(tmp: Path, sizes: list[int]) -> None:
    print(f"scaling: coursekit grade, mixed submissions (as above), {os.cpu_count()} cores")
    print(f"  {'submissions':>11s} {'gradable':>8s} {'wall s':>8s} {'s/nb':>6s} {'CPU s/nb':>8s} {'vs first':>8s} "
          f"{'peak MiB grader':>15s} {'largest worker/kernel':>21s}")
    first = None
    for size in sizes:
        course = make_course(tmp / f"scale-{size}")
        folder = tmp / f"scale-{size}-lms"
        mixed_class(course, folder, size)
        wall, cpu, _, memory = coursekit_grade(course, folder)
        gradable = sum(1 for _ in (course.root / "submitted").iterdir())
        per = wall / gradable
        first = first or per
        print(f"  {size:11d} {gradable:8d} {wall:8.1f} {per:6.2f} {cpu / gradable:8.2f} {per / first:7.2f}x "
              f"{memory['main_kib'] / 1024:15.0f} {memory['largest_child_kib'] / 1024:21.0f}")
        shutil.rmtree(course.root)
        shutil.rmtree(folder)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=None, help=f"class sizes for the scaling curve (default "
                        f"{','.join(map(str, SIZES))}; --large adds {LARGE})")
    parser.add_argument("--large", action="store_true", help=f"also grade {LARGE} submissions (about 10 minutes "
                        "on a quiet 2-core machine)")
    parser.add_argument("--skip-compare", action="store_true", help="only the scaling curve")
    parser.add_argument("--skip-scaling", action="store_true", help="only the comparison")
    parser.add_argument("--stock-rounds", type=int, default=2, help="rounds of make grade vs stock nbgrader, "
                        "arms alternating (default 2; 0: none)")
    parser.add_argument("--stock-only", action="store_true", help="only the rounds against stock nbgrader")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")] if args.sizes else [*SIZES, *([LARGE] if args.large else [])]
    sizes = [] if args.skip_scaling else sizes
    with tempfile.TemporaryDirectory(prefix="bench-grading-") as tmp:
        if args.stock_rounds:
            stock_rounds(Path(tmp) / "stock", args.stock_rounds)
        if args.stock_only:
            return 0
        if not args.skip_compare:
            compare(Path(tmp) / "compare")
        if sizes:
            scaling(Path(tmp), sizes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
