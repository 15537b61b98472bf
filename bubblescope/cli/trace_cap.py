"""`--max-decompressed-mb`, the same option on every command that reads traces."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from bubblescope.errors import ConfigError
from bubblescope.records.sample_budget import DEFAULT_MAX_SAMPLES, record_sample_cap
from bubblescope.trace.source import (
    DEFAULT_MAX_DECOMPRESSED_BYTES,
    DEFAULT_MAX_TRACE_FILES,
    trace_file_cap,
    trace_size_cap,
)

DEFAULT_MAX_DECOMPRESSED_MB = DEFAULT_MAX_DECOMPRESSED_BYTES >> 20
__all__ = ["DEFAULT_MAX_SAMPLES", "DEFAULT_MAX_TRACE_FILES", "input_caps", "trace_cap_mb", "trace_files_cap"]
MAX_DECOMPRESSED_HELP = (
    "Refuse a trace whose JSON text (after gunzip) is larger than this many MiB (default 512: "
    "2-3.5 M events). Loading memory follows the events, ~2.5 GB per GiB of the densest text."
)


MAX_FILES_HELP = (
    f"Refuse more than this many trace files (one per rank) in the folders and files given "
    f"(default {DEFAULT_MAX_TRACE_FILES}; each costs ~0.1 s however small)."
)


MAX_SAMPLES_HELP = (
    f"Refuse a RunRecord with more step samples (repeats x steps) than this (default {DEFAULT_MAX_SAMPLES}; "
    "the bootstrap holds ~50 KB per sample)."
)


@contextlib.contextmanager
def input_caps(max_files: int, max_samples: int) -> Iterator[None]:
    """Within the block at most `max_files` trace files and `max_samples` samples per record are read.

    Raises:
        ConfigError: a cap that is not positive.
    """
    if max_samples <= 0:
        raise ConfigError("--max-samples must be positive")
    with trace_files_cap(max_files), record_sample_cap(max_samples):
        yield


@contextlib.contextmanager
def trace_files_cap(max_files: int) -> Iterator[None]:
    """Within the block at most `max_files` trace files are read (`--max-files`).

    Raises:
        ConfigError: a cap that is not positive.
    """
    if max_files <= 0:
        raise ConfigError("--max-files must be positive")
    with trace_file_cap(max_files):
        yield


@contextlib.contextmanager
def trace_cap_mb(max_decompressed_mb: int) -> Iterator[int]:
    """Within the block every trace read is capped at `max_decompressed_mb` MiB; yields the cap in bytes.

    Raises:
        ConfigError: a cap that is not positive.
    """
    if max_decompressed_mb <= 0:
        raise ConfigError("--max-decompressed-mb must be positive")
    with trace_size_cap(max_decompressed_mb << 20):
        yield max_decompressed_mb << 20
