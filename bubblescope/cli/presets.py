"""`bubblescope presets`: the model presets with their size, bytes per token and whether they fit here."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from bubblescope.cli.floor import DEFAULT_CONTEXT, OutputFormat

PRESETS_SCHEMA = "bubblescope.presets/1"
# Bytes copied to measure host memory bandwidth (large enough to leave the caches, quick to copy).
HOST_COPY_BYTES = 256 << 20


def host_copy_gbps(repeats: int = 3) -> float:
    """This machine's host memory bandwidth (GB/s, read + write of one large copy, best of `repeats`).

    A CPU decode step reads every active weight at least once, so bytes per token / this is a lower
    bound on its step time: what "fits" means on a CPU is "runs, at this speed at best".
    """
    import time

    import numpy as np

    source = np.ones(HOST_COPY_BYTES // 8, dtype=np.float64)
    target = np.empty_like(source)
    best_s = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        np.copyto(target, source)
        best_s = min(best_s, time.perf_counter() - start)
    return 2 * HOST_COPY_BYTES / best_s / 1e9


def preset_rows() -> dict[str, Any]:
    """The `bubblescope.presets/1` object: one row per preset plus the machine it was judged against."""
    from bubblescope.bandwidth import machine_memory
    from bubblescope.reference_model.accounting import (
        bytes_per_token,
        count_parameters,
        min_devices_to_fit,
        weight_memory_bytes,
    )
    from bubblescope.reference_model.config import PRESETS

    machine = machine_memory()
    host_gbps = host_copy_gbps() if machine.kind == "cpu" else None
    rows = []
    for config in PRESETS.values():
        params = count_parameters(config)
        breakdown = bytes_per_token(config, context_len=DEFAULT_CONTEXT, router_bf16=True, lm_head_bf16=True)
        tp_needed = min_devices_to_fit(config, machine.bytes_per_device, max_devices=machine.devices)
        rows.append(
            {
                "preset": config.name,
                "layers": config.num_hidden_layers,
                "kda_layers": len(config.kda_layers),
                "mla_layers": len(config.mla_layers),
                "mtp_layers": config.num_nextn_predict_layers,
                "experts": config.num_experts,
                "experts_per_token": config.num_experts_per_tok,
                "dtype": config.dtype,
                "params_total": params.total,
                "params_active": params.active_with_lm_head,
                "bf16_weight_bytes": weight_memory_bytes(config.with_(dtype="bfloat16")),
                "weight_bytes": weight_memory_bytes(config),
                "weight_bytes_per_token": breakdown.weights,
                "bytes_per_token": breakdown.total,
                "fits": tp_needed is not None,
                "min_devices": tp_needed,
                # CPU only: the step time a memory-bound decode cannot beat on this machine.
                "expected_step_s_min": breakdown.total / (host_gbps * 1e9) if host_gbps else None,
                "description": config.description,
            }
        )
    return {
        "schema": PRESETS_SCHEMA,
        "context": DEFAULT_CONTEXT,
        "machine": {
            "kind": machine.kind,
            "devices": machine.devices,
            "bytes_per_device": machine.bytes_per_device,
            "name": machine.name,
            "host_copy_gbps": host_gbps,
        },
        "presets": rows,
    }


def register(app: typer.Typer) -> None:
    @app.command("presets")
    def presets(
        output_format: Annotated[
            OutputFormat, typer.Option("--format", help="table or json.")
        ] = OutputFormat.table,
    ) -> None:
        """List the presets: layers, experts, parameters, memory, bytes per token.

        Bytes per token use the bf16 router and lm_head and an 8K context, as
        `bubblescope floor` does by default. "fits" compares each preset's
        weights (its dtype, MTP included, plus 5 % and 1 GiB headroom) with
        this machine: one CUDA device, or tensor parallelism over up to all of
        them ("TP 2"). Without a GPU it shows the step time a memory-bound
        decode cannot beat here (bytes per token / measured host copy GB/s).
        """
        listing = preset_rows()
        if output_format is OutputFormat.json:
            typer.echo(json.dumps(listing, indent=1))
        else:
            _print_table(listing)


def _fit_text(row: dict[str, Any], machine: dict[str, Any]) -> str:
    if not row["fits"]:
        return "no"
    if machine["kind"] == "cpu":
        # In RAM, but a big preset on CPU takes seconds to minutes per step: say how long, not "yes".
        step_s = row.get("expected_step_s_min")
        if not step_s:
            return "in RAM"
        from bubblescope.report.cells import fmt_duration_ns

        return f"≥ {fmt_duration_ns(step_s * 1e9)}/step" if step_s < 1 else f"≥ {step_s:.1f} s/step"
    return "yes" if row["min_devices"] == 1 else f"TP {row['min_devices']}"


def _print_table(listing: dict[str, Any]) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    machine = listing["machine"]
    where = f"{machine['devices']} x {machine['name']}, {machine['bytes_per_device'] / 1e9:.0f} GB each"
    table = Table(
        title=f"presets (fit judged on {where})",
        caption="layers: total (KDA+MLA); experts: routed/top-k; GB/tok: bf16 router+lm_head, 8K context",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    table.add_column("preset", no_wrap=True)
    for column in ("layers", "experts", "params", "active", "bf16 GB", "GB/tok", "fits"):
        table.add_column(column, justify="right", no_wrap=True)
    for row in listing["presets"]:
        table.add_row(
            row["preset"],
            f"{row['layers']} ({row['kda_layers']}+{row['mla_layers']})",
            f"{row['experts']}/{row['experts_per_token']}",
            _count(row["params_total"]),
            _count(row["params_active"]),
            f"{row['bf16_weight_bytes'] / 1e9:.1f}",
            f"{row['bytes_per_token'] / 1e9:.3f}",
            _fit_text(row, machine),
        )
    Console().print(table)


def _count(value: int) -> str:
    return f"{value / 1e9:.4g} B" if value >= 1e8 else f"{value / 1e6:.4g} M"
