"""Oracle acceptance hits its documented mean; real acceptance is the greedy-match prefix."""

from __future__ import annotations

import pytest
import torch
from bubblescope.reference_model.spec.acceptance import (
    OracleAcceptance,
    emitted_tokens,
    greedy_accepted,
    oracle_probabilities,
)

from bubblescope.errors import ConfigError


@pytest.mark.parametrize(("mean", "block"), [(1.0, 8), (4.0, 8), (8.7, 8), (9.0, 8), (9.95, 16), (1.5, 1)])
def test_oracle_distribution_has_the_requested_mean(mean: float, block: int) -> None:
    probabilities = oracle_probabilities(mean, block)
    assert len(probabilities) == block + 1
    assert abs(sum(probabilities) - 1.0) < 1e-12
    assert min(probabilities) >= 0.0
    got = 1.0 + sum(k * p for k, p in enumerate(probabilities))
    assert abs(got - mean) < 1e-9, f"mean emitted {got} != {mean}"


def test_oracle_low_means_favour_early_rejection() -> None:
    probabilities = oracle_probabilities(3.0, 8)
    assert all(a >= b for a, b in zip(probabilities, probabilities[1:], strict=False)), probabilities


@pytest.mark.parametrize(("mean", "block"), [(0.5, 8), (9.95, 8), (3.0, 0)])
def test_impossible_oracle_settings_are_one_line_errors(mean: float, block: int) -> None:
    with pytest.raises(ConfigError):
        oracle_probabilities(mean, block)


def test_oracle_draws_match_the_mean() -> None:
    torch.manual_seed(0)
    oracle = OracleAcceptance(9.95, 16, "cpu", seed=3)
    drafted, targets = torch.zeros(1, 16, dtype=torch.long), torch.zeros(1, 17, dtype=torch.long)
    draws = torch.stack([oracle(drafted, targets) for _ in range(4000)]).double() + 1.0
    assert draws.min() >= 1 and draws.max() <= 17
    # 5 standard errors of the mean of 4000 draws
    std_err = draws.std().item() / 4000**0.5
    assert abs(draws.mean().item() - 9.95) < 5 * std_err + 1e-9, f"sample mean {draws.mean().item():.3f}"
    assert abs(oracle.expected_emitted() - 9.95) < 1e-9


def test_point_mass_oracles() -> None:
    drafted, targets = torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 5, dtype=torch.long)
    assert {int(OracleAcceptance(1.0, 4, "cpu")(drafted, targets)) for _ in range(50)} == {0}
    assert {int(OracleAcceptance(5.0, 4, "cpu")(drafted, targets)) for _ in range(50)} == {4}


@pytest.mark.parametrize(
    ("drafted", "targets", "accepted"),
    [([5, 6, 7], [5, 6, 7, 8], 3), ([5, 9, 7], [5, 6, 7, 8], 1), ([1, 6, 7], [5, 6, 7, 8], 0)],
)
def test_greedy_acceptance_and_emitted_tokens(drafted: list[int], targets: list[int], accepted: int) -> None:
    drafted_t, targets_t = torch.tensor([drafted]), torch.tensor([targets])
    got = greedy_accepted(drafted_t, targets_t)
    assert int(got) == accepted
    emitted = emitted_tokens(drafted_t, targets_t, got).tolist()
    assert emitted[: accepted + 1] == targets[: accepted + 1]
    assert emitted[accepted + 1 :] == [-1] * (len(targets) - accepted - 1)


def test_oracle_emits_drafts_then_the_targets_bonus() -> None:
    drafted, targets = torch.tensor([[11, 12, 13]]), torch.tensor([[1, 2, 3, 4]])
    assert emitted_tokens(drafted, targets, torch.tensor(2)).tolist() == [11, 12, 3, -1]


def test_seeded_oracle_restarts_its_sequence() -> None:
    oracle = OracleAcceptance(4.0, 8, "cpu", seed=5)
    drafted, targets = torch.zeros(1, 8, dtype=torch.long), torch.zeros(1, 9, dtype=torch.long)
    first = [int(oracle(drafted, targets)) for _ in range(20)]
    oracle.restart()
    assert [int(oracle(drafted, targets)) for _ in range(20)] == first
    assert len(set(first)) > 1
