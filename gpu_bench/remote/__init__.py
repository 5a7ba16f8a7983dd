"""Runners beyond this machine: a worker over SSH, evaluations as Ray tasks, and the GPU queue between agents
and runners."""
