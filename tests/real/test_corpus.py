"""The corpus itself: manifest, expected answers and `tools/fetch_real_traces.py` (no trace files needed)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.real.conftest import MANIFEST, REAL_DATA, REPO_ROOT, case_names, expected, manifest
from tests.real.known_failures import KNOWN_FAILURES

GAP_CLASSES = {"sync", "host", "launch", "dependency", "outside", "unknown"}


def _fetch_module():
    spec = importlib.util.spec_from_file_location(
        "fetch_real_traces", REPO_ROOT / "tools" / "fetch_real_traces.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_corpus_spans_four_repositories_ten_traces_and_both_vendors() -> None:
    traces = manifest()
    assert len(traces) >= 10
    assert len({t["repo"] for t in traces.values()}) >= 4
    used = {name for case in case_names() for name in expected(case)["files"]}
    assert used == set(traces), (
        f"manifest entries without a case or cases without a manifest entry: {used ^ set(traces)}"
    )
    rocm = [
        c
        for c in case_names()
        if any("hip" in a for r in expected(c)["reads"].get("expected", []) for a in r["apis"])
    ]
    assert len(rocm) >= 4, "ROCm cases with expected HIP reads"


@pytest.mark.parametrize("case", case_names())
def test_every_claim_says_why(case: str) -> None:
    answer = expected(case)
    assert answer["what"] and answer["steps"]["why"]
    reads = answer["reads"]
    listed = reads.get("expected", []) + reads.get("per_rank", []) + reads.get("tolerated", [])
    for entry in listed + reads.get("own_syncs", []):
        assert entry["why"] and entry["apis"] and entry["count"] > 0
    for gap in answer["gaps"]:
        assert gap["why"] and gap["interval_us"][0] < gap["interval_us"][1]
        assert {gap["class"]} - {None} | set(gap["not_class"]) <= GAP_CLASSES
        assert gap["class"] not in gap["not_class"]
    for bound in answer["bubbles"]:
        assert bound["why"] and bound["max_bubble_us"] >= 0


def test_known_failures_name_existing_cases() -> None:
    cases = set(case_names())
    assert {claim.split("::")[0] for claim in KNOWN_FAILURES} <= cases


@pytest.fixture
def source_repo(tmp_path: Path) -> tuple[Path, str, bytes]:
    """A git repository with one committed 'trace': (git dir, commit, file bytes)."""
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    work = tmp_path / "src"
    (work / "data").mkdir(parents=True)
    content = b'{"traceEvents": []}'
    (work / "data" / "t.json").write_bytes(content)
    env = ["-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    subprocess.run(["git", "-C", str(work), "add", "."], check=True)
    subprocess.run(["git", "-C", str(work), *env, "commit", "-qm", "t"], check=True)
    commit = subprocess.run(
        ["git", "-C", str(work), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    return work / ".git", commit, content


def _write_manifest(path: Path, commit: str, sha256: str) -> Path:
    entry = {
        "name": "t",
        "repo": "o/r",
        "commit": commit,
        "path": "data/t.json",
        "licence": "MIT",
        "sha256": sha256,
        "bytes": 0,
        "events": 0,
    }
    path.write_text(json.dumps({"schema": "bubblescope.real_traces/1", "traces": [entry]}))
    return path


def test_fetch_takes_the_file_from_a_local_clone_and_checks_its_sha256(source_repo, tmp_path: Path) -> None:
    git_dir, commit, content = source_repo
    fetch = _fetch_module()
    good = _write_manifest(tmp_path / "good.json", commit, hashlib.sha256(content).hexdigest())
    dest = tmp_path / "dest"
    assert fetch.main(["--manifest", str(good), "--dest", str(dest), "--git-dir", f"o/r={git_dir}"]) == 0
    assert (dest / "t.json.gz").read_bytes() == content
    # Already there: nothing to fetch, still success without any source.
    assert fetch.main(["--manifest", str(good), "--dest", str(dest)]) == 0
    bad = _write_manifest(tmp_path / "bad.json", commit, "0" * 64)
    assert (
        fetch.main(["--manifest", str(bad), "--dest", str(tmp_path / "d2"), "--git-dir", f"o/r={git_dir}"])
        == 1
    )
    assert not (tmp_path / "d2" / "t.json.gz").exists()


def test_fetch_rejects_bad_arguments_with_exit_2(tmp_path: Path, capsys) -> None:
    fetch = _fetch_module()
    assert fetch.main(["--git-dir", "no-equals-sign"]) == 2
    (tmp_path / "m.json").write_text('{"schema": "other/1"}')
    assert fetch.main(["--manifest", str(tmp_path / "m.json")]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 2 and all(line.startswith("error: ") for line in errors)


def test_manifest_is_the_one_the_tool_reads() -> None:
    assert _fetch_module().MANIFEST == MANIFEST
    assert (REAL_DATA / "README.md").is_file()


def _answer(**reads) -> dict:
    return {"reads": {"expected": [], "tolerated": [], **reads}}


def test_exclusive_check_allows_listed_tolerated_and_implicit_reads_only() -> None:
    from tests.real.test_real_traces import _check_reads_exclusive

    answer = _answer(
        expected=[{"op": "aten::item", "apis": ["hipMemcpyWithStream"], "count": 1}],
        tolerated=[{"op": "", "apis": ["hipDeviceSynchronize"], "count": 1}],
        implicit=[{"apis": ["hipFree"]}],
    )
    syncs = [
        {"op": "aten::item", "api": "hipMemcpyWithStream", "count": 1, "bubble_ns": 0},
        {"op": "", "api": "hipDeviceSynchronize", "count": 1, "bubble_ns": 0},
        {"op": "aten::conv2d", "api": "hipFree", "count": 9, "bubble_ns": 0},
    ]
    _check_reads_exclusive({"syncs": syncs}, answer)
    with pytest.raises(AssertionError, match="aten::to"):
        _check_reads_exclusive({"syncs": [*syncs, {**syncs[0], "op": "aten::to"}]}, answer)


def test_gap_check_takes_the_class_covering_most_of_the_interval() -> None:
    from decimal import Decimal

    from tests.real.test_real_traces import _check_gap_blame, _check_gap_class

    # Expected interval [1000, 2000] us absolute; origin 500 us: pieces at relative 500-1300 and 1300-1500 us.
    gaps_top = [
        {
            "rank": 0,
            "start_ns": 500_000,
            "dur_ns": 800_000,
            "class": "dependency",
            "blame": "stream 3 waited",
        },
        {"rank": 0, "start_ns": 1_300_000, "dur_ns": 200_000, "class": "host", "blame": "aten::addmm"},
        {"rank": 1, "start_ns": 500_000, "dur_ns": 1_000_000, "class": "sync", "blame": "other rank"},
    ]
    gap = {
        "rank": 0,
        "interval_us": [Decimal(1000), Decimal(2000)],
        "class": "dependency",
        "not_class": ["host"],
        "blame_any": ["stream"],
        "why": "test",
    }
    result = {"gaps_top": gaps_top}
    _check_gap_class(result, [500_000, 0], gap)
    _check_gap_blame(result, [500_000, 0], gap)
    with pytest.raises(AssertionError, match="dominant class dependency"):
        _check_gap_class(result, [500_000, 0], {**gap, "class": "host"})
    with pytest.raises(AssertionError, match="no gap in gaps_top"):
        _check_gap_class(result, [5_000_000, 0], gap)
    with pytest.raises(AssertionError, match="names none"):
        _check_gap_blame(result, [500_000, 0], {**gap, "blame_any": ["hipFree"]})
