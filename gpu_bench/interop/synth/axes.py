"""Small variable-axis values for generated workloads, consistent with a definition's axis constraints.

A definition's ``constraints`` are Python expressions. Those over axes only (``len_indptr == batch_size + 1``,
``topk <= max_num_pages * page_size``) are solved here: an ``AXIS == expr`` assigns the axis, a failing
inequality doubles the variable axes on the side that must grow. Constraints that read tensors
(``total_q == qo_indptr[-1].item()``) are the input synthesizer's business (``synth_inputs``).
"""

from __future__ import annotations

import ast
import math

from evoteam.gpu_bench.bindings.dtypes import torch_dtype
from evoteam.gpu_bench.schema import Definition


class SynthesisError(ValueError):
    """A workload or an input cannot be made consistent with the definition; the message says why."""


# Small sizes that keep every reference of the FlashInfer Trace dataset fast on a CPU; other axes get 2.
SMALL_AXES: dict[str, int] = {
    "batch_size": 2,
    "num_seqs": 2,
    "num_tokens": 2,
    "seq_len": 2,
    "M": 4,
    "total_q": 4,
    "total_kv": 8,
    "total_seq_len": 6,
    "num_pages": 16,
    "num_kv_indices": 8,
    "max_seq_len": 16,
    "max_num_pages": 2,
    "pool_size": 2,
    "state_cache_size": 4,
}
_MAX_DOUBLINGS = 24


def small_axes(definition: Definition, scale: int = 1) -> dict[str, int]:
    """Values for every variable axis: ``SMALL_AXES`` times ``scale``, then the axis constraints applied.

    ``len_*`` axes (index-pointer lengths) default to ``2 * scale + 1``: ``2 * scale`` sequences.
    """
    if scale < 1:
        raise ValueError("scale must be at least 1")
    values = {
        name: (2 * scale + 1) if name.startswith("len_") else SMALL_AXES.get(name, 2) * scale
        for name in definition.var_axes()
    }
    return solve_axis_constraints(definition, values)


def solve_axis_constraints(definition: Definition, var_values: dict[str, int]) -> dict[str, int]:
    """``var_values`` adjusted until every constraint over axes alone holds (a ``SynthesisError`` if not)."""
    values = dict(var_values)
    consts = definition.const_axes()
    var_names = set(definition.var_axes())
    checks: list[ast.Compare] = []
    for text in definition.constraints or []:
        tree = ast.parse(text, mode="eval").body
        if not isinstance(tree, ast.Compare) or not _axes_only(tree, set(definition.axes)):
            continue
        target = _assigned_axis(tree, var_names)
        if target is not None:
            value = _eval(tree.comparators[0], {**consts, **values})
            if not isinstance(value, int | float):
                raise SynthesisError(f"{definition.name}: {text!r} does not give a number")
            values[target] = int(value)
        else:
            checks.append(tree)
    for check in checks:
        for _ in range(_MAX_DOUBLINGS):
            if _eval(check, {**consts, **values}):
                break
            grow = _side_to_grow(check)
            names = sorted(_names(grow) & var_names) if grow is not None else []
            if not names:
                break
            for name in names:
                values[name] = max(1, values[name]) * 2
        if not _eval(check, {**consts, **values}):
            raise SynthesisError(
                f"{definition.name}: cannot choose axis values satisfying {ast.unparse(check)!r} (got {values})"
            )
    return values


def check_constraints(definition: Definition, namespace: dict[str, object]) -> list[str]:
    """The constraints that evaluate to False over ``namespace`` (axes, plus tensors where known).

    A constraint that cannot be evaluated (it reads a tensor that is not in ``namespace``) is not reported.
    """
    failed = []
    for text in definition.constraints or []:
        try:
            ok = eval(compile(text, "<constraint>", "eval"), {"__builtins__": {}}, dict(namespace))
        except Exception:
            continue
        if not ok:
            failed.append(text)
    return failed


def workload_bytes(definition: Definition, axes: dict[str, int]) -> int:
    """Bytes of every input and output tensor of one workload (``axes`` holds all axes)."""
    total = 0
    for spec in [*definition.inputs.values(), *definition.outputs.values()]:
        shape = definition.shape_of(spec, axes)
        if shape is None:
            continue
        total += math.prod(shape) * torch_dtype(spec.dtype).itemsize
    return total


def _axes_only(tree: ast.AST, axes: set[str]) -> bool:
    allowed = (ast.Compare, ast.BinOp, ast.UnaryOp, ast.Name, ast.Constant, ast.Load, ast.operator, ast.unaryop)
    allowed_cmp = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in axes:
            return False
        if not isinstance(node, (*allowed, *allowed_cmp)):
            return False
    return True


def _assigned_axis(tree: ast.Compare, var_names: set[str]) -> str | None:
    """``AXIS == expr`` (one comparison, a variable axis alone on the left, not on the right): AXIS."""
    if len(tree.ops) != 1 or not isinstance(tree.ops[0], ast.Eq) or not isinstance(tree.left, ast.Name):
        return None
    name = tree.left.id
    if name not in var_names or name in _names(tree.comparators[0]):
        return None
    return name


def _side_to_grow(tree: ast.Compare) -> ast.expr | None:
    if len(tree.ops) != 1:
        return None
    op = tree.ops[0]
    if isinstance(op, ast.Gt | ast.GtE):
        return tree.left
    if isinstance(op, ast.Lt | ast.LtE):
        return tree.comparators[0]
    return None


def _names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _eval(tree: ast.expr, namespace: dict[str, int]) -> object:
    expression = ast.Expression(body=tree)
    return eval(compile(expression, "<constraint>", "eval"), {"__builtins__": {}}, dict(namespace))
