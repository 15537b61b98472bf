"""Ablations: a plan of switch configurations, RunRecords on disk with resume, attribution statistics."""
