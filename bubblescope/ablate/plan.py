"""Which switch configurations an ablation measures, deduplicated.

The issue's plan: the baseline, each switch alone, all on, all on minus each, and the cumulative
sequence in `--order`. Shapley values add more:
  * n <= max_exact (default 6): every one of the 2^n subsets is measured and Shapley is exact
    (64 configs at n = 6; each extra switch doubles the count, so beyond that it is sampled).
  * n > max_exact: `permutations` orderings are sampled (the `--order` one first) and every prefix
    of each is measured; Shapley is the mean marginal contribution over those orderings
    (`shapley_method = "sampled:<n>"`). Its interval covers timing noise only, not the error of
    sampling orderings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bubblescope.errors import ConfigError
from bubblescope.stats import prefix_coalitions, sample_permutations, stable_seed

DEFAULT_MAX_EXACT = 6
DEFAULT_PERMUTATIONS = 8


@dataclass
class PlannedConfig:
    """One configuration to measure, and why (its roles)."""

    key: str
    enabled: frozenset[str]
    roles: list[str] = field(default_factory=list)


@dataclass
class AblationPlan:
    toggles: list[str]
    order: list[str]
    configs: list[PlannedConfig]
    shapley_method: str
    permutations: list[tuple[str, ...]]

    def by_set(self) -> dict[frozenset[str], PlannedConfig]:
        return {c.enabled: c for c in self.configs}


def config_key(enabled: frozenset[str]) -> str:
    """File-safe key: `base` for nothing on, else the sorted names joined by `+`."""
    return "base" if not enabled else "+".join(sorted(enabled))


def plan_ablation(
    toggles: list[str],
    order: list[str] | None = None,
    *,
    max_exact: int = DEFAULT_MAX_EXACT,
    permutations: int = DEFAULT_PERMUTATIONS,
) -> AblationPlan:
    """Build the deduplicated list of configurations, each labelled with its roles.

    Args:
        toggles: the switches under study (at least one, no duplicates).
        order: the cumulative order; defaults to `toggles`. Must be a permutation of it.
        max_exact: largest n for which all 2^n subsets are measured.
        permutations: sampled orderings when n > max_exact.
    """
    if not toggles:
        raise ConfigError("ablate needs at least one switch (--toggles a,b or --all)")
    if len(set(toggles)) != len(toggles):
        raise ConfigError("--toggles lists a switch twice")
    order = list(order) if order else list(toggles)
    if sorted(order) != sorted(toggles):
        raise ConfigError(f"--order must list exactly the toggled switches: {', '.join(toggles)}")
    wanted: dict[frozenset[str], PlannedConfig] = {}

    def add(enabled: frozenset[str], role: str) -> None:
        config = wanted.setdefault(enabled, PlannedConfig(config_key(enabled), enabled))
        if role not in config.roles:
            config.roles.append(role)

    everything = frozenset(toggles)
    add(frozenset(), "baseline")
    for name in toggles:
        add(frozenset({name}), f"alone:{name}")
    add(everything, "all_on")
    for name in toggles:
        add(everything - {name}, f"all_minus:{name}")
    for size in range(1, len(order) + 1):
        add(frozenset(order[:size]), f"cumulative:{size}")
    if len(toggles) <= max_exact:
        method, perms = "exact", []
        for mask in range(1 << len(toggles)):
            add(frozenset(t for i, t in enumerate(toggles) if mask >> i & 1), "shapley")
    else:
        perms = sample_permutations(toggles, permutations, first=order, seed=stable_seed(tuple(toggles)))
        method = f"sampled:{len(perms)}"
        for coalition in sorted(prefix_coalitions(perms), key=len):
            add(coalition, "shapley")
    return AblationPlan(list(toggles), order, list(wanted.values()), method, perms)
