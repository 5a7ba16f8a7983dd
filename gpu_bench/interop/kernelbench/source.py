"""The module-level constants of a KernelBench problem (``batch_size = 16``) and rewriting them in its source.

A KernelBench problem sets its sizes as top-level assignments that ``get_inputs()`` and ``get_init_inputs()``
read: numbers (``batch_size = 16``), or tuples and lists of numbers (``input_shape = (4096,)``,
``layer_sizes = [400, 800]``). Overriding one replaces the assigned expression in the text, so everything
computed from it at module level (``dim2 = dim * 2``) follows, and comments and layout stay as they were.
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

_ARITHMETIC = (ast.Constant, ast.BinOp, ast.UnaryOp, ast.operator, ast.unaryop, ast.expr_context)
Number = int | float
Value = bool | int | float | tuple[Number, ...] | list[Number]
"""What a size override sets: a number, True/False, or a tuple or list of numbers."""


class SourceError(ValueError):
    """The problem's source cannot be parsed, or an override names nothing it assigns; the message says why."""


@dataclass(frozen=True)
class Constant:
    """One top-level ``NAME = expression`` of the problem."""

    name: str
    text: str
    """The assigned expression as written."""
    literal: Number | tuple[Number, ...] | list[Number] | None
    """Its value when the expression is arithmetic on numbers only (``1024 * 2``), or a tuple or list of such
    expressions (``(batch_size // 2, 64)`` is not: it reads a name), else None."""
    start: int
    """Character offsets of the expression in the source."""
    end: int


def parse(source: str, filename: str) -> ast.Module:
    try:
        return ast.parse(source, filename=filename)
    except SyntaxError as exc:
        where = f"{filename}:{exc.lineno}" if exc.lineno else filename
        raise SourceError(f"{where}: not valid Python: {exc.msg}") from None


def find_constants(source: str, filename: str = "<problem>") -> dict[str, Constant]:
    """Every top-level assignment to one plain name (the last one wins, as at run time)."""
    module = parse(source, filename)
    offsets = _line_offsets(source)
    found: dict[str, Constant] = {}
    for node in module.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name, value = node.targets[0].id, node.value
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            name, value = node.target.id, node.value
        else:
            continue
        if value.end_lineno is None or value.end_col_offset is None:
            continue
        start = offsets[value.lineno - 1] + _char_col(source, offsets[value.lineno - 1], value.col_offset)
        end = offsets[value.end_lineno - 1] + _char_col(source, offsets[value.end_lineno - 1], value.end_col_offset)
        found[name] = Constant(name, source[start:end], _literal(value), start, end)
    return found


def rewrite(source: str, values: Mapping[str, object], filename: str = "<problem>") -> str:
    """``source`` with the expression of each named top-level assignment replaced by ``repr(value)``."""
    constants = find_constants(source, filename)
    unknown = sorted(set(values) - set(constants))
    if unknown:
        known = ", ".join(sorted(constants)) or "none"
        raise SourceError(f"{filename} assigns no module-level {', '.join(unknown)} (it assigns: {known})")
    out = source
    for constant in sorted((constants[n] for n in values), key=lambda c: c.start, reverse=True):
        out = out[: constant.start] + repr(values[constant.name]) + out[constant.end :]
    return out


def parse_override(text: str) -> tuple[str, Value]:
    """``NAME=VALUE`` (VALUE a number, True/False, or a tuple or list of numbers: ``input_shape=(64,)``) as a
    pair."""
    name, sep, raw = text.partition("=")
    name, raw = name.strip(), raw.strip()
    if not sep or not name.isidentifier() or not raw:
        raise SourceError(f"size override {text!r} is not NAME=VALUE (for example batch_size=8)")
    try:
        value = ast.literal_eval(raw)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        value = None
    if _number(value):
        return name, value
    if isinstance(value, tuple | list) and all(_number(v) and type(v) is not bool for v in value):
        return name, value
    raise SourceError(
        f"size override {text!r}: {raw!r} is not a number or a tuple or list of numbers (input_shape=(64,))"
    )


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not (isinstance(value, float) and not math.isfinite(value))


def scaled(value: int, factor: float) -> int:
    """``value * factor`` rounded, at least 1; a multiple of 8 stays a multiple of 8 (at least 8)."""
    if value % 8 == 0:
        return max(8, 8 * round(value * factor / 8))
    return max(1, round(value * factor))


def _literal(node: ast.expr) -> Number | tuple[Number, ...] | list[Number] | None:
    if isinstance(node, ast.Tuple | ast.List):
        items = [_number_literal(e) for e in node.elts]
        if any(i is None for i in items):
            return None
        numbers = [i for i in items if i is not None]
        return tuple(numbers) if isinstance(node, ast.Tuple) else numbers
    return _number_literal(node)


def _number_literal(node: ast.expr) -> Number | None:
    if not all(isinstance(n, _ARITHMETIC) for n in ast.walk(node)):
        return None
    if any(isinstance(n, ast.Constant) and type(n.value) not in (int, float) for n in ast.walk(node)):
        return None
    if any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) and not _small_power(n) for n in ast.walk(node)):
        return None  # 10 ** 10 ** 9 would never finish
    try:
        value = eval(compile(ast.Expression(node), "<constant>", "eval"), {"__builtins__": {}}, {})
    except Exception:  # 1 / 0, overflow: not a usable constant
        return None
    return value if type(value) in (int, float) else None


def _small_power(node: ast.BinOp) -> bool:
    """``2 ** 14``: both sides plain numbers, the exponent at most 64."""
    left, right = node.left, node.right
    return (
        isinstance(left, ast.Constant)
        and isinstance(right, ast.Constant)
        and type(right.value) is int
        and abs(right.value) <= 64
    )


def _line_offsets(source: str) -> list[int]:
    """Where each line starts, counting line breaks as the tokenizer does (\\n, \\r\\n, \\r)."""
    return [0, *(m.end() for m in re.finditer(r"\r\n|\r|\n", source))]


def _char_col(source: str, line_start: int, byte_col: int) -> int:
    """ast's columns count UTF-8 bytes; the character column of the same place."""
    line = re.split(r"\r|\n", source[line_start:], maxsplit=1)[0]
    return len(line.encode()[:byte_col].decode(errors="ignore"))
