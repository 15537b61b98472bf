"""The ablation plan: the issue's configurations, deduplicated, with exact or sampled Shapley subsets."""

from __future__ import annotations

import pytest

from bubblescope.ablate.plan import config_key, plan_ablation
from bubblescope.errors import ConfigError


def test_plan_for_three_switches_is_every_subset_once() -> None:
    plan = plan_ablation(["a", "b", "c"], ["c", "a", "b"])
    sets = [c.enabled for c in plan.configs]
    assert len(sets) == len(set(sets)) == 8 and plan.shapley_method == "exact"
    by_set = plan.by_set()
    assert "baseline" in by_set[frozenset()].roles
    assert {"alone:a"} <= set(by_set[frozenset("a")].roles)
    assert {"all_on", "cumulative:3"} <= set(by_set[frozenset("abc")].roles)
    assert "all_minus:c" in by_set[frozenset("ab")].roles
    assert {"cumulative:2", "all_minus:b"} <= set(by_set[frozenset("ca")].roles)
    assert config_key(frozenset("ba")) == "a+b" and config_key(frozenset()) == "base"


def test_plan_without_shapley_subsets_has_the_issue_configs_only() -> None:
    plan = plan_ablation(list("abcdefg"), max_exact=0, permutations=1)
    # baseline, 7 alone, all on, 7 all-minus, 4 new cumulative prefixes (sizes 2..5; size 6 is
    # all-minus-g): 20.
    assert len(plan.configs) == 20 and plan.shapley_method == "sampled:1"


def test_plan_beyond_max_exact_samples_orderings() -> None:
    plan = plan_ablation(list("abcdefg"), permutations=4)
    assert plan.shapley_method == "sampled:4" and plan.permutations[0] == tuple("abcdefg")
    sets = {c.enabled for c in plan.configs}
    for perm in plan.permutations:
        assert all(frozenset(perm[:k]) in sets for k in range(len(perm) + 1))
    assert len(sets) < 2**7


@pytest.mark.parametrize(
    ("toggles", "order"), [([], None), (["a", "a"], None), (["a", "b"], ["a"]), (["a"], ["b"])]
)
def test_plan_rejects_bad_input(toggles, order) -> None:
    with pytest.raises(ConfigError):
        plan_ablation(toggles, order)
