"""The supervisor: evolving teams in rounds, budget, knowledge, git branches and the run's typed journal.

Imports ``evoteam.roles`` and ``evoteam.gpu_bench``, never ``evoteam.server``.
"""
