"""The fast-path workload with the earlier switches always on: an ablation of new switches on top of them.

`bubblescope ablate --toggles a,b` measures a baseline with every switch off; on ling3 that is the
readback-bound loop, in which a kernel-level saving of a few percent is lost in the host's noise
(RESULTS.md: each switch *alone* measured within the noise). Issue 17's switches are meant to be
judged against today's all-on step, so this factory fixes the earlier switches on and offers only the
new ones: `--workload bubblescope.reference_model.on_top:make_workload --toggles fast_topk,early_shared`
has the old all-on step as its baseline and the new all-on as its all-on.
"""

from __future__ import annotations

from typing import Any

from bubblescope.errors import ConfigError
from bubblescope.workload import SwitchInfo

from .workload import FAST_SWITCHES
from .workload import make_workload as make_reference_workload

# The switches issue 17 added; every other fast-path switch is held on.
STUDIED = ("fast_topk", "early_shared")
FIXED_ON = frozenset(name for name in FAST_SWITCHES if name not in STUDIED)


class OnTopWorkload:
    """A fast-path ling3 workload whose `prepare(enabled)` runs `enabled | FIXED_ON`.

    Args:
        inner: the reference workload (the fast path: the fixed switches need it).

    Everything but the switch handling is the inner workload's (attribute access is forwarded).
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = f"{inner.name}-on-top"

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.inner, attribute)

    def switches(self) -> list[SwitchInfo]:
        """Only the studied switches: the fixed ones are not the ablation's to turn off."""
        return [info for info in self.inner.switches() if info.name in STUDIED]

    def prepare(self, enabled: frozenset[str]) -> None:
        """Rebuild the step for the studied switches in `enabled` plus every fixed one.

        Raises:
            ConfigError: a switch that is not studied here (the fixed ones are always on).
        """
        extra = sorted(set(enabled) - set(STUDIED))
        if extra:
            raise ConfigError(
                f"switch {', '.join(extra)} is fixed on by this workload; studied: {', '.join(STUDIED)}"
            )
        self.inner.prepare(frozenset(enabled) | FIXED_ON)

    def step(self) -> int:
        return self.inner.step()

    def bytes_per_token(self, enabled: frozenset[str]) -> int:
        return self.inner.bytes_per_token(frozenset(enabled) | FIXED_ON)

    def describe(self) -> dict[str, object]:
        return {**self.inner.describe(), "fixed_on": sorted(FIXED_ON), "studied": list(STUDIED)}


def make_workload(
    preset: str = "debug", seed: int = 0, max_steps: int = 4096, **options: Any
) -> OnTopWorkload:
    """The fast-path ling3 workload of `preset` with the pre-issue-17 switches fixed on.

    Args: as reference_model.workload.make_workload (path is always "fast").

    Raises:
        ConfigError: as the reference factory (e.g. no CUDA device and no TRITON_INTERPRET=1).
    """
    options["path"] = "fast"
    return OnTopWorkload(make_reference_workload(preset, seed=seed, max_steps=max_steps, **options))
