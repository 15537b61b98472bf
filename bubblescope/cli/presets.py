"""`bubblescope presets`: the model presets with their size, bytes per token and whether they fit here."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from bubblescope.cli.floor import DEFAULT_CONTEXT, OutputFormat

PRESETS_SCHEMA = "bubblescope.presets/1"


def preset_rows(*, remeasure: bool = False) -> dict[str, Any]:
    """The `bubblescope.presets/1` object: one row per preset plus the machine it was judged against.

    Args:
        remeasure: on a CPU machine, measure the host bandwidth again instead of using the cached one.
    """
    from bubblescope.floor.bandwidth import machine_memory
    from bubblescope.floor.host_bandwidth import host_bandwidth
    from bubblescope.reference_model.accounting import (
        bytes_per_token,
        count_parameters,
        min_devices_to_fit,
        weight_memory_bytes,
    )
    from bubblescope.reference_model.config import PRESETS

    machine = machine_memory()
    host = host_bandwidth(remeasure=remeasure) if machine.kind == "cpu" else None
    host_gbps = host.gbps if host else None
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
            "host_copy_measured_utc": host.measured_utc if host else None,
            "host_copy_source": host.source if host else None,
        },
        "presets": rows,
    }


def register(app: typer.Typer) -> None:
    @app.command("presets")
    def presets(
        output_format: Annotated[
            OutputFormat, typer.Option("--format", help="table or json.")
        ] = OutputFormat.table,
        remeasure: Annotated[
            bool,
            typer.Option(
                "--remeasure",
                help="Measure the host bandwidth again (CPU machines; it is cached per machine with its "
                "date under $XDG_CACHE_HOME/bubblescope, default ~/.cache/bubblescope).",
            ),
        ] = False,
    ) -> None:
        """List the presets: layers, experts, parameters, memory, bytes per token.

        Bytes per token use the bf16 router and lm_head and an 8K context, as
        `bubblescope floor` does by default. "fits" compares each preset's
        weights (its dtype, MTP included, plus 5 % and 1 GiB headroom) with
        this machine: one CUDA device, or tensor parallelism over up to all of
        them ("TP 2"). Without a GPU it shows the step time a memory-bound
        decode cannot beat here (bytes per token / host copy GB/s, measured
        once per machine and cached with its date; --remeasure measures again).
        Imports torch only on a machine with a GPU driver, to read its memory.
        """
        listing = preset_rows(remeasure=remeasure)
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
        from bubblescope.report.cells import NBSP, fmt_duration_ns

        return f"≥ {fmt_duration_ns(step_s * 1e9)}" if step_s < 1 else f"≥ {step_s:.1f}{NBSP}s"
    return "yes" if row["min_devices"] == 1 else f"TP {row['min_devices']}"


def _print_table(listing: dict[str, Any]) -> None:
    """The presets as a table that fits 80 columns whole (numbers never cut), notes below it."""
    from rich.table import Table

    from bubblescope.report.cells import NBSP
    from bubblescope.report.console import make_console
    from bubblescope.report.escape import console_text

    machine = listing["machine"]
    cpu = machine["kind"] == "cpu"
    where = f"{machine['devices']} x {machine['name']}, {machine['bytes_per_device'] / 1e9:.0f}{NBSP}GB each"
    # No column rules and one space between columns: at 80 columns every name and number fits whole
    # ("ling3-flash-e256" folded to "ling3-flash" + "-e256" read as another preset).
    table = Table(
        title=f"presets (fit judged on {where})",
        title_justify="left",
        box=None,
        padding=(0, 0, 0, 1),
        pad_edge=False,
        header_style="bold underline",
    )
    table.add_column("preset", no_wrap=True)
    headers = ("layers", "experts", "params", "active", "weights", "bytes/tok", "step ≥" if cpu else "fits")
    for column in headers:
        table.add_column(column, justify="right", no_wrap=True)
    for row in listing["presets"]:
        table.add_row(
            row["preset"],
            f"{row['layers']} ({row['kda_layers']}+{row['mla_layers']})",
            f"{row['experts']}/{row['experts_per_token']}",
            _count(row["params_total"]),
            _count(row["params_active"]),
            _size(row["bf16_weight_bytes"]),
            _size(row["bytes_per_token"]),
            _fit_text(row, machine).removeprefix("≥ "),
        )
    console = make_console()
    console.print(table)
    console.print(
        "layers: total (KDA+MLA); experts: routed/top-k; weights: all of them in bf16; bytes/tok: bf16 "
        "router and lm_head, 8K context"
    )
    if cpu and machine.get("host_copy_gbps"):
        console.print(
            console_text(
                f"step ≥: the time a memory-bound step cannot beat here, bytes/tok at "
                f"{machine['host_copy_gbps']:.1f}{NBSP}GB/s host copy ({machine.get('host_copy_source')}, "
                f"measured {machine.get('host_copy_measured_utc')}; --remeasure takes a new one); "
                '"no": does not fit in RAM'
            )
        )


def _count(value: int) -> str:
    """Parameters with four significant digits: 124.4 B, 354.1 M, 755.5 k."""
    for scale, unit in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if value >= scale:
            return f"{value / scale:.4g} {unit}"
    return str(value)


def _size(value: float) -> str:
    """Bytes in GB (MB below one GB): two decimals (10.42 and 10.37 GB/tok stay apart), one from 100."""
    scale, unit = (1e9, "GB") if value >= 1e9 else (1e6, "MB")
    number = value / scale
    return f"{number:.1f} {unit}" if number >= 100 else f"{number:.2f} {unit}"
