"""Synthesized workloads: inputs that random values would make invalid, and small axis values."""
