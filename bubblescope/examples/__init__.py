"""Example workloads; `toy_workload` is the one to copy when writing your own."""
