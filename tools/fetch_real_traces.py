"""Put the real public torch.profiler traces of `tests/data/real/manifest.json` into a folder.

The real-trace tests (`tests/real/`) read these files; they never download anything and skip a case
whose file is absent. This script is how a person or a CI step obtains them, from any of:

  1. the destination folder itself (already there, checksum verified),
  2. a local git clone or mirror of the source repository (`--git-dir OWNER/NAME=PATH`, or
     `--mirror-root DIR` holding `OWNER+NAME/repo` git directories),
  3. with `--clone`, a blob-less clone of `https://github.com/OWNER/NAME` (network needed).

Each file is taken from the exact commit and path the manifest names and must match its sha256; it is
written atomically as `<dest>/<name>.json.gz`.

Usage:
    python tools/fetch_real_traces.py --dest /work/traces/real --mirror-root /work/.mirror
    python tools/fetch_real_traces.py --list            # repo, commit, path, sha256 of each trace

Exit status: 0 when every trace is in place, 1 when some could not be obtained (each named on
stderr), 2 on bad arguments or an unreadable manifest.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
MANIFEST = REPO_ROOT / "tests" / "data" / "real" / "manifest.json"
MANIFEST_SCHEMA = "bubblescope.real_traces/1"


class FetchError(Exception):
    """Bad arguments or an unreadable manifest: one line, exit 2."""


def load_manifest(path: Path = MANIFEST) -> list[dict]:
    """The manifest's trace entries (name, repo, commit, path, licence, sha256, bytes, events).

    Raises:
        FetchError: the file is missing, not JSON, or of another schema.
    """
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise FetchError(f"{path}: cannot read the manifest ({exc})") from None
    if manifest.get("schema") != MANIFEST_SCHEMA:
        raise FetchError(f"{path}: schema {manifest.get('schema')!r}, expected {MANIFEST_SCHEMA!r}")
    return list(manifest["traces"])


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def git_show(git_dir: Path, commit: str, path: str) -> bytes | None:
    """`git show COMMIT:PATH` from a git directory; None when the object is not there."""
    result = subprocess.run(
        ["git", f"--git-dir={git_dir}", "show", f"{commit}:{path}"],
        capture_output=True,
        check=False,
    )
    return result.stdout if result.returncode == 0 else None


def clone_blobless(repo: str, into: Path) -> Path | None:
    """A bare, blob-less clone of the public repository (blobs come on demand); None on failure."""
    target = into / repo.replace("/", "+")
    result = subprocess.run(
        [
            "git",
            "clone",
            "--bare",
            "--filter=blob:none",
            "--quiet",
            f"https://github.com/{repo}",
            str(target),
        ],
        capture_output=True,
        check=False,
    )
    return target if result.returncode == 0 else None


def write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def candidate_git_dirs(repo: str, git_dirs: dict[str, Path], mirror_root: Path | None) -> list[Path]:
    """Local git directories that may hold the repository, most specific first."""
    found = [git_dirs[repo]] if repo in git_dirs else []
    if mirror_root is not None:
        mirror = mirror_root / repo.replace("/", "+") / "repo"
        if mirror.is_dir():
            found.append(mirror)
    return found


def obtain(
    entry: dict, dest: Path, git_dirs: dict[str, Path], mirror_root: Path | None, clones: dict | None
) -> str:
    """Bring one trace to `<dest>/<name>.json.gz`. Returns '' on success, else why it failed.

    Args:
        clones: repo -> clone already made in this run (None: do not clone); filled as it goes.
    """
    target = dest / f"{entry['name']}.json.gz"
    if target.is_file() and sha256_of(target.read_bytes()) == entry["sha256"]:
        return ""
    sources = candidate_git_dirs(entry["repo"], git_dirs, mirror_root)
    if clones is not None:
        if entry["repo"] not in clones:
            clones[entry["repo"]] = clone_blobless(entry["repo"], clones["__scratch__"])
        if clones[entry["repo"]] is not None:
            sources.append(clones[entry["repo"]])
    for git_dir in sources:
        data = git_show(git_dir, entry["commit"], entry["path"])
        if data is None:
            continue
        digest = sha256_of(data)
        if digest != entry["sha256"]:
            return (
                f"{git_dir}: {entry['path']} at {entry['commit'][:12]} has sha256 {digest[:12]}, "
                f"expected {entry['sha256'][:12]}"
            )
        write_atomically(target, data)
        return ""
    return (
        f"not found locally: get {entry['repo']} at {entry['commit']} and take {entry['path']} "
        f"(or rerun with --clone where the network is reachable)"
    )


def parse_git_dirs(specs: list[str]) -> dict[str, Path]:
    git_dirs = {}
    for spec in specs:
        repo, sep, path = spec.partition("=")
        if not sep or "/" not in repo or not path:
            raise FetchError(f"--git-dir {spec!r}: expected OWNER/NAME=PATH")
        git_dirs[repo] = Path(path)
    return git_dirs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dest", type=Path, default=Path(os.environ.get("BUBBLESCOPE_REAL_TRACES", "/work/traces/real"))
    )
    parser.add_argument(
        "--mirror-root", type=Path, default=None, help="folder of OWNER+NAME/repo git directories"
    )
    parser.add_argument(
        "--git-dir", action="append", default=[], help="OWNER/NAME=PATH of a local clone (repeatable)"
    )
    parser.add_argument(
        "--clone", action="store_true", help="clone missing repositories from GitHub (network)"
    )
    parser.add_argument("--list", action="store_true", help="print the manifest and exit")
    parser.add_argument("--manifest", type=Path, default=MANIFEST)
    args = parser.parse_args(argv)
    try:
        entries = load_manifest(args.manifest)
        git_dirs = parse_git_dirs(args.git_dir)
    except FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.list:
        for e in entries:
            print(
                f"{e['name']}\t{e['repo']}@{e['commit'][:12]}:{e['path']}\t"
                f"{e['bytes']} B\tsha256 {e['sha256']}"
            )
        return 0
    failures = 0
    with tempfile.TemporaryDirectory() as scratch:
        clones = {"__scratch__": Path(scratch)} if args.clone else None
        for entry in entries:
            why = obtain(entry, args.dest, git_dirs, args.mirror_root, clones)
            if why:
                failures += 1
                print(f"{entry['name']}: {why}", file=sys.stderr)
    print(f"{len(entries) - failures}/{len(entries)} real traces in {args.dest}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
