"""An ablation on disk: `<dir>/runs/<key>.json` RunRecords and `<dir>/ablation.json`.

Resuming trusts only what validates: a record that is missing, truncated, of another schema or of
another configuration is measured again. Records measured with another workload, preset, workload
options (seed; spec, block, accept length, routing overlap, path of the reference workload) or step
settings are never mixed into one ablation: the directory is refused with a one-line error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bubblescope.ablate.plan import AblationPlan, config_key
from bubblescope.atomic import write_json_atomic
from bubblescope.errors import RecordError
from bubblescope.records import RunRecord, load_record

ABLATION_SCHEMA = "bubblescope.ablation/1"
_IDENTITY_SETTINGS = ("steps", "warmup", "repeats", "profile_steps")


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
        done: dict[str, RunRecord] = {}
        notices: list[str] = []
        for config in plan.configs:
            path = self.record_path(config.key)
            if not path.exists():
                continue
            try:
                record = load_record(path)
            except RecordError as exc:
                notices.append(f"re-measuring {config.key}: {exc}")
                continue
            if self._matches(record, config.enabled, identity):
                done[config.key] = record
            else:
                notices.append(f"re-measuring {config.key}: its record is of another configuration")
        return done, notices

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


def load_ablation(root: str | Path) -> tuple[dict[str, Any], dict[str, RunRecord]]:
    """Read `ablation.json` and the records it lists as done (for reports)."""
    manifest_path = Path(root) / "ablation.json"
    if not manifest_path.is_file():
        raise RecordError(f"no ablation.json in {root}")
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RecordError(f"{manifest_path}: not valid JSON ({type(exc).__name__})") from None
    if not isinstance(manifest, dict) or manifest.get("schema") != ABLATION_SCHEMA:
        raise RecordError(f"{manifest_path}: schema is not {ABLATION_SCHEMA!r}")
    records = {
        c["key"]: load_record(Path(root) / c["record"])
        for c in manifest.get("configs", [])
        if c.get("status") == "done"
    }
    return manifest, records
