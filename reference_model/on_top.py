"""The fast-path workload with the earlier switches always on: an ablation of new switches on top of them.

`bubblescope ablate --toggles a,b` measures a baseline with every switch off; on ling3 that is the
readback-bound loop, in which a kernel-level saving of a few percent is lost in the host's noise
(RESULTS.md: each switch *alone* measured within the noise). Issue 17's switches are meant to be
judged against today's all-on step, so this factory fixes the earlier switches on and offers only the
new ones: `--workload bubblescope.reference_model.on_top:make_workload --toggles fast_topk,early_shared`
has the old all-on step as its baseline and the new all-on as its all-on.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from bubblescope.errors import ConfigError
from bubblescope.workload import SwitchInfo

from .spec.workload import SPEC_SWITCHES, make_spec_workload
from .workload import FAST_SWITCHES
from .workload import make_workload as make_reference_workload

# Issue 17's switches in the rounds they were added, then issue 27's (round 3). `make_workload` studies
# the first round with every pre-issue-17 switch held on (later rounds held OFF: its baseline stays the
# old all-on step); `make_round2_workload` and `make_round3_workload` study their round with every other
# fast-path switch held on.
STUDIED = ("fast_topk", "early_shared")
ROUND2 = ("deep_experts", "fused_mla_glue")
ROUND3 = ("norm_epilogue", "routing_in_experts")
# Issue 27's second session (round 4): its switches are appended here as they land. Its baseline is the
# fastest round-3 step, every earlier switch on but the ones measured slower (ROUND4_HELD_OFF).
ROUND4: tuple[str, ...] = ("kda_norm_in_oproj", "tma_experts")
ROUND4_HELD_OFF = ("norm_epilogue",)
# Every fast-path switch measured slower in the step on the H200 (RESULTS.md: norm_epilogue in round 3;
# kda_norm_in_oproj in round 4's ablation of 2026-12-03 15:55 UTC, where gemv_prefetch, measured slower
# too, was then removed: RESULTS.md, issue 27 round 4): the fastest configuration is every switch but
# these (bench_spec_vs_decode's non-speculative side, README).
MEASURED_SLOWER = ("norm_epilogue", "kda_norm_in_oproj")
FIXED_ON = frozenset(name for name in FAST_SWITCHES if name not in STUDIED + ROUND2 + ROUND3 + ROUND4)
ROUND2_FIXED_ON = frozenset(name for name in FAST_SWITCHES if name not in ROUND2 + ROUND3 + ROUND4)
ROUND3_FIXED_ON = frozenset(name for name in FAST_SWITCHES if name not in ROUND3 + ROUND4)
ROUND4_FIXED_ON = frozenset(name for name in FAST_SWITCHES if name not in ROUND4 + ROUND4_HELD_OFF)
# The verify-side switches of issue 17 (the first session's expert_union included: it had no ablation
# sample), studied on DSpark at the oracle accept length with every other speculative switch on.
SPEC_STUDIED = ("expert_union", "deep_experts", "verify_norm_kernel")
# Issue 27's second session (round 4) on the verify: studied with every earlier speculative switch on;
# the round-2 study above holds them OFF (its baseline stays what it measured).
SPEC_ROUND4 = ("verify_gated_norm", "verify_fused_in_proj")
SPEC_FIXED_ON = frozenset(name for name in SPEC_SWITCHES if name not in SPEC_STUDIED + SPEC_ROUND4)
SPEC_ROUND4_FIXED_ON = frozenset(name for name in SPEC_SWITCHES if name not in SPEC_ROUND4)
# The speculative setting: a DSpark block of 9 drafts, oracle mean of 9.95 tokens per verify.
SPEC_BLOCK = 9
SPEC_ACCEPT_LEN = 9.95
# Verifies the MLA cache holds: an ablation runs ~50 per configuration and prefills again for each.
SPEC_MAX_STEPS = 256


class OnTopWorkload:
    """A fast-path ling3 workload whose `prepare(enabled)` runs `enabled | FIXED_ON`.

    Args:
        inner: the reference workload (the fast path: the fixed switches need it).
        studied: the switches offered to the ablation.
        fixed_on: the switches always on (neither studied nor fixed: always off).

    Everything but the switch handling is the inner workload's (attribute access is forwarded).
    """

    def __init__(
        self, inner: Any, studied: tuple[str, ...] = STUDIED, fixed_on: frozenset[str] = FIXED_ON
    ) -> None:
        self.inner = inner
        self.studied = studied
        self.fixed_on = fixed_on
        self.name = f"{inner.name}-on-top"

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.inner, attribute)

    def switches(self) -> list[SwitchInfo]:
        """Only the studied switches: the fixed ones are not the ablation's to turn off.

        On the CPU under TRITON_INTERPRET=1 the studied switches are offered as usable: every one is a
        kernel the interpreter runs (so `ablate --preset debug` smoke-tests the GPU command; its
        timings say nothing about a GPU). Without the interpreter the fast path does not build at all.
        """
        infos = [info for info in self.inner.switches() if info.name in self.studied]
        if self._interpreted():
            return [replace(info, needs_gpu=False) for info in infos]
        return infos

    def _interpreted(self) -> bool:
        from bubblescope.kernels._pdl import is_interpreting

        return not str(getattr(self.inner, "device", "cpu")).startswith("cuda") and is_interpreting()

    def prepare(self, enabled: frozenset[str]) -> None:
        """Rebuild the step for the studied switches in `enabled` plus every fixed one.

        Raises:
            ConfigError: a switch that is not studied here (the fixed ones are always on).
        """
        extra = sorted(set(enabled) - set(self.studied))
        if extra:
            raise ConfigError(
                f"switch {', '.join(extra)} is fixed by this workload; studied: {', '.join(self.studied)}"
            )
        self.inner.prepare(frozenset(enabled) | self.fixed_on)

    def step(self) -> int:
        return self.inner.step()

    def bytes_per_token(self, enabled: frozenset[str]) -> int:
        return self.inner.bytes_per_token(frozenset(enabled) | self.fixed_on)

    def kernel_bytes(self, enabled: frozenset[str]) -> list[dict[str, object]] | None:
        rules = getattr(self.inner, "kernel_bytes", None)
        return rules(frozenset(enabled) | self.fixed_on) if callable(rules) else None

    def describe(self) -> dict[str, object]:
        return {**self.inner.describe(), "fixed_on": sorted(self.fixed_on), "studied": list(self.studied)}


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


def make_round2_workload(
    preset: str = "debug", seed: int = 0, max_steps: int = 4096, **options: Any
) -> OnTopWorkload:
    """As `make_workload`, studying issue 17's second round (ROUND2) with every other fast-path switch,
    the first round's too, held on: `--workload bubblescope.reference_model.on_top:make_round2_workload`."""
    options["path"] = "fast"
    inner = make_reference_workload(preset, seed=seed, max_steps=max_steps, **options)
    return OnTopWorkload(inner, studied=ROUND2, fixed_on=ROUND2_FIXED_ON)


def make_round3_workload(
    preset: str = "debug", seed: int = 0, max_steps: int = 4096, **options: Any
) -> OnTopWorkload:
    """As `make_workload`, studying issue 27's switches (ROUND3) with every other fast-path switch, the
    first two rounds' too, held on: `--workload bubblescope.reference_model.on_top:make_round3_workload`."""
    options["path"] = "fast"
    inner = make_reference_workload(preset, seed=seed, max_steps=max_steps, **options)
    return OnTopWorkload(inner, studied=ROUND3, fixed_on=ROUND3_FIXED_ON)


def make_round4_workload(
    preset: str = "debug", seed: int = 0, max_steps: int = 4096, **options: Any
) -> OnTopWorkload:
    """As `make_workload`, studying round 4's switches (ROUND4) on top of the fastest round-3 step: every
    other fast-path switch held on but ROUND4_HELD_OFF (measured slower), which is held off:
    `--workload bubblescope.reference_model.on_top:make_round4_workload`."""
    options["path"] = "fast"
    inner = make_reference_workload(preset, seed=seed, max_steps=max_steps, **options)
    return OnTopWorkload(inner, studied=ROUND4, fixed_on=ROUND4_FIXED_ON)


def make_spec_round2_workload(
    preset: str = "debug", seed: int = 0, max_steps: int = SPEC_MAX_STEPS, **options: Any
) -> OnTopWorkload:
    """DSpark (block SPEC_BLOCK, oracle accept length SPEC_ACCEPT_LEN) studying SPEC_STUDIED with every other
    speculative switch held on: `--workload bubblescope.reference_model.on_top:make_spec_round2_workload`
    (`--spec`/`--block`/`--accept-len` do not combine with `--workload`, hence fixed here)."""
    inner = make_spec_workload(
        preset,
        options.get("device"),
        spec="dspark",
        block=SPEC_BLOCK,
        accept_len=SPEC_ACCEPT_LEN,
        seed=seed,
        max_steps=min(max_steps, SPEC_MAX_STEPS),
    )
    return OnTopWorkload(inner, studied=SPEC_STUDIED, fixed_on=SPEC_FIXED_ON)


def make_spec_round4_workload(
    preset: str = "debug", seed: int = 0, max_steps: int = SPEC_MAX_STEPS, **options: Any
) -> OnTopWorkload:
    """As `make_spec_round2_workload`, studying round 4's verify switches (SPEC_ROUND4) with every other
    speculative switch held on: `--workload bubblescope.reference_model.on_top:make_spec_round4_workload`."""
    inner = make_spec_workload(
        preset,
        options.get("device"),
        spec="dspark",
        block=SPEC_BLOCK,
        accept_len=SPEC_ACCEPT_LEN,
        seed=seed,
        max_steps=min(max_steps, SPEC_MAX_STEPS),
    )
    return OnTopWorkload(inner, studied=SPEC_ROUND4, fixed_on=SPEC_ROUND4_FIXED_ON)
