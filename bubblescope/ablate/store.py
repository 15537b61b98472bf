"""An ablation on disk: `<dir>/runs/<key>.json` RunRecords and `<dir>/ablation.json`.

Resuming trusts only what validates: a record that is missing, truncated, of another schema or of
another configuration is measured again. Records measured with another workload, preset, workload
options (seed; spec, block, accept length, routing overlap, path of the reference workload) or step
settings are never mixed into one ablation: the directory is refused with a one-line error.

The folder is untrusted on resume: a process killed mid-write (kill -9, a preempted machine) leaves
hidden temporary files behind (uncompressed profiler traces can be GBs), which the next start
removes; a record that is a folder, a link out of the ablation or a non-regular file is moved aside
(or, for a link, dropped) and measured again; every file the manifest names must resolve inside
the ablation folder.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from bubblescope.ablate.plan import AblationPlan, config_key
from bubblescope.errors import RecordError
from bubblescope.files.atomic import write_json_atomic
from bubblescope.records.run_record import RunRecord, load_record
from bubblescope.records.validate import check_depth, check_safe_key, contained_path

ABLATION_SCHEMA = "bubblescope.ablation/1"
_IDENTITY_SETTINGS = ("steps", "warmup", "repeats", "profile_steps")
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
# Temporary files a killed process leaves: bubblescope.files.atomic's `.<name>.<random>.tmp` and
# capture.profiled's raw profiler export `.trace.<random>.json`.
_LEFTOVER = re.compile(r"\..+\.tmp|\.trace\..+\.json")
# Artifacts of one configuration beside its record (bubblescope.capture.measure names them).
_ARTIFACT_SUFFIXES = (".json", ".trace.json.gz", ".analysis.json", ".tp.analysis.json", ".html")


def _size_text(size_bytes: int) -> str:
    return f"{size_bytes / 1e6:.1f} MB" if size_bytes >= 100_000 else f"{size_bytes} bytes"


def remove_leftovers(folder: Path) -> list[str]:
    """Delete the temporary files an interrupted run left in `folder` (not below it); notices say what.

    Only regular files matching the temporary names bubblescope writes are touched; `ablate` holds the
    folder's writer lock (`out_lock`), so none of these can be in use by another process.
    """
    if not folder.is_dir():
        return []
    notices = []
    for entry in sorted(folder.iterdir()):
        if not _LEFTOVER.fullmatch(entry.name) or entry.is_symlink() or not entry.is_file():
            continue
        try:
            size = entry.stat().st_size
            entry.unlink()
        except OSError as exc:
            notices.append(f"could not remove the leftover {entry} ({exc.strerror or exc})")
            continue
        notices.append(f"removed {entry} ({_size_text(size)}), left by an interrupted run")
    return notices


def _clear_artifact(path: Path, root: Path) -> str | None:
    """Make room for re-measuring at `path`: a link is removed, a folder or special file moved aside.

    Returns a notice, or None when `path` is absent or a regular file inside `root` (overwritten
    atomically by the new measurement).
    """
    if not path.is_symlink() and not path.exists():
        return None
    if path.is_symlink():
        path.unlink()
        return f"removed the link {path} (a record's files must be regular files in the ablation)"
    if path.is_file() and path.resolve().is_relative_to(root.resolve()):
        return None
    aside = path.with_name(f"{path.name}.broken")
    index = 1
    while aside.exists() or aside.is_symlink():
        aside = path.with_name(f"{path.name}.broken{index}")
        index += 1
    path.rename(aside)
    return f"moved {path} (not a regular file) aside to {aside.name}"


class AblationStore:
    """The files of one ablation directory."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    @property
    def manifest_path(self) -> Path:
        return self.root / "ablation.json"

    def record_path(self, key: str) -> Path:
        return self.root / "runs" / f"{key}.json"

    def _matches(self, record: RunRecord, enabled: frozenset[str], identity: dict[str, Any]) -> bool:
        if frozenset(record["switches"].get("enabled", [])) != enabled:
            return False
        settings = record.get("settings", {})
        same_settings = all(settings.get(k) == identity["settings"].get(k) for k in _IDENTITY_SETTINGS)
        workload = record.get("workload", {})
        same_workload = (
            workload.get("factory") == identity["workload"].get("factory")
            and record.get("preset") == identity["preset"]
            and workload.get("options") == identity["workload"].get("options")
        )
        if not (same_settings and same_workload):
            raise RecordError(
                f"{self.root} holds runs of another workload, preset, workload options (seed, --spec, "
                f"--block, --accept-len, --routing-overlap, --path) or step settings "
                f"({self.record_path(config_key(enabled)).name}); use a new --out folder"
            )
        return True

    def load_done(
        self, plan: AblationPlan, identity: dict[str, Any]
    ) -> tuple[dict[str, RunRecord], list[str]]:
        """Records already measured for `plan`, and notices about files that will be measured again.

        Args:
            identity: {"workload": {...}, "preset": str|None, "settings": {...}} of this ablation.
        """
        runs = self.root / "runs"
        if runs.is_symlink() or (runs.exists() and not runs.is_dir()):
            raise RecordError(f"{runs} is not a folder of the ablation (a link or a file); use a new --out")
        done: dict[str, RunRecord] = {}
        # Rank folders of a tensor-parallel ablation (ablate --tp): rank 0 runs this before any rank writes.
        folders = [self.root, runs, *sorted(self.root.glob("rank[0-9]*/runs"))]
        notices = [notice for folder in folders for notice in remove_leftovers(folder)]
        for config in plan.configs:
            path = self.record_path(config.key)
            if not path.exists() and not path.is_symlink():
                continue
            try:
                contained_path(self.root, f"runs/{path.name}", what="record", source=str(path))
                if not path.is_file():
                    raise RecordError(f"{path} is not a regular file")
                record = load_record(path)
            except RecordError as exc:
                notices.append(f"re-measuring {config.key}: {exc}")
                notices += self._make_room(config.key)
                continue
            if self._matches(record, config.enabled, identity):
                done[config.key] = record
            else:
                notices.append(f"re-measuring {config.key}: its record is of another configuration")
        return done, notices

    def baseline_analysis(self, plan: AblationPlan, done: dict[str, RunRecord]) -> dict[str, Any] | None:
        """The baseline's full analysis/1 beside its record (for predictions), or None when absent."""
        key = plan.by_set()[frozenset()].key
        name = (done.get(key) or {}).get("analysis_file")
        if not isinstance(name, str) or "/" in name or "\\" in name or not name.endswith(".analysis.json"):
            return None
        path = self.root / "runs" / name
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_MANIFEST_BYTES:
            return None
        try:
            analysis = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        return analysis if isinstance(analysis, dict) else None

    def _make_room(self, key: str) -> list[str]:
        """Clear the way for re-measuring `key`: links and non-regular files at its artifact paths."""
        notices = []
        for suffix in _ARTIFACT_SUFFIXES:
            try:
                notice = _clear_artifact(self.root / "runs" / f"{key}{suffix}", self.root)
            except OSError as exc:
                raise RecordError(
                    f"{self.root}: cannot clear runs/{key}{suffix} to re-measure it ({exc.strerror or exc})"
                ) from None
            if notice:
                notices.append(notice)
        return notices

    def write_manifest(
        self,
        plan: AblationPlan,
        identity: dict[str, Any],
        done: dict[str, RunRecord],
        attribution: dict[str, Any] | None,
    ) -> Path:
        """Rewrite `ablation.json` atomically with every config's status."""
        manifest = {
            "schema": ABLATION_SCHEMA,
            "workload": identity["workload"],
            "preset": identity["preset"],
            "settings": identity["settings"],
            "toggles": plan.toggles,
            "order": plan.order,
            "shapley_method": plan.shapley_method,
            "permutations": [list(p) for p in plan.permutations],
            "configs": [
                {
                    "key": c.key,
                    "enabled": sorted(c.enabled),
                    "roles": c.roles,
                    "record": f"runs/{c.key}.json",
                    "status": "done" if c.key in done else "pending",
                }
                for c in plan.configs
            ],
            "attribution": attribution,
        }
        return write_json_atomic(self.manifest_path, manifest)


def _read_manifest(manifest_path: Path) -> dict[str, Any]:
    if manifest_path.stat().st_size > MAX_MANIFEST_BYTES:
        raise RecordError(f"{manifest_path}: larger than {MAX_MANIFEST_BYTES >> 20} MiB; not an ablation")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RecordError(f"{manifest_path}: not valid JSON ({type(exc).__name__})") from None
    except RecursionError:
        raise RecordError(f"{manifest_path}: JSON nested too deeply to be an ablation") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != ABLATION_SCHEMA:
        raise RecordError(f"{manifest_path}: schema is not {ABLATION_SCHEMA!r}")
    check_depth(manifest, str(manifest_path))
    configs = manifest.get("configs", [])
    if not isinstance(configs, list) or not all(isinstance(c, dict) for c in configs):
        raise RecordError(f"{manifest_path}: 'configs' must be a list of objects")
    for field in ("toggles", "order"):
        names = manifest.get(field)
        if names is not None and not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
            raise RecordError(f"{manifest_path}: {field!r} must be a list of switch names")
    return manifest


def load_ablation(root: str | Path) -> tuple[dict[str, Any], dict[str, RunRecord]]:
    """Read `ablation.json` and the records it lists as done (for reports and --reanalyze).

    Every configuration key must be a plain file name and every record the manifest names must
    resolve inside `root`, since --reanalyze rewrites what it reads.
    """
    manifest_path = Path(root) / "ablation.json"
    if not manifest_path.is_file():
        raise RecordError(f"no ablation.json in {root}")
    manifest = _read_manifest(manifest_path)
    records = {}
    for config in manifest.get("configs", []):
        if config.get("status") != "done":
            continue
        key = check_safe_key(config.get("key"), str(manifest_path))
        relative = config.get("record", f"runs/{key}.json")
        path = contained_path(root, relative, what=f"record of {key}", source=str(manifest_path))
        if path.resolve() != AblationStore(root).record_path(key).resolve():
            raise RecordError(
                f"{manifest_path}: the record of {key} must be runs/{key}.json, not {relative!r}"
            )
        records[key] = load_record(path)
    return manifest, records
