"""The committed CodeMirror bundle (assets/runner/editor.js) is exactly what `make editor` builds."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT / "assets" / "runner" / "editor.js"


def test_committed_editor_bundle_is_what_make_editor_builds(tmp_path: Path) -> None:
    out = tmp_path / "editor.js"
    done = subprocess.run(["node", "assets/runner/build-editor.mjs", str(out)], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == BUNDLE.read_bytes(), "assets/runner/editor.js is stale: run `make editor` and commit"


def test_the_bundle_names_no_other_host() -> None:
    urls = set(re.findall(r"https?://[\w.-]+", BUNDLE.read_text(encoding="utf-8")))
    assert urls <= {"http://www.w3.org"}, urls  # the SVG namespace is a name, not a request
