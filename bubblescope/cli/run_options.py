"""Options `run` and `ablate` share, spelled once: switches, CPU threads, bandwidth, output folder."""

from __future__ import annotations

from typing import Annotated

import typer

from bubblescope.errors import ConfigError

TogglesOption = Annotated[
    str | None,
    typer.Option(
        "--toggles", metavar="A,B", help="Switches, comma-separated (see `--help` of the workload)."
    ),
]
# The spelling `run` used before issue 25; kept working, out of --help.
ToggleAliasOption = Annotated[str | None, typer.Option("--toggle", hidden=True)]
ThreadsOption = Annotated[
    int | None,
    typer.Option(
        "--threads",
        metavar="N",
        help="torch intra-op threads of a CPU run (default 1: on a small decode step more threads cost "
        "more than they bring and make TPOT swing with other load; see README). Ignored on a GPU.",
    ),
]
BandwidthOption = Annotated[
    float | None,
    typer.Option(
        "--bandwidth",
        metavar="GB/S",
        help="Memory bandwidth for the speed-of-light floor. Default: measured on CUDA; on CPU the "
        "floor is not measured without it.",
    ),
]
ForceOption = Annotated[
    bool, typer.Option("--force", help="Overwrite the run already in --out (otherwise refused).")
]


def merged_toggles(toggles: str | None, alias: str | None) -> str | None:
    """--toggles, or its old spelling --toggle; both at once is refused."""
    if toggles is not None and alias is not None:
        raise ConfigError("give --toggles once (--toggle is its old spelling)")
    return toggles if toggles is not None else alias
