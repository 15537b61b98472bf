"""Regenerate the README's hero image (docs/img/report.png) from the current report of a real H200 sample.

The page is what `bubblescope report SAMPLE -o page.html` writes for a committed sample (by default the
baseline RunRecord of `reports/samples/ablation-ling3-flash-e256-h200`: ling3-flash-e256 on one H200, every
switch off, so host readbacks on), opened in headless Chromium (offline: plotly.js is inlined) and
screenshotted from the top: the fix-first list, the summary cards, the speed-of-light bar and the one-step
timeline with its legend.

    python tools/render_hero.py                      # writes docs/img/report.png
    python tools/render_hero.py --sample PATH --out shot.png --height 1500

Needs chromium (`python tools/ensure_browser.py` or `apt-get install chromium`); exits 2 with one line
when it is missing or the page does not render.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SAMPLE = REPO / "reports/samples/ablation-ling3-flash-e256-h200/runs/base.json"
DEFAULT_OUT = REPO / "docs/img/report.png"
WIDTH_PX = 1280
# Down to the timeline's legend on the default sample's run page.
HEIGHT_PX = 1560
# Headless Chromium advances this much virtual time so Plotly's async drawing ends before the shot.
VIRTUAL_TIME_BUDGET_MS = 15000
BROWSER_TIMEOUT_S = 120


def _fail(message: str) -> None:
    print(f"render_hero: {message}", file=sys.stderr)
    sys.exit(2)


def render_page(sample: Path, page: Path) -> None:
    """Write the report of `sample` to `page` with the repository's current renderer."""
    sys.path.insert(0, str(REPO))
    from bubblescope.report.html import render_inputs_html
    from bubblescope.report.load_inputs import load_inputs

    page.write_text(render_inputs_html(load_inputs([sample])), encoding="utf-8")


def screenshot(page: Path, out: Path, width_px: int, height_px: int) -> None:
    """Open `page` in headless Chromium and save the top `width_px` x `height_px` of it to `out`."""
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        _fail("chromium is not installed (python tools/ensure_browser.py, or apt-get install chromium)")
    with tempfile.TemporaryDirectory(prefix="bubblescope-hero-") as profile_dir:
        shot = Path(profile_dir) / "shot.png"
        flags = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--hide-scrollbars",
            f"--user-data-dir={profile_dir}/profile",
            f"--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}",
            f"--window-size={width_px},{height_px}",
            f"--screenshot={shot}",
        ]
        try:
            done = subprocess.run(
                [binary, *flags, page.resolve().as_uri()],
                capture_output=True,
                text=True,
                timeout=BROWSER_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            _fail(f"chromium took longer than {BROWSER_TIMEOUT_S} s")
        if done.returncode != 0 or not shot.is_file():
            _fail(f"chromium exited {done.returncode} without a screenshot: {done.stderr.strip()[-300:]}")
        out.parent.mkdir(parents=True, exist_ok=True)
        # Written beside the target, then renamed: a failed run never leaves half an image.
        partial = out.with_suffix(".partial.png")
        shutil.copyfile(shot, partial)
        partial.replace(out)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sample", type=Path, default=DEFAULT_SAMPLE, help="what `bubblescope report` reads")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="PNG to write")
    parser.add_argument("--width", type=int, default=WIDTH_PX, help="window width, px")
    parser.add_argument("--height", type=int, default=HEIGHT_PX, help="window height (top of the page), px")
    args = parser.parse_args(argv)
    if not args.sample.exists():
        _fail(f"{args.sample}: no such sample")
    with tempfile.TemporaryDirectory(prefix="bubblescope-hero-page-") as folder:
        page = Path(folder) / "report.html"
        render_page(args.sample, page)
        screenshot(page, args.out, args.width, args.height)
    print(f"wrote {args.out} ({args.out.stat().st_size} bytes) from {args.sample}")


if __name__ == "__main__":
    main()
