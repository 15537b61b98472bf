"""Atomic file writes: a reader (or an interrupted run) never sees a half-written result."""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write `data` to `path` via a temporary file in the same folder and an atomic rename."""
    return write_stream_atomic(path, lambda write: write(data), gzipped=False)


def write_stream_atomic(
    path: str | os.PathLike[str],
    fill: Callable[[Callable[[bytes], Any]], None],
    *,
    gzipped: bool | None = None,
) -> Path:
    """Write what `fill(write)` writes, piece by piece, to `path` atomically (nothing is held whole).

    Args:
        fill: called once with the write function of the temporary file.
        gzipped: gzip the bytes; default: when `path` ends in `.gz`.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        # mkstemp creates 0600; give the result the mode a plain open() would (0666 less the umask).
        os.fchmod(fd, 0o666 & ~_current_umask())
        with os.fdopen(fd, "wb") as handle:
            if target.name.endswith(".gz") if gzipped is None else gzipped:
                # No name or time in the header: the same content gives the same bytes.
                with gzip.GzipFile(filename="", fileobj=handle, mode="wb", compresslevel=6, mtime=0) as out:
                    fill(out.write)
            else:
                fill(handle.write)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise
    return target


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | os.PathLike[str], obj: Any, *, indent: int | None = 1) -> Path:
    """Write JSON atomically; a `.gz` suffix gzips it."""
    data = json.dumps(obj, indent=indent, allow_nan=False).encode("utf-8")
    if str(path).endswith(".gz"):
        data = gzip.compress(data, compresslevel=6, mtime=0)
    return write_bytes_atomic(path, data)
