"""`bubblescope floor`: parameters, HBM bytes per decoded token by component, and the speed-of-light TPOT."""

from __future__ import annotations

import json
from enum import Enum
from typing import Annotated, Any

import typer

from bubblescope.errors import BubblescopeError

FLOOR_SCHEMA = "bubblescope.floor/1"
DEFAULT_CONTEXT = 8192


class OptionError(typer.BadParameter, BubblescopeError):
    """A BubblescopeError caused by an option value, leaving a command with exit code 2 on both paths.

    `bubblescope.cli.main` catches it as a BubblescopeError (one line, exit 2); typer's standalone mode
    (CliRunner, `python -m`) treats it as a usage error (message, exit 2) instead of a traceback.
    """


class Precision(str, Enum):
    fp32 = "fp32"
    bf16 = "bf16"


class OutputFormat(str, Enum):
    table = "table"
    json = "json"


def floor_summary(
    preset: str,
    *,
    tp: int = 1,
    context: int = DEFAULT_CONTEXT,
    bandwidth_gbps: float | None = None,
    router_bf16: bool = True,
    lm_head_bf16: bool = True,
    include_mtp: bool = False,
) -> dict[str, Any]:
    """The `bubblescope.floor/1` JSON object for one preset (what `--format json` prints).

    Raises:
        ConfigError: unknown preset (lists the valid ones), a tp that does not divide the model,
            a negative context or a non-positive bandwidth.
    """
    from bubblescope.floor.bandwidth import resolve_bandwidth
    from bubblescope.reference_model.accounting import bytes_per_token, count_parameters
    from bubblescope.reference_model.config import get_preset

    config = get_preset(preset)
    params = count_parameters(config)
    breakdown = bytes_per_token(
        config,
        context_len=context,
        router_bf16=router_bf16,
        lm_head_bf16=lm_head_bf16,
        tp=tp,
        include_mtp=include_mtp,
    )
    bandwidth = resolve_bandwidth(bandwidth_gbps)
    return {
        "schema": FLOOR_SCHEMA,
        "preset": config.name,
        "tp": tp,
        "context": context,
        "router": "bf16" if router_bf16 else "fp32",
        "lm_head": "bf16" if lm_head_bf16 else "fp32",
        "mtp": include_mtp,
        "params_total": params.total,
        "params_total_with_mtp": count_parameters(config, include_mtp=True).total,
        "params_active": params.active_with_lm_head,
        "params_active_non_embedding": params.active,
        "params_active_with_embedding": params.active_with_embedding,
        "weight_bytes_per_token": breakdown.weights,
        "bytes_per_token": breakdown.total,
        "components": breakdown.components,
        "bandwidth_gbps": bandwidth.gbps,
        "bandwidth_source": bandwidth.source,
        "floor_ms": breakdown.total / (bandwidth.gbps * 1e9) * 1e3,
        "weights_floor_ms": breakdown.weights / (bandwidth.gbps * 1e9) * 1e3,
    }


def register(app: typer.Typer) -> None:
    @app.command("floor")
    def floor(
        preset: Annotated[
            str, typer.Option("--preset", "-p", help="Model preset (see `bubblescope presets`).")
        ] = ("ling3-flash"),
        tp: Annotated[
            int, typer.Option("--tp", help="Tensor-parallel degree; bytes are one GPU's share.")
        ] = 1,
        context: Annotated[
            int,
            typer.Option(
                "--context", help="Cached tokens the MLA layers read (the latent cache grows with it)."
            ),
        ] = DEFAULT_CONTEXT,
        bandwidth: Annotated[
            float | None,
            typer.Option(
                "--bandwidth", help="HBM bandwidth in GB/s. Default: measured on CUDA, else 4140 (H200)."
            ),
        ] = None,
        router: Annotated[
            Precision, typer.Option("--router", help="Router gate weight precision.")
        ] = Precision.bf16,
        lm_head: Annotated[
            Precision, typer.Option("--lm-head", help="lm_head weight precision.")
        ] = Precision.bf16,
        mtp: Annotated[
            bool,
            typer.Option("--mtp/--no-mtp", help="Add one MTP draft forward (its layer, lm_head, cache)."),
        ] = False,
        output_format: Annotated[
            OutputFormat, typer.Option("--format", help="table or json.")
        ] = OutputFormat.table,
    ) -> None:
        """Speed-of-light TPOT: HBM bytes one decoded token reads / bandwidth.

        Counts every weight a batch-1 token multiplies (8 routed experts and
        the shared one per MoE layer, the router, the whole lm_head, one
        embedding row), the KDA recurrent and conv states (read and written)
        and the MLA latent cache over --context tokens. MTP only with --mtp.
        With --tp N the bytes are one GPU's share: heads, FFN widths and
        lm_head split; router, norms and the latent cache replicated.

        Router and lm_head default to bf16, what the published SGLang
        baseline reads: 10.207 GB of weights per token for ling3-flash.
        --router fp32 / --lm-head fp32 give HF's fp32 reads (10.31 / 11.12 GB).

        Bandwidth: --bandwidth if given, else a device-to-device copy measured
        on this GPU, else the assumed H200 copy ceiling (4140 GB/s).
        """
        try:
            summary = floor_summary(
                preset,
                tp=tp,
                context=context,
                bandwidth_gbps=bandwidth,
                router_bf16=router is Precision.bf16,
                lm_head_bf16=lm_head is Precision.bf16,
                include_mtp=mtp,
            )
        except BubblescopeError as exc:
            raise OptionError(str(exc)) from None
        if output_format is OutputFormat.json:
            typer.echo(json.dumps(summary, indent=1))
        else:
            _print_table(summary)


def _print_table(summary: dict[str, Any]) -> None:
    from rich.table import Table

    from bubblescope.report.cells import NBSP
    from bubblescope.report.console import make_console

    table = Table(
        title=(
            f"{summary['preset']}: bytes per token (tp={summary['tp']}, context={summary['context']}, "
            f"router {summary['router']}, lm_head {summary['lm_head']})"
        ),
        title_justify="left",
    )
    table.add_column("component")
    table.add_column("MB per token", justify="right")
    table.add_column("share", justify="right")
    total = summary["bytes_per_token"]
    for name, value in summary["components"].items():
        if value:
            table.add_row(name, f"{value / 1e6:,.2f}", f"{value / total:.1%}")
    table.add_row("weights", f"{summary['weight_bytes_per_token'] / 1e6:,.2f}", "", style="bold")
    table.add_row("total", f"{total / 1e6:,.2f}", "100.0%", style="bold")
    console = make_console()
    console.print(table)
    console.print(
        f"parameters: {summary['params_total'] / 1e9:.2f}{NBSP}B total "
        f"({summary['params_total_with_mtp'] / 1e9:.2f}{NBSP}B with MTP), "
        f"{summary['params_active'] / 1e9:.3f}{NBSP}B active incl. lm_head"
    )
    console.print(
        f"floor: {summary['floor_ms']:.3f}{NBSP}ms per token at {summary['bandwidth_gbps']:.0f}{NBSP}GB/s "
        f"({summary['bandwidth_source']}); weights alone {summary['weights_floor_ms']:.3f}{NBSP}ms"
    )
