"""Environments: the benchmark catalog, freezing, installing, grading."""
