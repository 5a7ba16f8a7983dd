"""Evaluates the pycuda binding's launch geometry: grid, block and shared bytes as safe expressions over axes.

An expression may use integers, the definition's axis names, ``+ - * // %``, parentheses, unary minus,
``ceil_div(a, b)``, ``min(...)`` and ``max(...)``; anything else (``/``, ``**``, attributes, strings, floats,
other calls) is refused when the kernel is loaded. Imports nothing heavy: no torch, no pycuda.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from evoteam.gpu_bench.schema import LaunchSpec

MAX_THREADS_PER_BLOCK = 1024
MAX_GRID = (2**31 - 1, 65535, 65535)
MAX_BLOCK = (1024, 1024, 64)

Expr = Callable[[Mapping[str, int]], int]
_OPS: dict[type[ast.operator], Callable[[int, int], int]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
_SYMBOLS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%"}


class LaunchError(ValueError):
    """A launch expression is not allowed, names an unknown axis, or gives an impossible geometry."""


@dataclass(frozen=True)
class Geometry:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int


def compile_expression(text: str, names: Iterable[str]) -> Expr:
    """Parses and checks ``text`` once; the result maps axis values to an int (LaunchError on misuse)."""
    known = set(names)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise LaunchError(f"launch expression {text!r} is not an expression: {exc.msg}") from None
    return _compile(tree.body, text, known)


def _compile(node: ast.expr, text: str, known: set[str]) -> Expr:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        value = node.value
        return lambda axes: value
    if isinstance(node, ast.Name):
        if node.id not in known:
            raise LaunchError(f"launch expression {text!r} uses {node.id!r}, which is not an axis ({sorted(known)})")
        name = node.id
        return lambda axes: axes[name]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        op, symbol = _OPS[type(node.op)], _SYMBOLS[type(node.op)]
        left, right = _compile(node.left, text, known), _compile(node.right, text, known)

        def binary(axes: Mapping[str, int]) -> int:
            a, b = left(axes), right(axes)
            if symbol in ("//", "%") and b == 0:
                raise LaunchError(f"launch expression {text!r} divides by zero")
            return op(a, b)

        return binary
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _compile(node.operand, text, known)
        sign = -1 if isinstance(node.op, ast.USub) else 1
        return lambda axes: sign * inner(axes)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        if node.func.id not in ("ceil_div", "min", "max"):
            raise LaunchError(
                f"launch expression {text!r} calls {node.func.id!r}; only ceil_div, min and max are allowed"
            )
        return _call(node.func.id, [_compile(a, text, known) for a in node.args], text)
    raise LaunchError(
        f"launch expression {text!r}: {ast.unparse(node)!r} is not allowed "
        "(integers, axis names, + - * // %, parentheses, ceil_div(a, b), min, max)"
    )


def _call(name: str, args: list[Expr], text: str) -> Expr:
    if name == "ceil_div":
        if len(args) != 2:
            raise LaunchError(f"launch expression {text!r}: ceil_div takes exactly two arguments")
        num, den = args

        def ceil_div(axes: Mapping[str, int]) -> int:
            b = den(axes)
            if b == 0:
                raise LaunchError(f"launch expression {text!r} divides by zero")
            return -(-num(axes) // b)

        return ceil_div
    if len(args) < 2:  # min or max: _compile lets no other name through
        raise LaunchError(f"launch expression {text!r}: {name} takes at least two arguments")
    pick = min if name == "min" else max
    return lambda axes: pick(a(axes) for a in args)


class Launch:
    """A ``LaunchSpec`` checked against the definition's axes, resolved per workload."""

    def __init__(self, spec: LaunchSpec, axis_names: Iterable[str]) -> None:
        names = list(axis_names)
        self._grid = [compile_expression(e, names) for e in spec.grid]
        self._block = [compile_expression(e, names) for e in spec.block]
        self._shared = compile_expression(spec.shared_bytes, names)
        self._spec = spec

    def resolve(self, axes: Mapping[str, int]) -> Geometry:
        """The geometry for these axis values; LaunchError if it cannot be launched."""
        grid = _pad([g(axes) for g in self._grid])
        block = _pad([b(axes) for b in self._block])
        shared = self._shared(axes)
        for what, dims, limits in (("grid", grid, MAX_GRID), ("block", block, MAX_BLOCK)):
            for axis, (dim, limit) in enumerate(zip(dims, limits, strict=True)):
                if not 1 <= dim <= limit:
                    raise LaunchError(
                        f"{what} dimension {'xyz'[axis]} is {dim} for axes {dict(axes)} (must be 1..{limit}); "
                        f"{what} = {getattr(self._spec, what)}"
                    )
        threads = block[0] * block[1] * block[2]
        if threads > MAX_THREADS_PER_BLOCK:
            raise LaunchError(f"block {block} has {threads} threads, more than {MAX_THREADS_PER_BLOCK}")
        if shared < 0:
            raise LaunchError(f"shared_bytes is {shared} for axes {dict(axes)}; it must not be negative")
        return Geometry(grid, block, shared)


def _pad(dims: list[int]) -> tuple[int, int, int]:
    padded = [*dims, 1, 1][:3]
    return padded[0], padded[1], padded[2]
