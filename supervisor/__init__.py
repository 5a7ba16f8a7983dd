"""The supervisor: evolving teams in rounds, budget, knowledge and git branches (built in a later issue).

Imports ``evoteam.roles`` and ``evoteam.gpu_bench``, never ``evoteam.server``.
"""
