"""`bubblescope ablate`: measure many switch configurations and attribute TPOT savings to switches."""

from __future__ import annotations

import contextlib
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from bubblescope.ablate.toggles import split_names, study_toggles
from bubblescope.cli.outputs import check_out_folder
from bubblescope.cli.reference_options import (
    AcceptLenOption,
    BlockOption,
    PathOption,
    RoutingOverlapOption,
    SpecOption,
    reference_options,
)
from bubblescope.cli.run_options import BandwidthOption, ThreadsOption, TogglesOption
from bubblescope.cli.trace_cap import DEFAULT_MAX_DECOMPRESSED_MB, MAX_DECOMPRESSED_HELP, trace_cap_mb
from bubblescope.errors import ConfigError
from bubblescope.report.cells import plural
from bubblescope.report.escape import console_text, plain_console_text

FORMATS = ("table", "json")


class AblateFormat(str, Enum):
    """The values `--format` accepts (shown as choices in --help)."""

    table = "table"
    json = "json"


def _write_html(out_dir: Path) -> str | None:
    """Render report.html (the same page as `bubblescope report DIR`: with the baseline's and all-on's
    one-step timelines from their analysis files) when the renderer is installed; else a notice."""
    from bubblescope.files.atomic import write_text_atomic
    from bubblescope.report.load_inputs import load_ablation

    inputs = load_ablation(out_dir / "ablation.json")
    try:
        from bubblescope.report.html import render_ablation_html

        # Inside the try: the renderer may import plotly lazily, and a GPU box may lack it.
        html = render_ablation_html(inputs.ablation, inputs.records, inputs.analyses)
    except ImportError as exc:
        # Printed through rich by the summary: controls made visible here, markup escaped there.
        return plain_console_text(
            f"HTML report skipped ({exc}); render it later with `bubblescope report {out_dir}`"
        )
    write_text_atomic(out_dir / "report.html", html)
    return None


def _measure_with_progress(
    workload: Any,
    plan: Any,
    out_dir: Path,
    *,
    settings: Any,
    workload_info: dict[str, Any],
    bandwidth: tuple[float, str] | None,
) -> tuple[dict[str, Any] | None, list[str]]:
    """Run the ablation under a progress display on stderr (a bar with ETA on a terminal, a line per
    finished repeat and configuration in a pipe)."""
    from bubblescope.ablate.runner import run_ablation
    from bubblescope.ablate.store import AblationStore
    from bubblescope.capture.floor import resolve_floor_bandwidth
    from bubblescope.cli.saved import note_saved
    from bubblescope.report.console import make_console
    from bubblescope.report.run_console import ablation_progress

    console = make_console(stderr=True)
    saved = [0]
    note_saved(f"no configuration measured yet in {out_dir}")
    with ablation_progress(console, settings.repeats) as progress:

        def on_start(done: int, pending: int) -> None:
            if done:
                console.print(
                    f"resuming {console_text(out_dir)}: {done} configurations on disk, {pending} to measure",
                    soft_wrap=True,  # one line: the folder stays copyable
                )
            progress.start(pending)

        def on_config(config: Any, record: Any, resumed: bool) -> None:
            saved[0] += 1
            note_saved(
                f"{plural(saved[0], 'configuration')} saved in {out_dir}; the same command resumes from there"
            )
            if not resumed:
                progress.config_done(config.key)

        attribution, _, notices = run_ablation(
            workload,
            plan,
            AblationStore(out_dir),
            settings=settings,
            workload_info=workload_info,
            bandwidth=bandwidth or resolve_floor_bandwidth(),
            on_start=on_start,
            on_config=on_config,
            on_repeat=progress.repeat_done,
        )
    return attribution, notices


def register(app: typer.Typer) -> None:
    @app.command("ablate")
    def ablate(
        toggles: TogglesOption = None,
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
        read_sites: bool = typer.Option(
            True,
            "--read-sites/--no-read-sites",
            help="Name the exact line of each blocking read, from the profiled window only (timed steps "
            "never run with the read tap).",
        ),
        seed: int = typer.Option(0, "--seed", help="Weight seed."),
        out: Annotated[
            Path | None,
            typer.Option(
                "-o", "--out", metavar="DIR", help="Ablation folder; rerunning with the same folder resumes."
            ),
        ] = None,
        output_format: Annotated[
            AblateFormat, typer.Option("--format", help="table, or json (prints ablation.json).")
        ] = AblateFormat.table,
        reanalyze: bool = typer.Option(
            False,
            "--reanalyze",
            help="Measure nothing: re-analyse the stored traces of the ablation in --out and rebuild its "
            "attribution and report (after an analysis fix or upgrade).",
        ),
        spec: SpecOption = None,
        block: BlockOption = 8,
        accept_len: AcceptLenOption = None,
        routing_overlap: RoutingOverlapOption = 0.0,
        path: PathOption = "auto",
        tp: int = typer.Option(
            1,
            "--tp",
            help="Tensor-parallel ranks of the reference model (one GPU each; gloo + debug preset on CPU).",
        ),
        max_decompressed_mb: int = typer.Option(
            DEFAULT_MAX_DECOMPRESSED_MB,
            "--max-decompressed-mb",
            help="With --reanalyze: " + MAX_DECOMPRESSED_HELP,
        ),
        threads: ThreadsOption = None,
        bandwidth: BandwidthOption = None,
    ) -> None:
        """Measure the baseline, each switch alone, all on, all on minus each and the cumulative order.

        One process, weights built once, only prepare() between configurations. Each configuration
        becomes runs/KEY.json; ablation.json (schema bubblescope.ablation/1) is rewritten after each,
        so rerunning with the same --out resumes and re-measures only what is missing. Attribution:
        saving alone, removed from all-on, cumulative, Shapley (exact up to --max-exact-shapley
        switches by measuring every subset, sampled orderings beyond) and the interaction term, each
        with a bootstrap 95% interval.

        With --tp N (reference workload only) N ranks (torchrun-compatible; gloo + debug preset on
        CPU) each build their shard once and measure the same configurations in lockstep; rank 0's
        records are the ablation and carry a "tp" block (every rank's TPOT, GPU busy, idle, reads per
        step, slowest rank), rank R keeps its records and traces in rankR/runs/. Resuming a TP
        ablation re-measures, on every rank, exactly the configurations rank 0 lacks.
        """
        from bubblescope.capture.measure import RunSettings

        if output_format not in FORMATS:
            raise ConfigError(f"--format must be one of {', '.join(FORMATS)}")
        if tp < 1:
            raise ConfigError(f"--tp must be >= 1, got {tp}")
        if out is not None:
            check_out_folder(out)
        if reanalyze:
            if tp != 1:
                raise ConfigError(
                    "--reanalyze starts no ranks; leave out --tp (a TP ablation's ranks are re-analysed "
                    "from their records)"
                )
            with trace_cap_mb(max_decompressed_mb), _writer_lock(out):
                _reanalyze(out, output_format)
            return
        settings = RunSettings(
            steps=steps, warmup=warmup, repeats=repeats, profile_steps=profile_steps, read_sites=read_sites
        )
        study = {"toggles": toggles, "all_on": all_on, "order": order}
        shapley = {"max_exact": max_exact, "permutations": permutations}
        reference = {
            "spec": spec,
            "block": block,
            "accept_len": accept_len,
            "path": path,
            "routing_overlap": routing_overlap,
        }
        if tp != 1:
            if threads is not None or bandwidth is not None:
                raise ConfigError(
                    "--threads and --bandwidth apply to a single-process ablation; with --tp each CPU rank "
                    "uses cpu_count/N threads and the floor the measured (or assumed H200) bandwidth"
                )
            if workload is not None:
                raise ConfigError(
                    "--tp runs the reference Ling workload; --workload cannot be combined with it"
                )
            _ablate_tp(
                tp,
                preset,
                study,
                shapley,
                reference,
                settings=settings,
                seed=seed,
                out=out,
                output_format=output_format,
            )
            return
        with _writer_lock(out):
            out_dir, attribution, notices = _ablate_one_process(
                workload,
                preset,
                study,
                shapley,
                reference,
                settings=settings,
                seed=seed,
                out=out,
                threads=threads,
                bandwidth=bandwidth,
            )
            _finish(out_dir, attribution, notices, output_format)


def _writer_lock(out: Path | None) -> contextlib.AbstractContextManager[None]:
    """The --out folder's writer lock (a default folder is new, named by the time: nobody else's)."""
    from bubblescope.files.out_lock import out_lock

    return out_lock(out, "ablate") if out is not None else contextlib.nullcontext()


def _reanalyze(out: Path | None, output_format: str) -> None:
    """`ablate --reanalyze --out DIR`: rebuild analyses, attribution and report from stored traces."""
    from bubblescope.ablate.reanalyze import reanalyze_ablation
    from bubblescope.report.console import make_console
    from bubblescope.report.load_inputs import load_ablation as load_report_inputs
    from bubblescope.report.run_console import print_ablation_summary

    if out is None:
        raise ConfigError("--reanalyze needs --out DIR, the ablation to re-analyse")
    attribution = reanalyze_ablation(out)
    html_notice = _write_html(out)
    if output_format == "json":
        typer.echo((out / "ablation.json").read_text(encoding="utf-8"))
        return
    inputs = load_report_inputs(out / "ablation.json")
    print_ablation_summary(
        make_console(),
        attribution or {},
        [html_notice] if html_notice else [],
        manifest=inputs.ablation,
        records=inputs.records,
        analyses=inputs.analyses,
        notes=make_console(stderr=True),
    )
    typer.echo(f"re-analysed {plain_console_text(out)}")


def _ablate_one_process(
    workload: str | None,
    preset: str | None,
    study: dict[str, Any],
    shapley: dict[str, int],
    reference: dict[str, Any],
    *,
    settings: Any,
    seed: int,
    out: Path | None,
    threads: int | None,
    bandwidth: float | None,
) -> tuple[Path, dict[str, Any] | None, list[str]]:
    """The ablation in this process (any workload); returns (folder, attribution, notices)."""
    from bubblescope.ablate.plan import plan_ablation
    from bubblescope.capture.floor import resolve_floor_bandwidth
    from bubblescope.capture.setup import build_workload
    from bubblescope.capture.threads import apply_cpu_threads
    from bubblescope.cli.run import default_out_dir

    built = build_workload(
        workload,
        preset,
        seed=seed,
        max_steps=settings.warmup + settings.steps,
        reference=reference_options(**reference),
    )
    names, notices = study_toggles(study["toggles"], study["all_on"], built.workload)
    plan = plan_ablation(names, split_names(study["order"]) or None, **shapley)
    if built.notice:
        typer.echo(plain_console_text(built.notice), err=True)
    threads_line = apply_cpu_threads(built.workload, threads)
    if threads_line:
        typer.echo(plain_console_text(threads_line), err=True)
    floor_bandwidth = resolve_floor_bandwidth(bandwidth) if bandwidth is not None else None
    out_dir = out or default_out_dir("ablations", built.preset, frozenset(names))
    workload_info = {
        "name": getattr(built.workload, "name", "workload"),
        "factory": built.factory,
        "preset": built.preset,
        # Resuming compares these too: records of another draft, block, accept length, overlap, path
        # or weight seed are never mixed into this ablation.
        "options": reference_options(**reference).identity(seed),
    }
    attribution, run_notices = _measure_with_progress(
        built.workload,
        plan,
        out_dir,
        settings=settings,
        workload_info=workload_info,
        bandwidth=floor_bandwidth,
    )
    return out_dir, attribution, notices + run_notices


def _ablate_tp(
    world_size: int,
    preset: str | None,
    study: dict[str, Any],
    shapley: dict[str, int],
    reference: dict[str, Any],
    *,
    settings: Any,
    seed: int,
    out: Path | None,
    output_format: str,
) -> None:
    """`ablate --tp N`: measure on the ranks, then (the launcher, or torchrun's rank 0) write the report
    and print the result, holding the --out lock throughout (`tp_processes.launcher_lock`).

    Notices of every rank are printed here (stderr) since the ranks cannot print to this console.
    """
    from dataclasses import asdict

    from bubblescope.ablate.tp import TPAblateRequest, check_ablate_request, run_tp_ablation
    from bubblescope.capture.launch_tp import choose_tp_preset
    from bubblescope.capture.tp_processes import launcher_lock
    from bubblescope.cli.run import default_out_dir
    from bubblescope.reference_model.tp.distributed import launched_by_torchrun

    if out is None and launched_by_torchrun():
        raise ConfigError("under torchrun pass --out, so every rank writes into the same folder")
    chosen = preset or choose_tp_preset(world_size)
    names = frozenset(split_names(study["toggles"])) if not study["all_on"] else frozenset({"all"})
    out_dir = out or default_out_dir("ablations", f"{chosen}-tp{world_size}", names)
    request = TPAblateRequest(
        world_size=world_size,
        preset=chosen,
        **study,
        **shapley,
        settings=asdict(settings),
        seed=seed,
        out_dir=str(out_dir),
        **reference,
    )
    # A bad request is refused before the lock creates the folder.
    check_ablate_request(request)
    with launcher_lock(out_dir, "ablate"):
        notices = run_tp_ablation(request)
        if notices is None:
            return
        for notice in notices:
            typer.echo(f"note: {plain_console_text(notice)}", err=True)
        _finish(out_dir, None, [], output_format)


def _finish(
    out_dir: Path, attribution: dict[str, Any] | None, notices: list[str], output_format: str
) -> None:
    """Write report.html, then print ablation.json or the summary (with the per-rank lines of a TP run)."""
    from bubblescope.ablate.store import load_ablation
    from bubblescope.report.console import make_console
    from bubblescope.report.load_inputs import load_ablation as load_report_inputs
    from bubblescope.report.run_console import print_ablation_summary

    html_notice = _write_html(out_dir)
    notices = notices + ([html_notice] if html_notice else [])
    if output_format == "json":
        typer.echo((out_dir / "ablation.json").read_text(encoding="utf-8"))
        return
    manifest, records = load_ablation(out_dir)
    attribution = attribution if attribution is not None else manifest.get("attribution")
    print_ablation_summary(
        make_console(),
        attribution or {},
        notices,
        manifest=manifest,
        records=records,
        analyses=load_report_inputs(out_dir / "ablation.json").analyses,
        notes=make_console(stderr=True),
    )
    typer.echo(f"written to {plain_console_text(out_dir)}")
