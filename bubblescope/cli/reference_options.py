"""Options of the reference Ling-3.0 workload shared by `run` and `ablate` (speculative decoding, path)."""

from __future__ import annotations

from typing import Annotated

import typer

SpecOption = Annotated[
    str | None,
    typer.Option(
        "--spec",
        help="Speculative decoding with a draft: dspark (5-layer block drafter) or nextn (the MTP layer).",
    ),
]
BlockOption = Annotated[int, typer.Option("--block", help="Drafted tokens per verify (with --spec).")]
AcceptLenOption = Annotated[
    float | None,
    typer.Option(
        "--accept-len",
        help="Oracle acceptance: mean tokens emitted per verify, drawn on the device (random weights "
        "accept almost nothing). Default: real argmax-match acceptance.",
    ),
]
RoutingOverlapOption = Annotated[
    float,
    typer.Option(
        "--routing-overlap",
        help="With --spec: probability (0..1) that a verify token reuses the previous token's expert in "
        "each routing slot, so the verify's expert union looks like trained routing (random routing is "
        "the upper bound). The realised overlap and distinct experts per layer go into the record.",
    ),
]
PathOption = Annotated[
    str,
    typer.Option(
        "--path",
        help="Reference decode path: fast (Triton kernels + CUDA graph), eager (plain PyTorch, the "
        "stock-eager reference) or auto (fast on a GPU, eager on CPU).",
    ),
]


def reference_options(
    spec: str | None, block: int, accept_len: float | None, path: str, routing_overlap: float = 0.0
):
    """The capture layer's ReferenceOptions from the parsed CLI values."""
    from bubblescope.capture.setup import ReferenceOptions

    return ReferenceOptions(
        spec=spec, block=block, accept_len=accept_len, path=path, routing_overlap=routing_overlap
    )
