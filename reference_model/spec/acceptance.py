"""How many drafted tokens a verify accepts: real (greedy match) or an oracle with a chosen mean.

Both decide on the device and return the count as a 0-d int64 tensor, so nothing reaches the host.

Oracle distribution (why: random weights accept almost nothing, yet rollback, commit and the timing
of a verify that accepts ~9.95 tokens must run for real). With a block of B drafted tokens the
number of accepted drafts a lies in 0..B and a verify emits L = a + 1 tokens (the bonus token
included), so the mean emitted per verify m lies in [1, B + 1]. We draw a from a truncated geometric

    P(a = k) = r^k / sum_{j=0..B} r^j,   k = 0..B,

whose ratio r > 0 is solved by bisection on log r so that E[a] = m - 1 (E[a] is increasing in r:
r < 1 favours early rejection like a real draft, r = 1 is uniform, r > 1 piles mass on full
acceptance, which high targets such as 9.95 of 10 need). m = 1 and m = B + 1 are the point masses
a = 0 and a = B. Each draw reads a pre-drawn uniform on the device and does a `searchsorted` in the CDF.
"""

from __future__ import annotations

import math

import torch

from bubblescope.errors import ConfigError

_BISECTION_STEPS = 200


def _mean_accepted(log_ratio: float, block: int) -> float:
    """E[a] of the truncated geometric with ratio exp(log_ratio) over 0..block (computed stably)."""
    logs = [k * log_ratio for k in range(block + 1)]
    top = max(logs)
    weights = [math.exp(value - top) for value in logs]
    return sum(k * w for k, w in enumerate(weights)) / sum(weights)


def oracle_probabilities(mean_emitted: float, block: int) -> list[float]:
    """P(a = k) for k = 0..block such that E[a + 1] = mean_emitted (module docstring).

    Raises:
        ConfigError: block < 1, or mean_emitted outside [1, block + 1].
    """
    if block < 1:
        raise ConfigError(f"speculative block must be >= 1 drafted token, got {block}")
    if not 1.0 <= mean_emitted <= block + 1:
        raise ConfigError(
            f"--accept-len {mean_emitted} is impossible with block {block}: a verify emits 1..{block + 1} "
            f"tokens; use a block of at least {max(1, math.ceil(mean_emitted - 1))}"
        )
    target = mean_emitted - 1.0
    if target <= 0.0:
        return [1.0] + [0.0] * block
    if target >= block:
        return [0.0] * block + [1.0]
    low, high = -60.0, 60.0
    for _ in range(_BISECTION_STEPS):
        middle = 0.5 * (low + high)
        if _mean_accepted(middle, block) < target:
            low = middle
        else:
            high = middle
    log_ratio = 0.5 * (low + high)
    logs = [k * log_ratio for k in range(block + 1)]
    top = max(logs)
    weights = [math.exp(value - top) for value in logs]
    total = sum(weights)
    return [w / total for w in weights]


class OracleAcceptance:
    """Draws the accepted draft count on the device from the truncated geometric above.

    The uniforms are drawn once (seeded, on the host) into a device ring of DRAWS entries and read
    through a device counter, so a draw is graph-capturable, costs no generator state, and
    `restart()` replays the same sequence (every switch setting of a benchmark sees the same
    accepted lengths).

    Args:
        mean_emitted: target mean tokens emitted per verify (accepted drafts + bonus), e.g. 9.95.
        block: drafted tokens per verify (B).
        device: where the CDF, the uniforms and the counter live.
        seed: seed of the uniforms.
    """

    DRAWS = 8192

    def __init__(self, mean_emitted: float, block: int, device: torch.device | str, seed: int = 0) -> None:
        self.mean_emitted = float(mean_emitted)
        self.block = block
        self.probabilities = oracle_probabilities(mean_emitted, block)
        cumulative = torch.tensor(self.probabilities, dtype=torch.float64).cumsum(0)
        # [B + 1] CDF; the last entry forced to 1 so a draw never falls past it.
        cumulative[-1] = 1.0
        self.cdf = cumulative.to(device=device, dtype=torch.float64)
        generator = torch.Generator().manual_seed(seed)
        # [DRAWS] uniforms in [0, 1)
        self.uniforms = torch.rand(self.DRAWS, generator=generator, dtype=torch.float64).to(device)
        self.counter = torch.zeros((), dtype=torch.long, device=device)

    def restart(self) -> None:
        """Start the draw sequence over."""
        self.counter.zero_()

    def expected_emitted(self) -> float:
        """The exact mean of a + 1 under the solved distribution (equals mean_emitted up to bisection)."""
        return 1.0 + sum(k * p for k, p in enumerate(self.probabilities))

    def __call__(self, drafted: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """drafted [1, B], targets [1, B + 1] (ignored) -> accepted drafts a, 0-d int64 on the device."""
        draw = self.uniforms.index_select(0, (self.counter % self.DRAWS).view(1))
        self.counter += 1
        return torch.searchsorted(self.cdf, draw, right=True).clamp_max(self.block)[0]


def greedy_accepted(drafted: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Real acceptance: the longest prefix of drafts equal to the target's greedy tokens.

    Args:
        drafted: [1, B] drafted tokens d_1..d_B (verify input positions 1..B).
        targets: [1, B + 1] the target's argmax at verify positions 0..B (y_i predicts position i + 1).

    Returns:
        0-d int64 a in 0..B: d_1..d_a equal y_0..y_{a-1} and d_{a+1} does not.
    """
    matches = (drafted[0] == targets[0, :-1]).to(torch.int64)
    return matches.cumprod(0).sum()


def emitted_tokens(drafted: torch.Tensor, targets: torch.Tensor, accepted: torch.Tensor) -> torch.Tensor:
    """The tokens a verify emits, in a fixed-size buffer (no host read).

    Args:
        drafted: [1, B]; targets: [1, B + 1]; accepted: 0-d int64 a.

    Returns:
        [B + 1] int64: d_1..d_a, then the bonus y_a, then -1 padding. Entry i is the token at
        verify position i + 1, so a + 1 entries are valid.
    """
    block = drafted.shape[1]
    index = torch.arange(block + 1, device=drafted.device)
    # [B + 1]: the drafts shifted into place, last slot unused
    padded = torch.cat([drafted[0], drafted.new_full((1,), -1)])
    bonus = targets[0].gather(0, accepted.view(1))
    return torch.where(
        index < accepted, padded, torch.where(index == accepted, bonus, torch.full_like(padded, -1))
    )
