"""Issue 18 §9: an ablation folder after kill -9 or damage resumes: leftovers removed (and named),
corrupt records measured again with a notice, never a traceback."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bubblescope.ablate.plan import plan_ablation
from bubblescope.ablate.runner import run_ablation
from bubblescope.ablate.store import AblationStore, remove_leftovers
from bubblescope.capture.measure import RunSettings
from bubblescope.examples.toy_workload import make_workload
from tests.hostile.seeds import seed_record

SETTINGS = RunSettings(steps=3, warmup=1, repeats=2, profile_steps=1)
INFO = {"name": "toy", "factory": "bubblescope.examples.toy_workload:make_workload", "preset": "tiny"}
REPO_ROOT = Path(__file__).resolve().parents[2]

# A child that writes with bubblescope's own atomic writer and is killed with SIGKILL inside fsync,
# after the temporary file has its bytes and before the rename: what kill -9 mid-write leaves.
_KILLED_WRITER = textwrap.dedent(
    """
    import os, sys, time
    from bubblescope.files import atomic
    def stall(fd):
        print("writing", flush=True)
        time.sleep(600)
    atomic.os.fsync = stall
    atomic.write_bytes_atomic(sys.argv[1], b"x" * 300_000)
    """
)


def _kill_minus_nine_during_write(target: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_WRITER, str(target)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == b"writing"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)


def test_kill_minus_nine_leftovers_are_removed_on_the_next_start(tmp_path: Path) -> None:
    store = AblationStore(tmp_path / "abl")
    runs = store.root / "runs"
    runs.mkdir(parents=True)
    _kill_minus_nine_during_write(runs / "base.json")
    _kill_minus_nine_during_write(store.manifest_path)
    # capture.profiled exports the raw trace as `.trace.<random>.json` before gzipping it.
    (runs / ".trace.k2j4h1.json").write_bytes(b"{" * 1000)
    keep = [runs / "notes.txt", runs / "base.tmp", store.root / ".gitignore"]
    for path in keep:
        path.write_text("mine")
    leftovers = sorted(
        p.name
        for p in [*runs.iterdir(), *store.root.iterdir()]
        if p.name.endswith((".tmp", ".json")) and p.name.startswith(".")
    )
    assert len(leftovers) == 3, leftovers

    done, notices = store.load_done(
        plan_ablation(["no_readback"]), {"workload": {}, "preset": None, "settings": {}}
    )
    assert done == {}
    removed = [n for n in notices if n.startswith("removed ")]
    assert len(removed) == 3, notices
    assert any("300000 bytes" in n or "0.3 MB" in n for n in removed), removed
    assert all("left by an interrupted run" in n for n in removed)
    assert not [p for p in runs.iterdir() if p.name.startswith(".")]
    assert all(path.read_text() == "mine" for path in keep), "only bubblescope's temporary names are removed"


def test_leftover_links_and_folders_are_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    (tmp_path / "abl").mkdir()
    (tmp_path / "abl" / ".x.json.abc.tmp").symlink_to(outside)
    (tmp_path / "abl" / ".y.json.abc.tmp").mkdir()
    assert remove_leftovers(tmp_path / "abl") == []
    assert outside.read_text() == "keep"


def _deep(levels: int) -> str:
    return "[" * levels + "]" * levels


CORRUPT = {
    "nested 100k deep": lambda path: path.write_text(_deep(100_000)),
    "nested inside a field": lambda path: path.write_text(
        json.dumps({**seed_record(), "analysis": "DEEP"}).replace('"DEEP"', _deep(100_000))
    ),
    "wrong types": lambda path: path.write_text(
        json.dumps({**seed_record(), "samples_ns": "fast", "switches": {"enabled": [{"a": 1}]}})
    ),
    "null everywhere": lambda path: path.write_text(json.dumps({k: None for k in seed_record()})),
    "a directory": lambda path: (path.mkdir(), (path / "record.json").write_text("{}")),
    "a FIFO": lambda path: os.mkfifo(path),
    "a link to /dev/zero": lambda path: path.symlink_to("/dev/zero"),
    "a link out of the folder": lambda path: path.symlink_to(path.parents[3] / "elsewhere.json"),
    "binary": lambda path: path.write_bytes(b"\xff\xfe\x00" * 100),
    "empty": lambda path: path.write_bytes(b""),
}


@pytest.mark.parametrize("damage", sorted(CORRUPT))
def test_a_corrupt_record_is_reported_and_cleared_for_re_measuring(tmp_path: Path, damage: str) -> None:
    (tmp_path / "elsewhere.json").write_text(json.dumps(seed_record()))
    store = AblationStore(tmp_path / "a" / "abl")
    path = store.record_path("base")
    path.parent.mkdir(parents=True)
    CORRUPT[damage](path)
    done, notices = store.load_done(
        plan_ablation(["no_readback"]), {"workload": {}, "preset": None, "settings": {}}
    )
    assert "base" not in done
    assert any(n.startswith("re-measuring base: ") for n in notices), notices
    assert all("\n" not in n for n in notices)
    # The writer's atomic rename can now put a record there.
    assert not path.is_symlink() and (not path.exists() or path.is_file())
    assert (tmp_path / "elsewhere.json").is_file(), "a link's target is never touched"


def test_resume_measures_a_corrupt_record_again_end_to_end(tmp_path: Path) -> None:
    plan = plan_ablation(["no_readback"])
    store = AblationStore(tmp_path / "abl")
    run_ablation(make_workload("tiny"), plan, store, settings=SETTINGS, workload_info=INFO, bandwidth=None)
    kept = store.record_path("no_readback").read_bytes()
    base = store.record_path("base")
    base.unlink()
    base.mkdir()
    (store.root / "runs" / "base.trace.json.gz").unlink()
    (store.root / "runs" / "base.trace.json.gz").mkdir()
    _kill_minus_nine_during_write(store.root / "runs" / "base.analysis.json")
    attribution, records, notices = run_ablation(
        make_workload("tiny"), plan, store, settings=SETTINGS, workload_info=INFO, bandwidth=None
    )
    assert attribution is not None and set(records) == {"base", "no_readback"}
    assert base.is_file() and store.record_path("no_readback").read_bytes() == kept
    assert any("moved" in n and "base.json.broken" in n for n in notices), notices
    assert any("base.trace.json.gz.broken" in n for n in notices), notices
    assert any(n.startswith("removed ") and ".base.analysis.json." in n for n in notices), notices


def test_runs_folder_that_is_a_link_is_refused(tmp_path: Path) -> None:
    from bubblescope.errors import RecordError

    (tmp_path / "target").mkdir()
    (tmp_path / "abl").mkdir()
    (tmp_path / "abl" / "runs").symlink_to(tmp_path / "target")
    with pytest.raises(RecordError, match="not a folder of the ablation"):
        AblationStore(tmp_path / "abl").load_done(plan_ablation(["no_readback"]), {})
