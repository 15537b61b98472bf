"""Decode-time state of the whole model: KDA recurrent/conv states and MLA latent caches.

The position counter lives on the host (a stock eager serving loop keeps it there); the `no_readback`
switch is where it moves to the device.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from bubblescope.errors import ConfigError

from .config import LingConfig


@dataclass
class LatentCache:
    """One MLA layer's cache of [normed c ; rotated k_pe] per position.

    Attributes:
        buffer: [B, capacity, kv_lora_rank + qk_rope_head_dim], preallocated.
        length: positions filled so far (host int).
    """

    buffer: torch.Tensor
    length: int = 0

    @property
    def capacity(self) -> int:
        return self.buffer.shape[1]

    def append(self, latent: torch.Tensor) -> torch.Tensor:
        """Write latent [B, T, W] after the filled positions; return the filled view [B, length + T, W]."""
        end = self.length + latent.shape[1]
        if end > self.capacity:
            raise ConfigError(f"MLA cache full: {end} positions needed, capacity {self.capacity}")
        self.buffer[:, self.length : end] = latent
        self.length = end
        return self.buffer[:, :end]

    def clone(self) -> LatentCache:
        return LatentCache(self.buffer.clone(), self.length)

    def copy_(self, other: LatentCache) -> None:
        self.buffer.copy_(other.buffer)
        self.length = other.length


class ModelCache:
    """All per-layer decode state of a LingForCausalLM (MTP layer included when the config has one).

    Attributes:
        kda: layer index -> KDAState (recurrent [B,H,K,V] fp32, conv [B,3,W,kernel-1]).
        mla: layer index -> LatentCache; index num_hidden_layers is the MTP layer's own cache.
        length: tokens the main model has consumed (next token's position).
    """

    def __init__(self, kda: dict, mla: dict[int, LatentCache], length: int = 0) -> None:
        self.kda = kda
        self.mla = mla
        self.length = length

    @classmethod
    def allocate(
        cls, config: LingConfig, *, batch: int, capacity: int, device: torch.device | str, dtype: torch.dtype
    ) -> ModelCache:
        """Zeroed states for `batch` sequences of up to `capacity` positions.

        Args:
            capacity: max positions per MLA cache (prompt + generated).
            dtype: activation dtype (conv states and latent caches); KDA recurrent states stay fp32.
        """
        from .kda import KDAState

        kda = {i: KDAState.zeros(config, batch, device, dtype) for i in config.kda_layers}
        width = config.mla_cache_width
        mla_layers = list(config.mla_layers)
        if config.num_nextn_predict_layers > 0:
            mla_layers.append(config.num_hidden_layers)
        mla = {
            i: LatentCache(torch.zeros(batch, capacity, width, device=device, dtype=dtype))
            for i in mla_layers
        }
        return cls(kda, mla)

    def clone(self) -> ModelCache:
        return ModelCache(
            {i: state.clone() for i, state in self.kda.items()},
            {i: cache.clone() for i, cache in self.mla.items()},
            self.length,
        )

    def copy_(self, other: ModelCache) -> None:
        """Overwrite this cache's tensors in place with `other`'s (same shapes), keeping addresses."""
        for i, state in self.kda.items():
            state.copy_(other.kda[i])
        for i, cache in self.mla.items():
            cache.copy_(other.mla[i])
        self.length = other.length

    def reset(self) -> None:
        """Back to an empty sequence without reallocating."""
        for state in self.kda.values():
            state.recurrent.zero_()
            state.conv.zero_()
        for cache in self.mla.values():
            cache.buffer.zero_()
            cache.length = 0
        self.length = 0
