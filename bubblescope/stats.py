"""Statistics for TPOT: per-token samples, bootstrap medians and intervals, Shapley values.

Everything is numpy, seeded and vectorised: a bootstrap draws all replicates as one index matrix.
Resampling is stratified by repeat (steps are resampled within their repeat), so a slow repeat cannot
vanish from a replicate and the interval keeps the run-to-run component of the noise.
"""

from __future__ import annotations

import itertools
import math
import zlib
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from bubblescope.errors import RecordError

DEFAULT_BOOTSTRAP = 2000
DEFAULT_LEVEL = 0.95
# The one headline interval of every surface (docs/intervals.md): repeats resampled, then steps in them.
INTERVAL_LABEL = "95% CI, two-level bootstrap (repeats, then steps)"
# An estimate whose interval's half-width exceeds this multiple of its size is noise, not a finding.
MAX_RELATIVE_HALF_WIDTH = 1.0


def per_token_samples_ns(
    samples_ns: Sequence[Sequence[int]], tokens_per_step: Sequence[Sequence[int]]
) -> list[np.ndarray]:
    """Turn per-step wall times into per-token time samples, one array per repeat.

    Each sample is one step's time divided by the repeat's mean tokens per step, so the median of the
    samples is median step time / mean tokens per step: the effective TPOT of speculative decoding
    (step latency / accept length), and plain median step time when every step emits one token.
    Dividing each step by its own token count instead would be biased: with accept lengths 8 and 1
    the median of (step/8, step/1) is not step time / 4.5. The accept length is held at its measured
    value, so a bootstrap over these samples carries the timing noise only; a switch leaves the accepted
    tokens unchanged, so acceptance variance is common to every configuration it is compared with.

    A step that emitted no token (a pipelined loop whose first token arrives one step late) carries
    its time into the next step that emits, so no time is dropped and nothing is divided by zero.

    Args:
        samples_ns: [repeats][steps] wall ns of each timed step.
        tokens_per_step: same shape, tokens each step emitted.
    Returns:
        list of float64 arrays, one per repeat, of ns per token for each emitting step.
    """
    if len(samples_ns) != len(tokens_per_step):
        raise RecordError("samples_ns and tokens_per_step have different numbers of repeats")
    out: list[np.ndarray] = []
    for repeat_ns, repeat_tokens in zip(samples_ns, tokens_per_step, strict=True):
        if len(repeat_ns) != len(repeat_tokens):
            raise RecordError("samples_ns and tokens_per_step have different numbers of steps")
        segments_ns: list[float] = []
        tokens_total = 0
        carried_ns = 0
        for step_ns, tokens in zip(repeat_ns, repeat_tokens, strict=True):
            carried_ns += int(step_ns)
            if tokens > 0:
                segments_ns.append(float(carried_ns))
                tokens_total += int(tokens)
                carried_ns = 0
        if segments_ns:
            mean_tokens = tokens_total / len(segments_ns)
            out.append(np.asarray(segments_ns, dtype=np.float64) / mean_tokens)
    if not out:
        raise RecordError("no timed step emitted a token; TPOT is undefined")
    return out


def stable_seed(*parts: object) -> int:
    """A seed that depends only on `parts` (not on Python's per-process hash randomisation)."""
    return zlib.crc32(repr(parts).encode("utf-8"))


def bootstrap_medians(
    per_repeat: Sequence[np.ndarray],
    *,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    hierarchical: bool = False,
) -> np.ndarray:
    """Bootstrap replicates of the pooled median.

    Args:
        per_repeat: one 1-D array of samples per repeat.
        n_boot: number of replicates B.
        seed: numpy Generator seed.
        hierarchical: False resamples steps within each repeat (every repeat kept once). True first
            resamples the repeats themselves, then steps within each drawn repeat, so the interval also
            carries the repeat-to-repeat spread (a machine that is 2% slower for a whole repeat).
    Returns:
        [B] float64 replicate medians.
    """
    rng = np.random.default_rng(seed)
    if hierarchical and len(per_repeat) > 1:
        return _two_level_medians(per_repeat, n_boot, rng)
    blocks = []
    for samples in per_repeat:
        # [B, n_r]: index matrix drawn at once; the whole bootstrap is one fancy-index per repeat.
        picks = rng.integers(0, len(samples), size=(n_boot, len(samples)))
        blocks.append(samples[picks])
    return np.median(np.concatenate(blocks, axis=1), axis=1)


def _two_level_medians(per_repeat: Sequence[np.ndarray], n_boot: int, rng: np.random.Generator) -> np.ndarray:
    repeats = len(per_repeat)
    lengths = np.array([len(r) for r in per_repeat])
    width = int(lengths.max())
    # [R, width] padded with NaN so repeats of different lengths share one array.
    padded = np.full((repeats, width), np.nan)
    for index, samples in enumerate(per_repeat):
        padded[index, : len(samples)] = samples
    # [B, R] drawn repeats, then [B, R, width] steps drawn within each drawn repeat's own length.
    chosen = rng.integers(0, repeats, size=(n_boot, repeats))
    steps = np.floor(rng.random((n_boot, repeats, width)) * lengths[chosen][..., None]).astype(np.int64)
    values = padded[chosen[..., None], steps]
    # Positions past a drawn repeat's length stay NaN and drop out of the median.
    valid = np.arange(width)[None, None, :] < lengths[chosen][..., None]
    values = np.where(valid, values, np.nan).reshape(n_boot, repeats * width)
    return np.nanmedian(values, axis=1)


def interval(replicates: np.ndarray, level: float = DEFAULT_LEVEL) -> tuple[float, float]:
    """Percentile interval of bootstrap replicates."""
    tail = (1.0 - level) / 2.0 * 100.0
    lo, hi = np.percentile(replicates, [tail, 100.0 - tail])
    return float(lo), float(hi)


def median_with_ci(
    per_repeat: Sequence[np.ndarray],
    *,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
    hierarchical: bool = True,
) -> tuple[float, float, float]:
    """Pooled median of all samples and its bootstrap interval: (est, lo, hi).

    The interval is two-level by default (repeats, then steps within them): the estimator `gate` and
    `ablate` use, so a run's TPOT shows the same interval on every surface.
    """
    est = float(np.median(np.concatenate(list(per_repeat))))
    lo, hi = interval(
        bootstrap_medians(per_repeat, n_boot=n_boot, seed=seed, hierarchical=hierarchical), level
    )
    return est, lo, hi


def is_resolved(
    est: float, lo: float, hi: float, max_relative_half_width: float = MAX_RELATIVE_HALF_WIDTH
) -> bool:
    """True when an effect stands out from its noise: the interval excludes zero and is not wider than
    the effect (half-width <= `max_relative_half_width` x |est|). A CPU saving of [+56, +2002] ms around
    500 ms excludes zero but is not resolved."""
    values = (est, lo, hi)
    if not all(isinstance(v, int | float) and math.isfinite(v) for v in values):
        return False
    if lo <= 0.0 <= hi:
        return False
    return (hi - lo) / 2.0 <= max_relative_half_width * abs(est)


def ratio_of_medians_ci(
    baseline: Sequence[np.ndarray],
    current: Sequence[np.ndarray],
    *,
    n_boot: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
    level: float = DEFAULT_LEVEL,
    hierarchical: bool = False,
) -> tuple[float, float, float]:
    """current median / baseline median, with an interval from independent bootstraps of both."""
    base_est = float(np.median(np.concatenate(list(baseline))))
    cur_est = float(np.median(np.concatenate(list(current))))
    base_reps = bootstrap_medians(baseline, n_boot=n_boot, seed=seed, hierarchical=hierarchical)
    cur_reps = bootstrap_medians(current, n_boot=n_boot, seed=seed + 1, hierarchical=hierarchical)
    lo, hi = interval(cur_reps / base_reps, level)
    return cur_est / base_est, lo, hi


def estimate(point: float, replicates: np.ndarray, level: float = DEFAULT_LEVEL) -> dict[str, float]:
    """The {"est", "lo", "hi"} dict the ablation schema uses."""
    lo, hi = interval(replicates, level)
    return {"est": float(point), "lo": lo, "hi": hi}


def shapley_exact(
    players: Sequence[str], value: Callable[[frozenset[str]], np.ndarray | float]
) -> dict[str, np.ndarray]:
    """Exact Shapley values over all 2^n coalitions.

    Args:
        players: the n switch names.
        value: coalition -> value (a float, or a [B] array of bootstrap replicates; arrays broadcast).
    Returns:
        name -> Shapley value (same shape as what `value` returns).
    """
    n = len(players)
    result: dict[str, np.ndarray] = {}
    for player in players:
        others = [p for p in players if p != player]
        total: np.ndarray | float = 0.0
        for size in range(n):
            weight = math.factorial(size) * math.factorial(n - size - 1) / math.factorial(n)
            for coalition in itertools.combinations(others, size):
                base = frozenset(coalition)
                total = total + weight * (np.asarray(value(base | {player})) - np.asarray(value(base)))
        result[player] = np.asarray(total)
    return result


def sample_permutations(
    players: Sequence[str], n_perm: int, *, first: Sequence[str] | None = None, seed: int = 0
) -> list[tuple[str, ...]]:
    """`n_perm` orderings of `players` (the given `first` one included), for sampled Shapley."""
    rng = np.random.default_rng(seed)
    perms: list[tuple[str, ...]] = [tuple(first)] if first else []
    while len(perms) < n_perm:
        perms.append(tuple(players[i] for i in rng.permutation(len(players))))
    return perms


def shapley_from_permutations(
    permutations: Sequence[Sequence[str]], value: Callable[[frozenset[str]], np.ndarray | float]
) -> dict[str, np.ndarray]:
    """Shapley estimate: each player's marginal contribution averaged over the given orderings."""
    sums: dict[str, np.ndarray | float] = {p: 0.0 for p in permutations[0]}
    for perm in permutations:
        coalition: frozenset[str] = frozenset()
        before = np.asarray(value(coalition))
        for player in perm:
            coalition = coalition | {player}
            after = np.asarray(value(coalition))
            sums[player] = sums[player] + (after - before)
            before = after
    return {p: np.asarray(total) / len(permutations) for p, total in sums.items()}


def prefix_coalitions(permutations: Sequence[Sequence[str]]) -> set[frozenset[str]]:
    """Every coalition a permutation-sampled Shapley estimate evaluates (all prefixes)."""
    coalitions = {frozenset()}
    for perm in permutations:
        for size in range(1, len(perm) + 1):
            coalitions.add(frozenset(perm[:size]))
    return coalitions


def as_arrays(per_repeat: Mapping[str, Sequence[Sequence[float]]]) -> dict[str, list[np.ndarray]]:
    """JSON lists -> float64 arrays, per key."""
    return {key: [np.asarray(r, dtype=np.float64) for r in reps] for key, reps in per_repeat.items()}
