"""Install Debian's headless Chromium for the report's browser test when it is missing (best effort).

`make test` runs this before pytest. It never fails the build: when it cannot install (no root, no apt,
no network, or BUBBLESCOPE_NO_BROWSER_INSTALL set) it says why on stderr, and the browser tests skip
with a reason of their own.
"""

import os
import shutil
import subprocess
import sys

# apt on a cold CI box: index update plus ~100 MB of packages.
APT_TIMEOUT_S = 900
BROWSER_NAMES = ("chromium", "chromium-browser")


def _say(message: str) -> None:
    print(f"ensure_browser: {message}", file=sys.stderr)


def find_browser() -> str | None:
    for name in BROWSER_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _why_not_install() -> str | None:
    if os.environ.get("BUBBLESCOPE_NO_BROWSER_INSTALL"):
        return "BUBBLESCOPE_NO_BROWSER_INSTALL is set"
    if shutil.which("apt-get") is None:
        return "no apt-get on this machine"
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return "not root (run `sudo apt-get install chromium` once)"
    return None


def _apt(args: list[str]) -> subprocess.CompletedProcess[str] | None:
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    try:
        return subprocess.run(
            ["apt-get", *args], env=env, capture_output=True, text=True, timeout=APT_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        _say(f"apt-get {args[0]} took longer than {APT_TIMEOUT_S} s; gave up")
        return None


def _browser_starts(path: str) -> bool:
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def main() -> int:
    existing = find_browser()
    if existing:
        return 0
    reason = _why_not_install()
    if reason:
        _say(f"chromium missing and not installed: {reason}; the browser tests will skip")
        return 0
    _say("installing chromium for the report's browser test ...")
    _apt(["update", "-q"])
    installed = _apt(["install", "-y", "-q", "--no-install-recommends", "chromium"])
    path = find_browser()
    if path is None or not _browser_starts(path):
        tail = (installed.stderr or installed.stdout)[-500:] if installed is not None else ""
        _say(f"chromium install failed; the browser tests will skip. apt said: {tail.strip()}")
        return 0
    _say(f"chromium ready at {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
