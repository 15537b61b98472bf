"""Bootstrap intervals, per-token samples and Shapley values on data with a known answer."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from bubblescope.errors import RecordError
from bubblescope.stats import (
    bootstrap_medians,
    interval,
    median_with_ci,
    per_token_samples_ns,
    prefix_coalitions,
    ratio_of_medians_ci,
    sample_permutations,
    shapley_exact,
    shapley_from_permutations,
)


def test_bootstrap_interval_covers_the_true_median_at_about_the_nominal_rate() -> None:
    rng = np.random.default_rng(123)
    true_median = 1.0
    covered = 0
    trials = 200
    for trial in range(trials):
        # Lognormal with median exactly 1.0; 3 repeats x 40 steps.
        per_repeat = [rng.lognormal(0.0, 0.2, 40) for _ in range(3)]
        _est, lo, hi = median_with_ci(per_repeat, n_boot=400, seed=trial)
        covered += lo <= true_median <= hi
    rate = covered / trials
    assert 0.88 <= rate <= 0.995, f"95% interval covered the truth in {rate:.1%} of {trials} trials"


def test_bootstrap_is_seeded_and_vectorised_shape() -> None:
    per_repeat = [np.arange(10.0), np.arange(5.0) + 100]
    first = bootstrap_medians(per_repeat, n_boot=50, seed=7)
    assert first.shape == (50,)
    np.testing.assert_array_equal(first, bootstrap_medians(per_repeat, n_boot=50, seed=7))
    assert not np.array_equal(first, bootstrap_medians(per_repeat, n_boot=50, seed=8))


def test_ratio_of_medians_interval_covers_the_true_ratio() -> None:
    rng = np.random.default_rng(5)
    covered, trials = 0, 100
    for trial in range(trials):
        base = [rng.lognormal(0.0, 0.05, 100) for _ in range(3)]
        slower = [rng.lognormal(np.log(1.2), 0.05, 100) for _ in range(3)]
        est, lo, hi = ratio_of_medians_ci(base, slower, n_boot=300, seed=trial)
        covered += lo <= 1.2 <= hi
        assert lo <= est <= hi
        assert lo > 1.1, "a 20% slowdown with 5% noise must be clearly resolved"
    assert covered / trials >= 0.85, f"ratio interval covered the truth in {covered}/{trials} trials"


def test_per_token_samples_carry_zero_token_steps_forward() -> None:
    per_repeat = per_token_samples_ns([[100, 50, 60, 40]], [[0, 1, 1, 1]])
    # step 0 (no token) carries into step 1: 150; then 60 and 40, one token each.
    np.testing.assert_allclose(per_repeat[0], [150.0, 60.0, 40.0])


def test_speculative_tpot_is_step_time_over_mean_accept_length() -> None:
    """Accept lengths 8, 1, 1, 8, 1 at a constant 17 ms step: effective TPOT is 17 / 3.8 ms.

    The median of each step's own time/tokens would say 17 ms (three of five steps emit one token)."""
    tokens = [[8, 1, 1, 8, 1], [0, 8, 1, 1, 8, 1]]
    samples = [[17_000_000] * 5, [5_000_000, 12_000_000, 17_000_000, 17_000_000, 17_000_000, 17_000_000]]
    per_repeat = per_token_samples_ns(samples, tokens)
    for values in per_repeat:
        np.testing.assert_allclose(np.median(values), 17e6 / 3.8)
    # The samples' mean is the exact ratio of sums: wall time / tokens.
    np.testing.assert_allclose(per_repeat[0].mean(), sum(samples[0]) / sum(tokens[0]))
    np.testing.assert_allclose(per_repeat[1].mean(), sum(samples[1]) / sum(tokens[1]))


def test_per_token_samples_reject_runs_without_tokens() -> None:
    with pytest.raises(RecordError):
        per_token_samples_ns([[100, 100]], [[0, 0]])
    with pytest.raises(RecordError):
        per_token_samples_ns([[100]], [[1], [1]])


def _interacting_game(coalition: frozenset[str]) -> float:
    """a:1, b:2, c:3 additive, plus 4 more only when a and b are both on (split 2/2 by Shapley)."""
    value = {"a": 1.0, "b": 2.0, "c": 3.0}
    total = sum(value[p] for p in coalition)
    return total + (4.0 if {"a", "b"} <= coalition else 0.0)


def test_shapley_exact_on_additive_and_interacting_game() -> None:
    shapley = shapley_exact(["a", "b", "c"], _interacting_game)
    assert shapley["a"] == pytest.approx(3.0)
    assert shapley["b"] == pytest.approx(4.0)
    assert shapley["c"] == pytest.approx(3.0)
    # Efficiency: the values sum to v(all) - v(empty).
    assert sum(float(v) for v in shapley.values()) == pytest.approx(_interacting_game(frozenset("abc")))


def test_shapley_broadcasts_over_bootstrap_replicates() -> None:
    def game(coalition: frozenset[str]) -> np.ndarray:
        return np.array([_interacting_game(coalition), 2 * _interacting_game(coalition)])

    shapley = shapley_exact(["a", "b", "c"], game)
    np.testing.assert_allclose(shapley["b"], [4.0, 8.0])


def test_all_permutations_reproduce_exact_shapley() -> None:
    players = ["a", "b", "c"]
    sampled = shapley_from_permutations(list(itertools.permutations(players)), _interacting_game)
    exact = shapley_exact(players, _interacting_game)
    for name in players:
        assert float(sampled[name]) == pytest.approx(float(exact[name]))


def test_sampled_permutations_start_with_the_given_order_and_cover_prefixes() -> None:
    perms = sample_permutations(list("abcdefg"), 5, first=list("gfedcba"), seed=1)
    assert perms[0] == tuple("gfedcba") and len(perms) == 5
    assert all(sorted(p) == list("abcdefg") for p in perms)
    coalitions = prefix_coalitions(perms)
    assert frozenset() in coalitions and frozenset("g") in coalitions and frozenset("abcdefg") in coalitions


def test_two_level_bootstrap_carries_repeat_to_repeat_spread() -> None:
    rng = np.random.default_rng(11)
    # Each repeat runs on a machine 0-4% slower than the last; within a repeat noise is tiny.
    per_repeat = [rng.normal(1.0 + 0.02 * r, 0.002, 80) for r in range(3)]
    steps_lo, steps_hi = interval(bootstrap_medians(per_repeat, n_boot=500, seed=1))
    two_lo, two_hi = interval(bootstrap_medians(per_repeat, n_boot=500, seed=1, hierarchical=True))
    assert two_hi - two_lo > 4 * (steps_hi - steps_lo)
    assert two_lo < 1.005 and two_hi > 1.035


def test_two_level_bootstrap_handles_repeats_of_different_lengths() -> None:
    per_repeat = [np.full(10, 1.0), np.full(3, 5.0)]
    replicates = bootstrap_medians(per_repeat, n_boot=200, seed=0, hierarchical=True)
    assert replicates.shape == (200,) and not np.isnan(replicates).any()
    assert set(np.unique(replicates)) <= {1.0, 3.0, 5.0}


def test_headline_interval_is_the_two_level_one() -> None:
    from bubblescope.stats import interval

    rng = np.random.default_rng(5)
    per_repeat = [rng.lognormal(0.0, 0.1, 30) + shift for shift in (0.0, 0.05, 0.1)]
    _est, lo, hi = median_with_ci(per_repeat, n_boot=300, seed=3)
    assert (lo, hi) == interval(bootstrap_medians(per_repeat, n_boot=300, seed=3, hierarchical=True))


def test_noise_is_not_a_resolved_effect() -> None:
    from bubblescope.stats import is_resolved

    assert is_resolved(3.52, 3.46, 3.58)
    assert not is_resolved(0.2, -0.1, 0.5)  # holds zero
    assert not is_resolved(500.0, 56.0, 2002.0)  # excludes zero, but far wider than the effect
    assert not is_resolved(float("nan"), 0.0, 1.0)
