"""The evaluator: compile, verify and time kernel candidates, in stage folders (see docs/architecture.md).

Code outside ``gpu_bench/`` imports ``evoteam.gpu_bench.api`` only; ``gpu_bench`` imports nothing else of evoteam.
"""
