"""A trace file's JSON text as a stream of bounded byte blocks: only regular files, gzip inflated as it
is read, and a cap on the decompressed size.

Nothing here holds the whole text: `text_blocks` yields at most `BLOCK_BYTES` (plus one gzip step) at a
time, so a decompression bomb is refused after inflating the cap and no more, and a bomb that is not
JSON (zeros) is refused by the parser after its first block. Every failure is a one-line `TraceError`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import zlib
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from types import ModuleType

from bubblescope.errors import TraceError

# The gzip inflater: ISA-L's gives the same bytes as zlib's 2.2x faster (0.33 vs 0.72 s CPU for the
# 388 MB of the 1.79 M-event benchmark trace, ~0.2 µs per event: benchmarks/RESULTS.md, issue 26).
INFLATE: ModuleType
try:
    from isal import isal_zlib

    INFLATE = isal_zlib
except ImportError:  # a platform without an isal wheel: the stdlib's zlib, same API and same bytes
    INFLATE = zlib
# 512 MiB of JSON text: 2-3.5 M events as Kineto writes them (150-250 bytes each), 2x the 1.7 M-event
# benchmark trace (261 MB) and 8x the largest public trace we found (62 MB). Memory follows the events:
# the densest possible text (65-byte GPU events, 1.3 M per 100 MiB) costs the loader ~250 MB of tables
# per 100 MiB, so ~1.3 GB at this cap (benchmarks/RESULTS.md, "Trace loading"). The old 4 GiB default let
# a 4 MB gzip take 8 GB. Larger traces: --max-decompressed-mb.
DEFAULT_MAX_DECOMPRESSED_BYTES = 512 << 20
BLOCK_BYTES = 4 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_FILE_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)

_CAP_BYTES: ContextVar[int | None] = ContextVar("bubblescope_trace_cap_bytes", default=None)


@contextlib.contextmanager
def trace_size_cap(max_bytes: int | None) -> Iterator[None]:
    """Within the block, readers not given a cap refuse traces whose JSON text is larger than
    `max_bytes` (None: keep the current one). The CLI's `--max-decompressed-mb` sets it once for a
    whole command, whichever module then reads the traces."""
    token = _CAP_BYTES.set(max_bytes) if max_bytes is not None else None
    try:
        yield
    finally:
        if token is not None:
            _CAP_BYTES.reset(token)


# Trace files one command reads (one per rank). Each costs ~0.1 s of set-up and analysis however small
# (1,000 tiny files took 116 s, 50,000 ran past 300 s; 256 took 36 s on a 2-core box); 128 is twice
# the largest tensor-parallel group a batch-1 decode uses. More: --max-files.
DEFAULT_MAX_TRACE_FILES = 128
_MAX_FILES: ContextVar[int | None] = ContextVar("bubblescope_max_trace_files", default=None)


@contextlib.contextmanager
def trace_file_cap(max_files: int | None) -> Iterator[None]:
    """Within the block, `expand_trace_paths` refuses more than `max_files` trace files (None: keep the
    current cap). The CLI's `--max-files` sets it once for a whole command."""
    token = _MAX_FILES.set(max_files) if max_files is not None else None
    try:
        yield
    finally:
        if token is not None:
            _MAX_FILES.reset(token)


def effective_file_cap() -> int:
    """The cap set by `trace_file_cap`, else the default."""
    current = _MAX_FILES.get()
    return current if current is not None else DEFAULT_MAX_TRACE_FILES


def effective_cap(max_bytes: int | None) -> int:
    """The cap to use: the one given, else the one set by `trace_size_cap`, else the default."""
    if max_bytes is not None:
        return max_bytes
    current = _CAP_BYTES.get()
    return current if current is not None else DEFAULT_MAX_DECOMPRESSED_BYTES


def not_regular_reason(path: Path) -> str | None:
    """Why `path` is not a readable regular file (following symlinks), or None when it is one."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if path.is_symlink():
            return "a symlink to nothing"
        return "no such file or folder" if exc.errno == errno.ENOENT else (exc.strerror or str(exc))
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in _FILE_KINDS if test(mode)), "not a regular file")
    via = " (through a symlink)" if path.is_symlink() else ""
    return f"{kind}{via}, not a regular file"


def open_regular(path: Path) -> int:
    """A read-only descriptor of `path`, refused unless it is a regular file.

    Opened non-blocking, so a FIFO cannot hang the open, then checked with fstat (no race between
    the check and the read).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        reason = not_regular_reason(path) if exc.errno in (errno.ENXIO, errno.ENOENT) else None
        raise TraceError(f"{path}: cannot read ({reason or exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise TraceError(f"{path}: {not_regular_reason(path) or 'not a regular file'}; refusing to read it")
    os.set_blocking(fd, True)
    return fd


def text_blocks(path: Path, max_bytes: int | None = None) -> Iterator[bytes]:
    """The file's JSON text in blocks of at most about `BLOCK_BYTES`, gunzipped when it starts with the
    gzip magic, a leading UTF-8 byte order mark dropped.

    Args:
        path: a regular file (anything else is refused).
        max_bytes: refuse when the text passes this many bytes. Default: `effective_cap(None)`.

    Raises:
        TraceError: not a regular file, unreadable, corrupt or truncated gzip, UTF-16, over the cap.
    """
    cap = effective_cap(max_bytes)
    fd = open_regular(path)
    with os.fdopen(fd, "rb", buffering=0) as handle:
        try:
            head = handle.read(2)
            handle.seek(0)
            raw = (
                _gunzip_blocks(handle, path, cap) if head == _GZIP_MAGIC else _plain_blocks(handle, path, cap)
            )
            yield from _without_bom(raw, path)
        except OSError as exc:
            raise TraceError(f"{path}: cannot read ({exc.strerror or exc})") from None


def _plain_blocks(handle, path: Path, cap: int) -> Iterator[bytes]:
    total = 0
    while block := handle.read(BLOCK_BYTES):
        total += len(block)
        if total > cap:
            raise TraceError(f"{path}: larger than the {_limit(cap)} limit (--max-decompressed-mb)")
        yield block


def max_gzip_members(cap: int) -> int:
    """Gzip members allowed in a file whose text is capped at `cap` bytes: one per 64 KiB of the cap
    (8192 at the default 512 MiB), at least 1024. gzip, pigz and torch.profiler write one member;
    `cat a.gz b.gz` writes a few. Each member costs a new decompressor, so five million empty ones took
    177 s while inflating to nothing; `--max-decompressed-mb` raises the bound with the text cap."""
    return max(1024, cap >> 16)


def _gunzip_blocks(handle, path: Path, cap: int) -> Iterator[bytes]:
    # wbits 16+MAX_WBITS: gzip header; a new decompressor per gzip member (concatenated members are legal).
    total = 0
    members, member_cap = 1, max_gzip_members(cap)
    errors: tuple[type[BaseException], ...] = (zlib.error, INFLATE.error)
    decomp = INFLATE.decompressobj(16 + zlib.MAX_WBITS)
    pending = b""
    while True:
        if not pending:
            pending = handle.read(BLOCK_BYTES >> 2)
            if not pending:
                break
        try:
            # Never more than one block out per call, and never more than one byte past the cap.
            out = decomp.decompress(pending, min(BLOCK_BYTES, cap + 1 - total))
        except errors as exc:
            raise TraceError(f"{path}: corrupt gzip data ({exc})") from None
        pending = decomp.unconsumed_tail
        total += len(out)
        if total > cap:
            raise TraceError(
                f"{path}: decompresses to more than the {_limit(cap)} limit (--max-decompressed-mb)"
            )
        if out:
            yield out
        if decomp.eof:
            pending = decomp.unused_data or handle.read(BLOCK_BYTES >> 2)
            if not pending:
                return
            members += 1
            if members > member_cap:
                raise TraceError(
                    f"{path}: more than {member_cap} gzip members (the bound is one per 64 KiB of the "
                    f"{_limit(cap)} text limit; raise it with --max-decompressed-mb)"
                )
            decomp = INFLATE.decompressobj(16 + zlib.MAX_WBITS)
    if not decomp.eof:
        raise TraceError(f"{path}: truncated gzip (the file ends inside the compressed stream)")


def _limit(cap: int) -> str:
    return f"{cap >> 20} MiB" if cap >= 1 << 20 and cap % (1 << 20) == 0 else f"{cap} byte"


def _without_bom(blocks: Iterator[bytes], path: Path) -> Iterator[bytes]:
    """Drop a UTF-8 byte order mark (some Windows tools write one; JSON parsers reject it); refuse
    UTF-16, naming its mark."""
    head = b""
    for block in blocks:
        if len(head) < 3:
            head += block
            if len(head) < 3:
                continue
            if head.startswith(_UTF16_BOMS):
                raise TraceError(f"{path}: starts with a UTF-16 byte order mark; save the trace as UTF-8")
            block, head = (head[3:] if head.startswith(_UTF8_BOM) else head), b"xxx"
        if block:
            yield block
    if 0 < len(head) < 3:
        yield head
