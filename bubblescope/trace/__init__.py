"""Trace loading and normalisation: load -> tables (integer ns, interned names) -> correlation -> steps.

Never imports torch: a CI box without it can analyse traces.
"""
