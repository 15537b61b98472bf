"""lm_head GEMV + greedy argmax on device, beside the plain reference."""

from bubblescope.kernels.lm_head.naive import lm_head_greedy_naive
from bubblescope.kernels.lm_head.ops import lm_head_greedy

__all__ = ["lm_head_greedy", "lm_head_greedy_naive"]
