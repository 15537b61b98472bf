"""`bubblescope profile`: profile any Python script's decode loop, and name each blocking read's line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from bubblescope.errors import ConfigError

STEP_FRAME_HELP = (
    "Regex (full match) of a Python function, qualified or plain (`LlamaForCausalLM.forward`, "
    "`decode_one_token`): each outermost call starts a step that lasts until the next call."
)
TIMED_HELP = (
    "Time N steps first, for a TPOT with its 95% interval: --warmup untimed steps, N timed at step "
    "boundaries (CUDA events; the host clock on CPU; nothing synchronises in between), then the "
    "profiled --warmup + --active. Needs --step-frame or bubblescope.step() calls."
)
STEP_MARKER_HELP = (
    "Regex naming step annotations already in the trace (record_function/NVTX names, e.g. "
    "'decode_step_.*'; a full match of the whole name). The whole run is recorded; --warmup/--active do "
    "not apply."
)


def register(app: typer.Typer) -> None:
    @app.command(
        "profile",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
    )
    def profile(
        command: Annotated[
            list[str], typer.Argument(help="The script to run, after --: `python my_loop.py ARGS...`.")
        ],
        out: Annotated[Path, typer.Option("-o", "--out", metavar="DIR", help="Output folder.")] = Path(
            "runs/profile"
        ),
        step_frame: Annotated[str | None, typer.Option("--step-frame", help=STEP_FRAME_HELP)] = None,
        step_marker: Annotated[str | None, typer.Option("--step-marker", help=STEP_MARKER_HELP)] = None,
        active: Annotated[int, typer.Option("--active", help="Steps recorded.")] = 8,
        warmup: Annotated[int, typer.Option("--warmup", help="Steps run before recording.")] = 2,
        timed: Annotated[int, typer.Option("--timed", help=TIMED_HELP)] = 0,
        read_sites: Annotated[
            bool,
            typer.Option(
                "--read-sites/--no-read-sites",
                help="Take the Python stack of every blocking read (exact lines); off leaves def lines.",
            ),
        ] = True,
    ) -> None:
        """Run a Python script under the profiler and report every host-blocking read at its exact line.

        `bubblescope profile --out runs/mine --step-frame decode_one_token -- python my_loop.py --n 64`

        The script runs in this process (`__name__ == "__main__"`, `sys.argv` as it expects). Steps come
        from its `bubblescope.step()` calls if it makes them, else from each call of the --step-frame
        function, else the whole run is recorded and cut by --step-marker. Writes trace.json.gz,
        analysis.json (each blocking read: your line, the library line that read, per step, cost),
        report.html and profile.json under --out, even when the script raises. Exit status: the
        script's; 2 for a bad option.
        """
        from bubblescope.cli.outputs import check_out_folder
        from bubblescope.profiling.script import empty_selection, profile_script

        if active < 1 or warmup < 0 or timed < 0:
            raise ConfigError("need --active >= 1, --warmup >= 0 and --timed >= 0")
        # Before the script runs: an --out that is a file would fail only after the whole run.
        check_out_folder(out)
        status, session = profile_script(
            command,
            out=out,
            active=active,
            warmup=warmup,
            timed=timed,
            step_frame=step_frame,
            step_marker=step_marker,
            read_sites=read_sites,
        )
        from bubblescope.report.escape import plain_console_text

        for notice in session.outputs.get("notices", []):
            typer.echo(f"bubblescope: {plain_console_text(notice)}", err=True)
        problem = empty_selection(session, step_frame, step_marker)
        if status == 0 and problem:
            raise ConfigError(f"{problem} (files kept under {out})")
        raise typer.Exit(status)
