"""Per-rank analysis: one rank's findings (`analysis`), their compact summary (`results`), the pool that
analyses ranks in parallel (`pool`) and the reduction to one cross-rank dict (`reduce`). No torch."""
