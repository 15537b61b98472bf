"""Classify Python source files: the user's code, a library, torch, torch's compiler, or bubblescope.

No torch import: the read tap calls this on the hot path (cached per file name) and the site merge
(`bubblescope.profiling.read_sites`) calls it on recorded stacks.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sysconfig
from pathlib import Path

_BUBBLESCOPE_DIR = str(Path(__file__).resolve().parent.parent) + os.sep
# The example workloads shipped inside the package are user code (the code a user copies and edits):
# `run --workload bubblescope.examples.toy_workload:...` must name their lines, not skip them.
_EXAMPLES_DIR = _BUBBLESCOPE_DIR + "examples" + os.sep
_COMPILER_PARTS = (
    "_dynamo/",
    "_inductor/",
    "_functorch/",
    "fx/",
    "_subclasses/",
    "_higher_order_ops/",
    "export/",
)
_LIBRARY_PARTS = ("/site-packages/", "/dist-packages/")


def _stdlib_dirs() -> tuple[str, ...]:
    dirs = set()
    for key in ("stdlib", "platstdlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(str(Path(path).resolve()) + os.sep)
    return tuple(sorted(dirs))


_STDLIB_DIRS = _stdlib_dirs()


def _package_dirs(names: tuple[str, ...]) -> tuple[str, ...]:
    """Install folders of packages, found without importing them (find_spec does not run torch)."""
    dirs = []
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        for location in (spec.submodule_search_locations or []) if spec else []:
            dirs.append(str(Path(location).resolve()) + os.sep)
    return tuple(dirs)


_TORCH_DIRS = _package_dirs(("torch",))
_TRITON_DIRS = _package_dirs(("triton",))


@functools.lru_cache(maxsize=8192)
def frame_class(filename: str) -> str:
    """One of "bubblescope", "compiler", "torch", "library", "stdlib", "user" for a code's file name.

    "torch" is torch and triton (the read happens in them, the user cannot edit them); "compiler" is
    torch.compile's machinery; "library" anything under site-packages/dist-packages; "stdlib" the
    standard library and frozen/builtin pseudo-files (`<frozen runpy>`). Everything else is "user",
    bubblescope's own example workloads (`bubblescope/examples/`) included.
    """
    if filename.startswith("<"):
        return "stdlib" if filename.startswith(("<frozen", "<built-in")) else "user"
    path = filename.replace(os.sep, "/")
    resolved = _resolved(filename)
    for torch_dir in _TORCH_DIRS:
        if resolved.startswith(torch_dir):
            inner = resolved[len(torch_dir) :].replace(os.sep, "/")
            return "compiler" if inner.startswith(_COMPILER_PARTS) else "torch"
    if resolved.startswith(_TRITON_DIRS) or (not _TORCH_DIRS and "/torch/" in path):
        return "torch"
    if resolved.startswith(_BUBBLESCOPE_DIR) and not resolved.startswith(_EXAMPLES_DIR):
        return "bubblescope"
    if any(part in path for part in _LIBRARY_PARTS):
        return "library"
    if resolved.startswith(_STDLIB_DIRS):
        return "stdlib"
    return "user"


def _resolved(filename: str) -> str:
    try:
        return str(Path(filename).resolve())
    except OSError:
        return filename


def short_path(filename: str) -> str:
    """A library file relative to its site-packages folder (`transformers/generation/utils.py`), else
    the base name (`my_loop.py`), as the analysis writes sites."""
    path = filename.replace(os.sep, "/")
    for part in _LIBRARY_PARTS:
        if part in path:
            return path.rsplit(part, 1)[1]
    return os.path.basename(path)
