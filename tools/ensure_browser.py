"""Install Debian's headless Chromium for the report's browser test when it is missing (best effort).

The browser test skips with a clear reason if this could not install it (no root, no apt).
"""

import os
import shutil
import subprocess
import sys


def main() -> int:
    if shutil.which("chromium") or shutil.which("chromium-browser"):
        return 0
    if os.environ.get("BUBBLESCOPE_NO_BROWSER_INSTALL") or shutil.which("apt-get") is None:
        return 0
    if hasattr(os, "geteuid") and os.geteuid() != 0:
        return 0
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
    print("installing chromium for the report's browser test ...", file=sys.stderr)
    subprocess.run(["apt-get", "update", "-q"], check=False, **quiet)
    subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"], check=False, **quiet)
    return 0


if __name__ == "__main__":
    sys.exit(main())
