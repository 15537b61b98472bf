"""Timed runs, profiled windows and environment capture around a Workload (torch imported lazily)."""
