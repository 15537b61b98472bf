"""KDA decode step (T = 1) in one Triton launch, beside the plain reference."""

from bubblescope.kernels.kda_decode.naive import kda_decode_naive
from bubblescope.kernels.kda_decode.ops import kda_decode
from bubblescope.kernels.kda_decode.params import KDALayerState, KDALayerWeights

__all__ = ["KDALayerState", "KDALayerWeights", "kda_decode", "kda_decode_naive"]
