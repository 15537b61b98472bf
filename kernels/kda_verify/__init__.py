"""KDA chain verify for speculative decoding: T tokens, every position's state and conv window to scratch.

`kda_verify` is the public entry point (fused Triton, unfused Triton, or plain PyTorch);
`kda_verify_naive` is the reference. Layouts: kernels/kda_verify/naive.py.
"""

from bubblescope.kernels.kda_verify.common import KDAVerifyInputError
from bubblescope.kernels.kda_verify.naive import kda_verify_naive
from bubblescope.kernels.kda_verify.verify import kda_verify, triton_usable

__all__ = ["KDAVerifyInputError", "kda_verify", "kda_verify_naive", "triton_usable"]
