"""The fast inflate (ISA-L, `source.INFLATE`) gives the stdlib zlib's bytes and zlib's refusals."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

import pytest

from bubblescope.errors import TraceError
from bubblescope.trace import source

isal_zlib = pytest.importorskip("isal.isal_zlib")


def _text(path: Path, inflate, monkeypatch: pytest.MonkeyPatch) -> bytes:
    monkeypatch.setattr(source, "INFLATE", inflate)
    return b"".join(source.text_blocks(path))


def test_isal_is_the_inflate_in_use() -> None:
    assert source.INFLATE is isal_zlib


def _same_text(folder: Path, names: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    traces = sorted(p for p in folder.glob("*.json.gz") if not names or p.name.split(".")[0] in names)
    assert traces and (not names or len(traces) == len(names))
    for path in traces:
        assert _text(path, isal_zlib, monkeypatch) == _text(path, zlib, monkeypatch), path.name


def test_real_traces_inflate_to_zlibs_bytes(shared_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Two small ones from different writers (HTA's A100 sample, Kineto's 2021 ResNet-50).
    names = ["hta_a100_sampled_rank0", "kineto_resnet50_v100_2021"]
    _same_text(shared_dir / "data" / "real_traces", names, monkeypatch)


@pytest.mark.slow
def test_whole_real_corpus_inflates_to_zlibs_bytes(shared_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 12 MB of gzip, ~150 MB of text.
    _same_text(shared_dir / "data" / "real_traces", [], monkeypatch)


def test_several_members_and_block_cuts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Three members (`cat a.gz b.gz c.gz`), one larger than a block, so `max_length` cuts the output.
    parts = [b'{"traceEvents": [' + b'{"ph": "i"},' * (source.BLOCK_BYTES // 6), b'{"ph": "i"}', b"]}"]
    path = tmp_path / "members.json.gz"
    path.write_bytes(b"".join(gzip.compress(part, compresslevel=1) for part in parts))
    assert _text(path, isal_zlib, monkeypatch) == b"".join(parts) == _text(path, zlib, monkeypatch)


@pytest.mark.parametrize("inflate", [isal_zlib, zlib], ids=["isal", "zlib"])
def test_corrupt_truncated_and_bad_checksum_refused_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, inflate: object
) -> None:
    corrupt = tmp_path / "bad.json.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08\x00" + b"\xff" * 64)
    data = gzip.compress(b'{"traceEvents": [{"ph": "i"}]}' * 50)
    truncated = tmp_path / "cut.json.gz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(TraceError, match="corrupt gzip data"):
        _text(corrupt, inflate, monkeypatch)
    with pytest.raises(TraceError, match="truncated gzip"):
        _text(truncated, inflate, monkeypatch)
    # A damaged CRC-32 in the gzip trailer: the inflated bytes are not the ones written.
    bad_check = tmp_path / "crc.json.gz"
    bad_check.write_bytes(data[:-8] + bytes([data[-8] ^ 0xFF]) + data[-7:])
    with pytest.raises(TraceError, match="corrupt gzip data"):
        _text(bad_check, inflate, monkeypatch)
