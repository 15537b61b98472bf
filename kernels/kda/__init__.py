"""KDA (Kimi Delta Attention): plain recurrent reference and chunked prefill reference."""

from .chunked import chunk_kda
from .naive import KDAInputError, recurrent_kda

__all__ = ["KDAInputError", "chunk_kda", "recurrent_kda"]
