"""The fuzzer: damaged real traces and records through `analyze`, `report` and `gate`, end to end.

Contract asserted on every input: exit code 0 or 2; on 2 exactly one stderr line; never a traceback;
at most MAX_SECONDS and MAX_PEAK_RSS_MB (cli_runner.py). The fast profile (default run) is
derandomized, so it tries the same few inputs every time and takes seconds; the long profile
(`pytest -m slow tests/hostile`) tries many more, counts outcomes and writes them to
$BUBBLESCOPE_FUZZ_SUMMARY (JSON) when that is set, for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import copy
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from tests.hostile.cli_runner import Outcome, run_in_process, run_subprocess
from tests.hostile.mutate import (
    DEEP_PLACEHOLDER,
    Mutated,
    mutated_ablations,
    mutated_records,
    mutated_traces,
    scalars,
    shallow_values,
    write_ablation,
    write_document,
)
from tests.hostile.seeds import REAL_RECORD, real_record, seed_record, seed_traces

FAST_TRACES = seed_traces(fast=True)
RECORD = real_record()
# The default run's values: scalars (wrong types, NaN/Inf, huge numbers, control characters,
# surrogates, markup), a list or object where a scalar belongs, and nesting deeper than any parser allows
# (1000, 5000 or 100 000 levels), each drawn a third of the time so the few derandomized inputs meet all
# three. (Before the second round of issue 18 fixes, containers and deep nesting were the long profile's
# only: they crashed the loader, gate's CPU-trace reader and report's JSON reader.)
_CONTAINERS = st.lists(shallow_values, max_size=3) | st.dictionaries(
    st.text(max_size=5), shallow_values, max_size=3
)
FAST_TRACE_VALUES = st.one_of(scalars, _CONTAINERS, st.just(DEEP_PLACEHOLDER))
FAST_RECORD_VALUES = FAST_TRACE_VALUES
# What a trace goes through: the three commands that read traces, in the formats users pick.
TRACE_COMMANDS = [
    ["analyze", "{t}", "--format", "json"],
    ["analyze", "{t}", "--format", "markdown"],
    ["analyze", "{t}"],
    ["report", "{t}", "--format", "markdown"],
    ["gate", "--baseline", "{t}", "--current", "{t}", "--format", "json"],
]
RECORD_COMMANDS = [
    ["gate", "--baseline", str(REAL_RECORD), "--current", "{t}", "--format", "json"],
    ["gate", "--baseline", "{t}", "--current", str(REAL_RECORD), "--format", "markdown"],
    ["report", "{t}", "--format", "markdown"],
]
# Gate's exit code 1 is a verdict (regression found), not a failure of the tool.
GATE_VERDICT_CODES = (0, 1, 2)
FAST = settings(
    max_examples=int(os.environ.get("BUBBLESCOPE_FUZZ_FAST_EXAMPLES", "8")),
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)


def _run(command: list[str], path: Path, subprocess: bool = False) -> Outcome:
    args = [part.replace("{t}", str(path)) for part in command]
    return run_subprocess(args) if subprocess else run_in_process(args)


def _judge(outcome: Outcome, mutated: Mutated) -> list[str]:
    problems = outcome.problems()
    if outcome.args[0] == "gate" and outcome.exit_code == 1 and not outcome.crash:
        problems = [p for p in problems if not p.startswith("exit code")]
    return problems


def _describe(outcome: Outcome, mutated: Mutated, problems: list[str]) -> str:
    return f"{' '.join(outcome.args)[:200]}\n  changes: {mutated.changes}\n  problems: {problems}"


def _fuzz_trace(
    tmp_dir: Path, mutated: Mutated, command: list[str], gzipped: bool, subprocess: bool = False
) -> tuple[Outcome, list[str]]:
    path = write_document(mutated, tmp_dir / ("trace.json.gz" if gzipped else "trace.json"), gzipped)
    outcome = _run(command, path, subprocess)
    return outcome, _judge(outcome, mutated)


def _fuzz_record(
    tmp_dir: Path, mutated: Mutated, command: list[str], subprocess: bool = False
) -> tuple[Outcome, list[str]]:
    path = write_document(mutated, tmp_dir / "record.json", gzipped=False)
    outcome = _run(command, path, subprocess)
    return outcome, _judge(outcome, mutated)


def _damaged(seed: dict[str, Any], name: str, changes: dict[tuple[str, str], Any], levels: int) -> Mutated:
    """`seed` with, for each (category, key) -> value of `changes`, that key of the first complete event
    of that category set to value (an explicit example of the fast profile)."""
    doc = copy.deepcopy(seed)
    done = [f"seed {name}"]
    for (cat, key), value in changes.items():
        event = next(e for e in doc["traceEvents"] if e.get("ph") == "X" and e.get("cat") == cat)
        event[key] = value
        done.append(f"first {cat} {key} = {value!r:.40}")
    return Mutated(doc, done, levels)


# Explicit inputs the fast profile always tries, whatever Hypothesis draws: each class of damage that
# crashed a reader in the long run of 2026-12-01 (benchmarks/RESULTS.md), through the command it crashed.
FAST_TRACE_EXAMPLES = [
    (_damaged(FAST_TRACES["h200_2steps"], "h200_2steps", {("kernel", "name"): DEEP_PLACEHOLDER}, 100_000), 0),
    (
        _damaged(
            FAST_TRACES["cpu_2steps"], "cpu_2steps", {("python_function", "ts"): DEEP_PLACEHOLDER}, 5000
        ),
        4,
    ),
    (
        _damaged(
            FAST_TRACES["cpu_2steps"],
            "cpu_2steps",
            {
                ("cpu_op", "cat"): ["cpu_op"],
                ("user_annotation", "name"): {"a": 1},
                ("python_function", "ts"): [1],
            },
            0,
        ),
        4,
    ),
    (
        _damaged(
            FAST_TRACES["h200_2steps"], "h200_2steps", {("kernel", "tid"): [7], ("cpu_op", "cat"): {}}, 0
        ),
        3,
    ),
]


@FAST
@example(mutated=FAST_TRACE_EXAMPLES[0][0], command=TRACE_COMMANDS[FAST_TRACE_EXAMPLES[0][1]], gzipped=False)
@example(mutated=FAST_TRACE_EXAMPLES[1][0], command=TRACE_COMMANDS[FAST_TRACE_EXAMPLES[1][1]], gzipped=True)
@example(mutated=FAST_TRACE_EXAMPLES[2][0], command=TRACE_COMMANDS[FAST_TRACE_EXAMPLES[2][1]], gzipped=False)
@example(mutated=FAST_TRACE_EXAMPLES[3][0], command=TRACE_COMMANDS[FAST_TRACE_EXAMPLES[3][1]], gzipped=False)
@given(
    mutated=mutated_traces(FAST_TRACES, values=FAST_TRACE_VALUES),
    command=st.sampled_from(TRACE_COMMANDS),
    gzipped=st.booleans(),
)
def test_fast_mutated_traces_exit_cleanly(
    tmp_path_factory: pytest.TempPathFactory, mutated: Mutated, command: list[str], gzipped: bool
) -> None:
    outcome, problems = _fuzz_trace(tmp_path_factory.mktemp("fuzz"), mutated, command, gzipped)
    assert not problems, _describe(outcome, mutated, problems)


def _record_with(path: tuple[str, ...], value: Any, levels: int) -> Mutated:
    record = copy.deepcopy(RECORD)
    parent = record
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    return Mutated(record, ["seed record", f"{'.'.join(path)} = {value!r:.40}"], levels)


@FAST
# report's JSON reader recursed on this (RecursionError); the gate's on a container in a count.
@example(
    mutated=_record_with(("environment", "torch"), DEEP_PLACEHOLDER, 100_000), command=RECORD_COMMANDS[2]
)
@example(mutated=_record_with(("analysis", "syncs"), {"a": [1]}, 0), command=RECORD_COMMANDS[0])
@given(mutated=mutated_records(RECORD, values=FAST_RECORD_VALUES), command=st.sampled_from(RECORD_COMMANDS))
def test_fast_mutated_records_exit_cleanly(
    tmp_path_factory: pytest.TempPathFactory, mutated: Mutated, command: list[str]
) -> None:
    outcome, problems = _fuzz_record(tmp_path_factory.mktemp("fuzz"), mutated, command)
    assert not problems, _describe(outcome, mutated, problems)


ABLATION_DIR = Path(__file__).resolve().parents[1] / "data" / "report" / "ablation_3switch"
ABLATION_COMMANDS = [
    ["report", "{t}", "--format", "markdown"],
    ["ablate", "--reanalyze", "--out", "{t}", "--format", "json"],
]


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _fuzz_ablation(tmp_dir: Path, mutated: Mutated, command: list[str]) -> tuple[Outcome, list[str]]:
    """A damaged ablation folder through report / ablate --reanalyze; nothing may change outside it."""
    sandbox = tmp_dir / f"sandbox{len(list(tmp_dir.glob('sandbox*')))}"
    outside = sandbox / "outside"
    outside.mkdir(parents=True)
    (outside / "planted.json").write_text(json.dumps(seed_record()))
    root = write_ablation(mutated, ABLATION_DIR, sandbox / "work" / "abl", outside)
    before = {k: v for k, v in _snapshot(sandbox).items() if not k.startswith("work/abl/")}
    outcome = _run(command, root)
    after = {k: v for k, v in _snapshot(sandbox).items() if not k.startswith("work/abl/")}
    problems = _judge(outcome, mutated)
    if after != before:
        changed = sorted(set(after) ^ set(before) | {k for k in before if after.get(k) != before[k]})
        problems.append(f"wrote outside the ablation folder: {changed[:5]}")
    return outcome, problems


MANIFEST = json.loads((ABLATION_DIR / "ablation.json").read_text())


@FAST
@given(mutated=mutated_ablations(MANIFEST), command=st.sampled_from(ABLATION_COMMANDS))
def test_fast_damaged_ablation_folders_stay_inside(
    tmp_path_factory: pytest.TempPathFactory, mutated: Mutated, command: list[str]
) -> None:
    outcome, problems = _fuzz_ablation(tmp_path_factory.mktemp("fuzz"), mutated, command)
    assert not problems, _describe(outcome, mutated, problems)


class _Tally:
    """Counts of the long profile: inputs tried, outcomes, crashes, hangs, time and peak memory."""

    def __init__(self) -> None:
        self.tried = 0
        self.in_subprocess = 0
        self.exit_codes: Counter[str] = Counter()
        self.findings: list[dict[str, Any]] = []
        self.max_seconds = 0.0
        self.max_rss_mb = {"in_process": 0.0, "subprocess": 0.0}

    def next_is_subprocess(self) -> bool:
        """Every SUBPROCESS_EVERY-th input runs as `python -m bubblescope` (real exit status, own RSS)."""
        return self.tried % SUBPROCESS_EVERY == SUBPROCESS_EVERY - 1

    def add(self, outcome: Outcome, mutated: Mutated, problems: list[str], subprocess: bool) -> None:
        self.tried += 1
        self.in_subprocess += subprocess
        self.exit_codes[str(outcome.exit_code)] += 1
        self.max_seconds = max(self.max_seconds, outcome.seconds)
        where = "subprocess" if subprocess else "in_process"
        self.max_rss_mb[where] = max(self.max_rss_mb[where], outcome.peak_rss_mb or 0.0)
        if problems:
            self.findings.append(
                {
                    "command": outcome.args[0],
                    "args": " ".join(outcome.args)[:200],
                    "changes": mutated.changes,
                    "problems": problems,
                    "stderr": outcome.stderr[-400:],
                }
            )

    def summary(self) -> dict[str, Any]:
        kinds = Counter(p.split(":")[0] for f in self.findings for p in f["problems"])
        return {
            "inputs_tried": self.tried,
            "run_as_subprocess": self.in_subprocess,
            "exit_codes": dict(self.exit_codes),
            "inputs_with_problems": len(self.findings),
            "problem_kinds": dict(kinds),
            "max_seconds": round(self.max_seconds, 2),
            "max_peak_rss_mb": {k: round(v, 1) for k, v in self.max_rss_mb.items()},
            "findings": self.findings,
        }


LONG_EXAMPLES = int(os.environ.get("BUBBLESCOPE_FUZZ_LONG_EXAMPLES", "300"))
SUBPROCESS_EVERY = 10
LONG = settings(
    max_examples=LONG_EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@pytest.mark.slow
def test_long_profile(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Many damaged inputs, whole real traces too; fails listing every input that broke the contract."""
    # The default `pytest -q` selects no marker and so would run this too: it runs only when asked
    # for (`-m slow`) or with BUBBLESCOPE_FUZZ_LONG set.
    if "slow" not in (request.config.getoption("markexpr") or "") and not os.environ.get(
        "BUBBLESCOPE_FUZZ_LONG"
    ):
        pytest.skip("long fuzz profile: run with -m slow")
    tally = _Tally()
    traces = seed_traces(fast=False)

    @LONG
    @given(
        mutated=mutated_traces(traces, max_changes=6),
        command=st.sampled_from(TRACE_COMMANDS),
        gzipped=st.booleans(),
    )
    def traces_case(mutated: Mutated, command: list[str], gzipped: bool) -> None:
        subprocess = tally.next_is_subprocess()
        outcome, problems = _fuzz_trace(tmp_path, mutated, command, gzipped, subprocess)
        tally.add(outcome, mutated, problems, subprocess)

    @settings(LONG, max_examples=max(1, LONG_EXAMPLES // 2))
    @given(mutated=mutated_records(RECORD, max_changes=4), command=st.sampled_from(RECORD_COMMANDS))
    def records_case(mutated: Mutated, command: list[str]) -> None:
        subprocess = tally.next_is_subprocess()
        outcome, problems = _fuzz_record(tmp_path, mutated, command, subprocess)
        tally.add(outcome, mutated, problems, subprocess)

    @settings(LONG, max_examples=max(1, LONG_EXAMPLES // 4))
    @given(mutated=mutated_ablations(MANIFEST, max_changes=4), command=st.sampled_from(ABLATION_COMMANDS))
    def ablations_case(mutated: Mutated, command: list[str]) -> None:
        outcome, problems = _fuzz_ablation(tmp_path, mutated, command)
        tally.add(outcome, mutated, problems, False)

    traces_case()
    records_case()
    ablations_case()
    summary = tally.summary()
    if os.environ.get("BUBBLESCOPE_FUZZ_SUMMARY"):
        Path(os.environ["BUBBLESCOPE_FUZZ_SUMMARY"]).write_text(json.dumps(summary, indent=1))
    assert not summary["findings"], json.dumps(summary, indent=1)[:6000]
