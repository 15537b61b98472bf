"""The KDA block of a decoder layer (in_proj GEMV -> KDA decode -> o_proj GEMV) as one persistent launch."""

from bubblescope.kernels.kda_block.naive import kda_block_naive
from bubblescope.kernels.kda_block.ops import KDABlockConfig, kda_block

__all__ = ["KDABlockConfig", "kda_block", "kda_block_naive"]
