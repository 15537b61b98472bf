"""Absorbed-MLA decode attention (flash-decoding split + combine) beside the plain reference."""

from bubblescope.kernels.mla_decode.naive import mla_decode_naive
from bubblescope.kernels.mla_decode.ops import choose_num_splits, mla_decode

__all__ = ["choose_num_splits", "mla_decode", "mla_decode_naive"]
