"""Agents that write kernels: role specs and prompt templates, the workspace-confined tool set, the knowledge
store, the tool-loop agent and the LLM backends (anthropic, claude-code, scripted, offline).

Imports only ``evoteam.gpu_bench``.
"""
