"""`make bench`: every bench/bench_*.py that applies to this machine, one after another.

A bench that does not apply here (no CUDA, no browser...) exits with status 2 and says why on its
last line of stderr: it is reported as skipped with that reason and the others still run. Prints a
summary (ran, skipped and why, failed) and exits 1 when any bench failed.
Run: .venv/bin/python bench/run_all.py [NAME ...]   (names like bench_grading; default: all)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent
NOT_HERE = 2  # a bench's exit status for "does not apply to this machine"


def main(names: list[str]) -> int:
    benches = sorted(BENCH.glob("bench_*.py"))
    if names:
        benches = [b for b in benches if b.stem in names]
    ran, skipped, failed = [], [], []
    for bench in benches:
        print(f"== {bench.name}", flush=True)
        done = subprocess.run([sys.executable, str(bench)], stderr=subprocess.PIPE, text=True, check=False)
        sys.stderr.write(done.stderr)
        if done.returncode == NOT_HERE:
            lines = done.stderr.strip().splitlines()
            skipped.append(f"{bench.stem} ({lines[-1] if lines else 'does not apply here'})")
        elif done.returncode != 0:
            failed.append(f"{bench.stem} (exit status {done.returncode})")
        else:
            ran.append(bench.stem)
    print(f"bench: ran {len(ran)}: {', '.join(ran) or '-'}")
    print(f"bench: skipped {len(skipped)}: {'; '.join(skipped) or '-'}")
    print(f"bench: failed {len(failed)}: {'; '.join(failed) or '-'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
