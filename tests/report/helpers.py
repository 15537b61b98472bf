"""Shared bits of the report tests: fixture paths, the hostile name, and a headless-Chromium page loader."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "report"
ABLATION_DIR = DATA_DIR / "ablation_3switch"
HOSTILE_RUN_DIR = DATA_DIR / "run_hostile"
MINIMAL_RUN_FILE = DATA_DIR / "run_minimal" / "cpu_debug.json"
HOSTILE_TRACE = DATA_DIR / "trace_hostile" / "trace.json"
HOSTILE_NAME = "</script><script>document.title='x'</script>"
BROWSER_TIMEOUT_S = 90
# Headless Chromium advances this much virtual time, so Plotly's async rendering finishes before the DOM dump.
VIRTUAL_TIME_BUDGET_MS = 15000


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def chromium_flags(profile_dir: str) -> list[str]:
    return [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={profile_dir}",
        f"--virtual-time-budget={VIRTUAL_TIME_BUDGET_MS}",
    ]


@dataclass
class LoadedPage:
    """What a headless load of a page left in its DOM (see html_page.py's browser hooks) and on stderr."""

    dom: str
    stderr: str

    def html_attr(self, name: str) -> str | None:
        match = re.search(r"<html\b[^>]*\b" + re.escape(name) + r'="([^"]*)"', self.dom)
        return match.group(1) if match else None

    def body_attr(self, name: str) -> str | None:
        match = re.search(r"<body\b[^>]*\b" + re.escape(name) + r'="([^"]*)"', self.dom)
        return match.group(1) if match else None

    def title(self) -> str | None:
        match = re.search(r"<title>(.*?)</title>", self.dom, re.S)
        return match.group(1) if match else None

    def uncaught_console_errors(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if "Uncaught" in line]


def load_in_chromium(
    page: Path,
    screenshot: Path | None = None,
    window_px: tuple[int, int] = (1400, 2600),
    dump_dom: bool = False,
) -> LoadedPage:
    """Open `page` in headless Chromium, offline, and return its DOM after scripts ran (and a screenshot;
    both from one launch with `dump_dom`)."""
    binary = chromium_path()
    assert binary is not None, "chromium is not installed"
    with tempfile.TemporaryDirectory(prefix="bubblescope-chromium-") as profile_dir:
        flags = chromium_flags(profile_dir)
        if screenshot is not None:
            flags += [f"--window-size={window_px[0]},{window_px[1]}", f"--screenshot={screenshot}"]
        if screenshot is None or dump_dom:
            flags.append("--dump-dom")
        done = subprocess.run(
            [binary, *flags, page.resolve().as_uri()],
            capture_output=True,
            text=True,
            timeout=BROWSER_TIMEOUT_S,
            check=False,
        )
    assert done.returncode == 0, f"chromium exited {done.returncode}: {done.stderr[-2000:]}"
    return LoadedPage(dom=done.stdout, stderr=done.stderr)
