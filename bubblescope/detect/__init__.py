"""Detectors: pure functions from trace tables to findings (one per file, listed in `registry`)."""
