"""Figure 11-1 is redrawn byte for byte as committed (git HEAD), even from a stale font cache, with the
right numbers, and the CLI follows main(argv) -> int."""
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from matplotlib import font_manager

from grpolab import figures

ROOT = Path(__file__).resolve().parents[2]
FIGURE = f"assets/figs/{figures.FIGURE_11_1}"


def test_figure_11_1_regenerates_byte_identical_to_head(tmp_path, committed):
    assert figures.main(["--out-dir", str(tmp_path)]) == 0
    assert (tmp_path / figures.FIGURE_11_1).read_bytes() == committed(FIGURE)


def test_a_font_cache_older_than_the_cjk_font_still_draws_the_committed_figure(tmp_path, stale_font_cache, committed):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "grpolab.figures", "--out-dir", str(out)], cwd=ROOT,
                          env=stale_font_cache, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (out / figures.FIGURE_11_1).read_bytes() == committed(FIGURE)


def _advantages(rewards: list[float]) -> list[float]:
    """(r - mean) / population std, all zero for a zero-variance group: the lesson's definition, by hand."""
    mean, std = statistics.fmean(rewards), statistics.pstdev(rewards)
    return [0.0] * len(rewards) if std < 1e-8 else [(r - mean) / std for r in rewards]


def test_figure_11_1_draws_each_groups_rewards_and_advantages():
    fig = figures.draw_reward_distribution()
    axes = fig.axes  # 2 x 4, row-major: rewards on top, advantages below
    for j, (name, rewards) in enumerate(figures.EXAMPLE_GROUPS.items()):
        top, bottom = axes[j], axes[4 + j]
        assert [bar.get_height() for bar in top.patches] == pytest.approx(rewards)
        assert [bar.get_height() for bar in bottom.patches] == pytest.approx(_advantages(rewards), abs=1e-12)
        mean, std = statistics.fmean(rewards), statistics.pstdev(rewards)
        assert top.get_title() == f"{name}\nμ={mean:.2f}, σ={std:.2f}"
    mixed = [bar.get_height() for bar in axes[4].patches]
    assert mixed[:2] == pytest.approx([1.2910, -0.7746], abs=1e-4)  # (1 - 3/8) / sqrt(15/64), (0 - 3/8) / ...
    assert axes[0].get_title().endswith("μ=0.38, σ=0.48")
    assert [t.get_text() for t in axes[7].texts] == ["std < eps → 优势全为 0"]
    assert "CJK" in font_manager.findfont(fig.texts[0].get_fontproperties()), "the title is drawn with a CJK font"
    figures.plt.close(fig)


def test_no_cjk_font_stops_with_one_line_and_writes_nothing(monkeypatch, tmp_path, capsys):
    without_cjk = [f for f in font_manager.fontManager.ttflist if "CJK" not in f.name]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", without_cjk)
    monkeypatch.setattr(font_manager, "findSystemFonts", lambda *args, **kwargs: [])
    assert figures.main(["--out-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "install fonts-noto-cjk" in err, err
    assert not list(tmp_path.iterdir())
