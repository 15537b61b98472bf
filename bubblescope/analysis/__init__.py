"""From trace tables to the `bubblescope.analysis/1` dict: `traces.analyze_traces` and the tables and
bounds it is built from (gap blame, host ops, kernels, readbacks, the timed step's idle). No torch."""
