"""Absorbed-MLA head products around the attention (W_UK into the query; W_UV and the head gate into
the output) as two Triton launches, beside the PyTorch ops they replace."""

from bubblescope.kernels.mla_glue.naive import mla_out_gate_naive, mla_q_absorb_naive
from bubblescope.kernels.mla_glue.ops import MLAGlueConfig, choose_config, mla_out_gate, mla_q_absorb

__all__ = [
    "MLAGlueConfig",
    "choose_config",
    "mla_out_gate",
    "mla_out_gate_naive",
    "mla_q_absorb",
    "mla_q_absorb_naive",
]
