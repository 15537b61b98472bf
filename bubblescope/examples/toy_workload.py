"""A small torch decode loop that implements the Workload protocol: the example to copy.

Run it with `bubblescope run --workload bubblescope.examples.toy_workload:make_workload`.

How to write your own workload (ARCHITECTURE §2):
  * `name`, `device` and `switches()` describe it; each switch is a `SwitchInfo` (name, help, what it
    replaces, whether it needs a GPU).
  * `prepare(enabled)` applies a set of switches. It must never rebuild weights: `ablate` calls it
    between configurations inside one process.
  * `step()` runs one decode step exactly as your serving loop would, host work included, and
    returns the number of tokens it emitted (0 is allowed for a pipelined step).
  * `bytes_per_token(enabled)` is the memory traffic per token, for the speed-of-light floor.
  * Optional: `reset()` (fresh sequence, called between repeats, outside timing), `tokens()` (ids
    emitted since the last reset), `describe()` (a dict stored in the RunRecord).

The model: `layers` square matmuls with tanh, an output projection and a greedy argmax. Switches:
  * `no_readback`: the baseline reads the chosen token id to the host each step (`.item()`) and
    builds the next input from it; with the switch the id stays on the device.
  * `planted_sync`: adds an extra device read each step (`.item()` of a norm), for gate tests.
  * `planted_sleep`: the host stalls for `sleep_fraction` of a baseline step each step, for the gate
    trust benchmark (a busy wait: `time.sleep` is too coarse for tens of microseconds).
  * `graph_replay`: needs a GPU; replays the layer stack as a CUDA graph.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from bubblescope.errors import ConfigError
from bubblescope.workload import SwitchInfo

_SWITCHES = (
    SwitchInfo("no_readback", "keep the chosen token on the device", "a per-step .item() readback"),
    SwitchInfo("planted_sync", "(test) add an extra .item() per step", "nothing: it adds a sync"),
    SwitchInfo(
        "planted_sleep", "(test) stall the host for a fraction of a step", "nothing: it adds host time"
    ),
    SwitchInfo("graph_replay", "replay the layer stack as a CUDA graph", "eager launches", needs_gpu=True),
)


class ToyWorkload:
    """A few matmuls per step; see the module docstring for the switches."""

    name = "toy"

    def __init__(
        self,
        *,
        hidden: int = 512,
        layers: int = 8,
        vocab: int = 512,
        device: str | None = None,
        seed: int = 0,
        sleep_fraction: float = 0.03,
        sleep_ns: int | None = None,
    ) -> None:
        if hidden < 1 or layers < 1 or vocab < 2:
            raise ConfigError("toy workload needs hidden >= 1, layers >= 1, vocab >= 2")
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        generator = torch.Generator().manual_seed(seed)
        scale = hidden**-0.5
        # [layers, hidden, hidden] and [hidden, vocab]: scaled so tanh stays out of saturation.
        self._weights = (torch.randn(layers, hidden, hidden, generator=generator) * scale).to(self.device)
        self._embed = (torch.randn(vocab, hidden, generator=generator)).to(self.device)
        self._lm_head = (torch.randn(hidden, vocab, generator=generator) * scale).to(self.device)
        self._hidden, self._layers, self._vocab = hidden, layers, vocab
        self._sleep_fraction = sleep_fraction
        self._sleep_ns = sleep_ns
        self._enabled: frozenset[str] = frozenset()
        self._graph: Any = None
        self.reset()

    def switches(self) -> list[SwitchInfo]:
        return list(_SWITCHES)

    def describe(self) -> dict[str, Any]:
        return {
            "hidden": self._hidden,
            "layers": self._layers,
            "vocab": self._vocab,
            "sleep_ns": self._sleep_ns,
            "device": self.device,
        }

    def reset(self) -> None:
        """Start a fresh sequence from token 0 (called between repeats, outside timing)."""
        self._token = torch.zeros(1, dtype=torch.long, device=self.device)
        self._emitted: list[torch.Tensor] = []
        self._token_ids: list[int] = []

    def prepare(self, enabled: frozenset[str]) -> None:
        names = {info.name for info in _SWITCHES}
        unknown = set(enabled) - names
        if unknown:
            raise ConfigError(f"toy workload has no switch {', '.join(sorted(unknown))}")
        if "graph_replay" in enabled and not self.device.startswith("cuda"):
            raise ConfigError("switch graph_replay needs a CUDA device")
        if "planted_sleep" in enabled and self._sleep_ns is None:
            self._sleep_ns = int(self._calibrate_step_ns() * self._sleep_fraction)
        self._enabled = frozenset(enabled)
        self._graph = self._capture_graph() if "graph_replay" in enabled else None

    def set_planted_sleep_ns(self, sleep_ns: int) -> None:
        """Fix the planted host stall (benchmarks calibrate it over more steps than `prepare` does)."""
        if sleep_ns < 0:
            raise ConfigError("planted sleep must be >= 0 ns")
        self._sleep_ns = int(sleep_ns)

    def _calibrate_step_ns(self) -> float:
        """Median baseline step time, measured once so the planted sleep is a fixed fraction of it."""
        self._enabled = frozenset()
        durations_ns = []
        for _ in range(30):
            start_ns = time.perf_counter_ns()
            self.step()
            durations_ns.append(time.perf_counter_ns() - start_ns)
        self.reset()
        return float(sorted(durations_ns)[len(durations_ns) // 2])

    def _capture_graph(self) -> Any:
        self._static_in = torch.zeros(1, self._hidden, device=self.device)
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            self._static_out = self._layer_stack(self._static_in)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            self._static_out = self._layer_stack(self._static_in)
        return graph

    def _layer_stack(self, hidden_state: torch.Tensor) -> torch.Tensor:
        for layer in range(self._layers):
            hidden_state = torch.tanh(hidden_state @ self._weights[layer])
        return hidden_state

    def step(self) -> int:
        # [1, hidden]
        hidden_state = self._embed[self._token]
        if self._graph is not None:
            self._static_in.copy_(hidden_state)
            self._graph.replay()
            hidden_state = self._static_out
        else:
            hidden_state = self._layer_stack(hidden_state)
        # [1, vocab] -> [1]
        next_token = torch.argmax(hidden_state @ self._lm_head, dim=-1)
        if "planted_sync" in self._enabled:
            # The extra blocking read the gate must catch.
            _ = float(hidden_state.norm().item())
        if "planted_sleep" in self._enabled and self._sleep_ns:
            deadline_ns = time.perf_counter_ns() + int(self._sleep_ns)
            while time.perf_counter_ns() < deadline_ns:
                pass
        if "no_readback" in self._enabled:
            self._token = next_token
            self._emitted.append(next_token)
        else:
            # The stock-engine pattern: the host needs the id to build the next step's input.
            token_id = int(next_token.item())
            self._token_ids.append(token_id)
            self._token = torch.tensor([token_id], dtype=torch.long, device=self.device)
        return 1

    def tokens(self) -> list[int]:
        """Ids emitted since the last reset (reads device-held ids now, outside timing)."""
        if self._emitted:
            self._token_ids.extend(int(t) for t in torch.cat(self._emitted).tolist())
            self._emitted = []
        return list(self._token_ids)

    def bytes_per_token(self, enabled: frozenset[str]) -> int:
        element_bytes = self._weights.element_size()
        return int((self._weights.numel() + self._lm_head.numel() + self._hidden) * element_bytes)


def make_workload(
    preset: str | None = None,
    device: str | None = None,
    seed: int = 0,
    max_steps: int | None = None,
    **options: Any,
) -> ToyWorkload:
    """Factory for `--workload bubblescope.examples.toy_workload:make_workload`.

    `max_steps` is accepted and ignored: the toy keeps no cache that could fill up.

    `preset` picks a size: "tiny" (hidden 64, 2 layers, for tests), None/"small" (hidden 512,
    8 layers, ~0.2 ms a step on one CPU core).
    """
    sizes = {"tiny": {"hidden": 64, "layers": 2, "vocab": 128}, "small": {}}
    key = preset or "small"
    if key not in sizes:
        raise ConfigError(f"toy workload has no preset {preset!r}; valid: {', '.join(sizes)}")
    return ToyWorkload(device=device, seed=seed, **{**sizes[key], **options})
