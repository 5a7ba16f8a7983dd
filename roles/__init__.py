"""Agents that write kernels: role specs, prompt templates, tools and LLM backends (built in a later issue).

Imports only ``evoteam.gpu_bench``.
"""
