"""Detects a candidate that tampers with the worker's shared Python state (e.g. patches torch functions).

A Python candidate runs in the same interpreter as the reference: replacing ``torch.rsqrt`` or a
``torch.Tensor`` method would change the reference's answer too and let a wrong kernel pass. The worker
records what these namespaces hold before any candidate runs and checks it after every request.
"""

from __future__ import annotations

import builtins
import math
from types import ModuleType

import torch
import torch.nn.functional

_WATCHED: dict[str, ModuleType | type] = {
    "torch": torch,
    "torch.Tensor": torch.Tensor,
    "torch.nn.functional": torch.nn.functional,
    "torch.linalg": torch.linalg,
    "torch.fft": torch.fft,
    "torch.special": torch.special,
    "math": math,
    "builtins": builtins,
}

Snapshot = dict[str, int]


def snapshot() -> Snapshot:
    """The identity of every attribute, as attribute lookup would find it (classes: along the MRO)."""
    entries: Snapshot = {}
    for prefix, namespace in _WATCHED.items():
        owners = reversed(namespace.__mro__) if isinstance(namespace, type) else [namespace]
        for owner in owners:
            for name, value in list(vars(owner).items()):
                entries[f"{prefix}.{name}"] = id(value)
    return entries


def tampered(before: Snapshot) -> list[str]:
    """Names that were replaced or removed since ``before`` (names added later are not compared)."""
    now = snapshot()
    return sorted(name for name, ident in before.items() if now.get(name) != ident)
