"""`bubblescope ablate`: measure many switch configurations and attribute TPOT savings to switches."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from bubblescope.cli.reference_options import (
    AcceptLenOption,
    BlockOption,
    PathOption,
    SpecOption,
    reference_options,
)
from bubblescope.errors import ConfigError

FORMATS = ("table", "json")


def _split(text: str | None) -> list[str]:
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def _toggles(toggles: str | None, all_on: bool, workload: Any) -> tuple[list[str], list[str]]:
    """The switches under study, in the workload's order for --all, else as given."""
    from bubblescope.cli.run import resolve_toggles

    enabled, notices = resolve_toggles(toggles, all_on, workload)
    if all_on:
        return [i.name for i in workload.switches() if i.name in enabled], notices
    return [name for name in _split(toggles) if name in enabled], notices


def _write_html(out_dir: Path) -> str | None:
    """Render ablation.html when the renderer is installed; return a notice otherwise."""
    from bubblescope.ablate.store import load_ablation
    from bubblescope.atomic import write_text_atomic

    manifest, loaded = load_ablation(out_dir)
    try:
        from bubblescope.report.html import render_ablation_html

        # Inside the try: the renderer may import plotly lazily, and a GPU box may lack it.
        html = render_ablation_html(manifest, loaded)
    except ImportError as exc:
        return f"HTML report skipped ({exc}); render it later with `bubblescope report {out_dir}`"
    write_text_atomic(out_dir / "report.html", html)
    return None


def _measure_with_progress(
    workload: Any, plan: Any, out_dir: Path, *, settings: Any, workload_info: dict[str, Any]
) -> tuple[dict[str, Any] | None, list[str]]:
    """Run the ablation under a rich progress bar (stderr) counting repeats, with ETA."""
    from rich.console import Console

    from bubblescope.ablate.runner import run_ablation
    from bubblescope.ablate.store import AblationStore
    from bubblescope.capture.floor import resolve_floor_bandwidth
    from bubblescope.report.run_console import ablation_progress

    console = Console(stderr=True)
    with ablation_progress(console) as progress:
        task = progress.add_task("ablation", total=None)

        def on_start(done: int, pending: int) -> None:
            if done:
                console.print(f"resuming {out_dir}: {done} configurations on disk, {pending} to measure")
            progress.update(task, total=max(1, pending * settings.repeats))

        def on_config(config: Any, record: Any, resumed: bool) -> None:
            if not resumed:
                progress.update(task, description=f"done {config.key}")

        attribution, _, notices = run_ablation(
            workload,
            plan,
            AblationStore(out_dir),
            settings=settings,
            workload_info=workload_info,
            bandwidth=resolve_floor_bandwidth(),
            on_start=on_start,
            on_config=on_config,
            on_repeat=lambda _r: progress.advance(task),
        )
    return attribution, notices


def register(app: typer.Typer) -> None:
    @app.command("ablate")
    def ablate(
        toggles: str = typer.Option(None, "--toggles", help="Switches to study, comma-separated."),
        all_on: bool = typer.Option(False, "--all", help="Study every switch usable on this device."),
        order: str = typer.Option(
            None, "--order", help="Order of the cumulative waterfall (default: --toggles order)."
        ),
        workload: str = typer.Option(
            None, "--workload", help="package.module:factory (default: the reference workload)."
        ),
        preset: str = typer.Option(None, "--preset", help="Preset; default: the largest this machine holds."),
        steps: int = typer.Option(64, "--steps", help="Timed decode steps per repeat."),
        warmup: int = typer.Option(8, "--warmup", help="Untimed steps before each repeat."),
        repeats: int = typer.Option(3, "--repeats", help="Repeats per configuration."),
        profile_steps: int = typer.Option(
            4, "--profile-steps", help="Profiled steps per configuration (0: no trace)."
        ),
        max_exact: int = typer.Option(
            6, "--max-exact-shapley", help="Measure all 2^n subsets up to this many switches."
        ),
        permutations: int = typer.Option(
            8, "--shapley-permutations", help="Sampled orderings beyond --max-exact-shapley."
        ),
        seed: int = typer.Option(0, "--seed", help="Weight seed."),
        out: Annotated[
            Path | None,
            typer.Option("--out", help="Ablation folder; rerunning with the same folder resumes."),
        ] = None,
        output_format: str = typer.Option("table", "--format", help="table or json (prints ablation.json)."),
        reanalyze: bool = typer.Option(
            False,
            "--reanalyze",
            help="Measure nothing: re-analyse the stored traces of the ablation in --out and rebuild its "
            "attribution and report (after an analysis fix or upgrade).",
        ),
        spec: SpecOption = None,
        block: BlockOption = 8,
        accept_len: AcceptLenOption = None,
        path: PathOption = "auto",
    ) -> None:
        """Measure the baseline, each switch alone, all on, all on minus each and the cumulative order.

        One process, weights built once, only prepare() between configurations. Each configuration
        becomes runs/<key>.json; ablation.json (schema bubblescope.ablation/1) is rewritten after each,
        so rerunning with the same --out resumes and re-measures only what is missing. Attribution:
        saving alone, removed from all-on, cumulative, Shapley (exact up to --max-exact-shapley
        switches by measuring every subset, sampled orderings beyond) and the interaction term, each
        with a bootstrap 95% interval.
        """
        from rich.console import Console

        from bubblescope.ablate.plan import plan_ablation
        from bubblescope.capture.measure import RunSettings
        from bubblescope.capture.setup import build_workload
        from bubblescope.cli.run import default_out_dir
        from bubblescope.report.run_console import print_ablation_summary

        if output_format not in FORMATS:
            raise ConfigError(f"--format must be one of {', '.join(FORMATS)}")
        if reanalyze:
            if out is None:
                raise ConfigError("--reanalyze needs --out DIR, the ablation to re-analyse")
            from bubblescope.ablate.reanalyze import reanalyze_ablation

            attribution = reanalyze_ablation(out)
            html_notice = _write_html(out)
            if output_format == "json":
                typer.echo((out / "ablation.json").read_text(encoding="utf-8"))
                return
            print_ablation_summary(Console(), attribution or {}, [html_notice] if html_notice else [])
            typer.echo(f"re-analysed {out}")
            return
        settings = RunSettings(steps=steps, warmup=warmup, repeats=repeats, profile_steps=profile_steps)
        built = build_workload(
            workload,
            preset,
            seed=seed,
            max_steps=warmup + steps,
            reference=reference_options(spec, block, accept_len, path),
        )
        names, notices = _toggles(toggles, all_on, built.workload)
        plan = plan_ablation(names, _split(order) or None, max_exact=max_exact, permutations=permutations)
        if built.notice:
            typer.echo(built.notice, err=True)
        out_dir = out or default_out_dir("ablations", built.preset, frozenset(names))
        workload_info = {
            "name": getattr(built.workload, "name", "workload"),
            "factory": built.factory,
            "preset": built.preset,
        }
        attribution, run_notices = _measure_with_progress(
            built.workload, plan, out_dir, settings=settings, workload_info=workload_info
        )
        notices += run_notices
        html_notice = _write_html(out_dir)
        notices += [html_notice] if html_notice else []
        if output_format == "json":
            typer.echo((out_dir / "ablation.json").read_text(encoding="utf-8"))
            return
        print_ablation_summary(Console(), attribution or {}, notices)
        typer.echo(f"written to {out_dir}")
