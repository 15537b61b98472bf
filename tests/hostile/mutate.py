"""Hypothesis strategies that break real traces and records the way hostile or damaged files do.

A mutation picks places in a real document (an event's name, category, tid, ph, ts, dur, args; a
record's fields) and puts there a value of the wrong type, a missing key, NaN/Inf, a huge number, deep
nesting, control characters, lone surrogates or markup. The document is then written as JSON (NaN and
Infinity as the bare tokens Python and torch write; surrogates as \\ud800 escapes; deep nesting spliced
in as text, because building it as Python objects would hit the recursion limit in json.dumps).
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

# Spliced in place of a placeholder string: nesting no recursive JSON parser survives.
DEEP_PLACEHOLDER = "__bubblescope_fuzz_deep__"
HOSTILE_STRINGS = [
    "",
    "[/x]",
    "[bold red]x[/]",
    "[link=file:///etc/passwd]x[/link]",
    "\x1b]0;pwned\x07",
    "\x1b[2J\x1b[H",
    "\x9b31m",
    "\x07\x08\x0b\x0c\r",
    "a\nb\r\nc",
    "\ud800",
    "x\udfffy",
    "\u2028\u2029",
    "\ufeff",
    "<img src=x onerror=alert(1)>",
    "</script><script>alert(1)</script>",
    "<details><summary>x</summary>",
    "`code` *em* _u_ # h | a | b |",
    "&quot;&lt;",
    "../../../../etc/passwd",
    "%s%n{0}{}",
    "x" * 5000,
]
HUGE_NUMBERS = [10**30, -(10**30), 2**63, -(2**63) - 1, 10**400, 1e308, -1e308, 5e-324, -1, 0, -0.0]
SPECIAL_FLOATS = [float("nan"), float("inf"), float("-inf")]
# Keys of a trace event whose values the loader and detectors read.
EVENT_KEYS = ["name", "cat", "ph", "ts", "dur", "pid", "tid", "args", "id", "bp", "s"]
ARG_KEYS = ["stream", "correlation", "External id", "device", "Python id", "Python parent id", "Ev Idx"]

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(HUGE_NUMBERS + SPECIAL_FLOATS)
    | st.text(max_size=8)
    | st.sampled_from(HOSTILE_STRINGS)
)
# Scalars and containers where scalars belong, no deep nesting.
shallow_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=5,
)
# Everything: scalars, containers where scalars belong, and (rarely) nesting no parser survives.
values = st.recursive(
    # One leaf in 25 is the deep-nesting placeholder: often enough to hit every reader, rarely enough
    # that the other damage is not always masked by a refusal of the nesting.
    st.integers(0, 24).flatmap(lambda pick: st.just(DEEP_PLACEHOLDER) if pick == 0 else scalars),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=5,
)


class Mutated:
    """A mutated document and what was done to it (for the failure message and RESULTS counts).

    A plain class, not a dataclass: Hypothesis prints a failing dataclass field by field (the whole
    trace); this repr names only the changes.
    """

    def __init__(self, doc: Any, changes: list[str], deep_levels: int = 0) -> None:
        self.doc, self.changes, self.deep_levels = doc, changes, deep_levels

    def __repr__(self) -> str:
        return f"Mutated(changes={self.changes!r}, deep_levels={self.deep_levels})"


def _event_paths(trace: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [("traceEvents", index) for index in range(len(trace.get("traceEvents", [])))]


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value


@st.composite
def mutated_traces(
    draw: st.DrawFn,
    seeds: dict[str, dict[str, Any]],
    max_changes: int = 4,
    values: st.SearchStrategy[Any] = values,
) -> Mutated:
    """A seed trace with 1..max_changes events (or top-level keys) damaged with drawn `values`."""
    name = draw(st.sampled_from(sorted(seeds)), label="seed")
    trace = copy.deepcopy(seeds[name])
    out = Mutated(trace, [f"seed {name}"])
    events = _event_paths(trace)
    for _ in range(draw(st.integers(1, max_changes), label="changes")):
        kind = draw(st.sampled_from(["event_key", "event_arg", "drop_key", "event_whole", "top_level"]))
        if kind == "top_level":
            key = draw(
                st.sampled_from(["traceEvents", "deviceProperties", "schemaVersion", "displayTimeUnit"])
            )
            value = draw(values)
            trace[key] = value
            out.changes.append(f"top {key} = {value!r:.80}")
            if key == "traceEvents":
                events = []
            continue
        if not events:
            continue
        path = events[draw(st.integers(0, len(events) - 1), label="event")]
        event = trace["traceEvents"][path[1]]
        if kind == "event_whole":
            value = draw(values)
            _set(trace, path, value)
            out.changes.append(f"event {path[1]} = {value!r:.80}")
        elif not isinstance(event, dict):
            continue
        elif kind == "drop_key":
            key = draw(st.sampled_from(EVENT_KEYS))
            event.pop(key, None)
            out.changes.append(f"event {path[1]} without {key}")
        elif kind == "event_arg":
            args = event.get("args") if isinstance(event.get("args"), dict) else {}
            key = draw(st.sampled_from(ARG_KEYS + sorted(args)[:4]))
            value = draw(values)
            event["args"] = {**args, key: value}
            out.changes.append(f"event {path[1]} args.{key} = {value!r:.80}")
        else:
            key = draw(st.sampled_from(EVENT_KEYS))
            value = draw(values)
            event[key] = value
            out.changes.append(f"event {path[1]} {key} = {value!r:.80}")
    out.deep_levels = draw(st.sampled_from([1000, 5000, 100_000]), label="deep levels")
    return out


def _record_paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _record_paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node[:3]):
            found += _record_paths(value, (*prefix, index))
    return found


@st.composite
def mutated_records(
    draw: st.DrawFn, seed: dict[str, Any], max_changes: int = 3, values: st.SearchStrategy[Any] = values
) -> Mutated:
    """A RunRecord with 1..max_changes fields replaced by hostile values or removed."""
    record = copy.deepcopy(seed)
    out = Mutated(record, ["seed record"])
    for _ in range(draw(st.integers(1, max_changes), label="changes")):
        paths = _record_paths(record)
        path = paths[draw(st.integers(0, len(paths) - 1), label="path")]
        if draw(st.booleans(), label="remove"):
            parent = record
            for key in path[:-1]:
                parent = parent[key]
            if isinstance(parent, dict):
                parent.pop(path[-1], None)
                out.changes.append(f"removed {'.'.join(map(str, path))}")
                continue
        value = draw(values)
        _set(record, path, value)
        out.changes.append(f"{'.'.join(map(str, path))} = {value!r:.80}")
    out.deep_levels = draw(st.sampled_from([1000, 100_000]), label="deep levels")
    return out


def to_json_text(mutated: Mutated) -> str:
    """JSON text of the mutated document, deep nesting spliced in where the placeholder was drawn."""
    text = json.dumps(mutated.doc, allow_nan=True)
    placeholder = json.dumps(DEEP_PLACEHOLDER)
    if placeholder in text:
        text = text.replace(placeholder, "[" * mutated.deep_levels + "]" * mutated.deep_levels, 1)
        text = text.replace(placeholder, "1")
    return text


def write_document(mutated: Mutated, path: Path, gzipped: bool) -> Path:
    data = to_json_text(mutated).encode("utf-8")
    path.write_bytes(gzip.compress(data, compresslevel=1) if gzipped else data)
    return path


# Stands for a folder outside the ablation under test; replaced with a real path when written.
OUTSIDE = "__bubblescope_fuzz_outside__"
PATH_ATTACKS = [
    "../../escaped.json",
    "../escaped",
    f"{OUTSIDE}/planted.json",
    f"runs/../../{OUTSIDE}/x.json",
    "runs/./base.json",
    "runs/base.json/..",
    "",
    ".",
    "..",
    "runs",
    "a/b/c.json",
    "\x00.json",
    "runs/\ud800.json",
]


@st.composite
def mutated_ablations(draw: st.DrawFn, manifest: dict[str, Any], max_changes: int = 3) -> Mutated:
    """An ablation.json whose configuration keys, record paths, statuses or toggles are attacked."""
    doc = copy.deepcopy(manifest)
    out = Mutated(doc, ["seed report/ablation_3switch"])
    attack = st.sampled_from(PATH_ATTACKS) | values
    for _ in range(draw(st.integers(1, max_changes), label="changes")):
        target = draw(st.sampled_from(["key", "record", "status", "toggles", "order", "configs"]))
        if target in ("toggles", "order"):
            doc[target] = draw(st.lists(attack, max_size=3) | values)
            out.changes.append(f"{target} = {doc[target]!r:.80}")
        elif target == "configs":
            doc["configs"] = draw(values)
            out.changes.append(f"configs = {doc['configs']!r:.80}")
        elif isinstance(doc.get("configs"), list) and doc["configs"]:
            index = draw(st.integers(0, len(doc["configs"]) - 1))
            if isinstance(doc["configs"][index], dict):
                value = draw(st.just("done") | attack) if target == "status" else draw(attack)
                doc["configs"][index][target] = value
                out.changes.append(f"configs[{index}].{target} = {value!r:.80}")
    out.deep_levels = 1000
    return out


def write_ablation(mutated: Mutated, seed_dir: Path, root: Path, outside: Path) -> Path:
    """A copy of `seed_dir` at `root` with the mutated ablation.json (OUTSIDE -> `outside`)."""
    import shutil

    shutil.copytree(seed_dir, root)
    text = to_json_text(mutated).replace(OUTSIDE, str(outside).replace("\\", "\\\\"))
    (root / "ablation.json").write_text(text)
    return root
