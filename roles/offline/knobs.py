"""Tunable parameters of a C++/CUDA source (knobs): where they are, their values, and rewriting them.

Found: ``#define NAME <int>`` and ``constexpr <int type> NAME = <int>;`` and template defaults
``template <int NAME = <int>>`` whose names look like sizes (BLOCK, TILE, UNROLL, ...); the literals of
``__launch_bounds__(N[, M])``, ``#pragma unroll N`` / ``#pragma GCC unroll N``, and OpenMP ``num_threads(N)``
and ``schedule(kind, N)``. Comments and string literals are ignored. Knobs declared in the task override the
values of those found; a declared name not in the source becomes a ``#define`` put at the top of the file.
Pure text work: imports nothing of evoteam but the sibling ``domains``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from evoteam.gpu_bench.api import KernelTask
from evoteam.roles.offline.domains import generated_values, looks_like_size

Value = int | str
KnobKind = Literal[
    "define", "constexpr", "template", "launch_bounds", "launch_min_blocks", "unroll", "omp_threads", "omp_chunk",
    "declared",
]  # fmt: skip


class Spot(BaseModel):
    """One place where a knob's value is written: the characters ``[start, end)`` of the source."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    start: int
    end: int
    line: int
    """1-based line of ``start``."""
    text: str
    """What the source holds there now."""


class Knob(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    kind: KnobKind
    spots: list[Spot]
    """Every place the value is written (a name defined twice, e.g. in both branches of an ``#if``, has two);
    empty for a declared knob that the source does not hold."""
    current: Value | None
    """The value in the source now (None: declared only)."""
    values: list[Value]
    declared: bool = False


_INT_TYPES = (
    r"(?:unsigned\s+int|unsigned\s+long|unsigned|int|long|short|size_t|std::size_t|u?int(?:8|16|32|64)_t"
    r"|std::u?int(?:8|16|32|64)_t|index_t|auto)"
)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+\(?[ \t]*(\d+)[uUlL]*[ \t]*\)?[ \t]*$", re.M)
_CONSTEXPR = re.compile(
    rf"\bconstexpr\s+(?:const\s+)?{_INT_TYPES}\s+([A-Za-z_]\w*)\s*(?:=\s*\(?\s*|\{{\s*)(\d+)[uUlL]*\s*[)}}]?\s*;"
)
_TEMPLATE = re.compile(r"\btemplate\s*<")
_TEMPLATE_PARAM = re.compile(rf"(?:^|,)\s*{_INT_TYPES}\s+([A-Za-z_]\w*)\s*=\s*(\d+)[uUlL]*\s*(?=,|$)")
_LAUNCH = re.compile(r"__launch_bounds__\s*\(\s*(\d+)\s*(?:,\s*(\d+)\s*)?(?:,\s*\d+\s*)?\)")
_UNROLL = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+(?:GCC[ \t]+)?unroll[ \t]*\(?[ \t]*(\d+)", re.M)
_OMP = re.compile(r"^[ \t]*#[ \t]*pragma[ \t]+omp\b[^\n]*", re.M)
_OMP_THREADS = re.compile(r"\bnum_threads\s*\(\s*(\d+)\s*\)")
_OMP_CHUNK = re.compile(r"\bschedule\s*\(\s*(?:static|dynamic|guided)\s*,\s*(\d+)\s*\)")
_OMP_KNOBS: tuple[tuple[re.Pattern[str], KnobKind], ...] = ((_OMP_THREADS, "omp_threads"), (_OMP_CHUNK, "omp_chunk"))


def mask(source: str) -> str:
    """``source`` with comments and string/char literals blanked to spaces (newlines kept), so offsets match."""
    out = list(source)
    i, n = 0, len(source)
    while i < n:
        c, nxt = source[i], source[i + 1] if i + 1 < n else ""
        end = i
        if c == "/" and nxt == "/":
            end = source.find("\n", i)
            end = n if end < 0 else end
        elif c == "/" and nxt == "*":
            end = source.find("*/", i + 2)
            end = n if end < 0 else end + 2
        elif c in "\"'":
            end = i + 1
            while end < n and source[end] not in (c, "\n"):
                end += 2 if source[end] == "\\" else 1
            end = min(end + 1, n)
        if end == i:
            i += 1
            continue
        for j in range(i, end):
            if out[j] != "\n":
                out[j] = " "
        i = end
    return "".join(out)


def _line(source: str, offset: int) -> int:
    return source.count("\n", 0, offset) + 1


def _template_lists(text: str) -> list[tuple[int, str]]:
    """(offset, text) of the parameter list of every ``template <...>``, matching nested angle brackets."""
    found = []
    for m in _TEMPLATE.finditer(text):
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"<": 1, ">": -1}.get(text[j], 0)
            j += 1
        if depth == 0:
            found.append((m.end(), text[m.end() : j - 1]))
    return found


def _literal_sites(text: str, declared: frozenset[str] = frozenset()) -> list[tuple[str, KnobKind, int, int]]:
    """(name, kind, start, end) of every literal value that is a knob, in source order: size-like names, and
    any ``#define`` or ``constexpr`` whose name is ``declared``."""
    sites: list[tuple[str, KnobKind, int, int]] = []
    for m in _DEFINE.finditer(text):
        if (m.group(1).isupper() and looks_like_size(m.group(1))) or m.group(1) in declared:
            sites.append((m.group(1), "define", m.start(2), m.end(2)))
    for m in _CONSTEXPR.finditer(text):
        if looks_like_size(m.group(1)) or m.group(1) in declared:
            sites.append((m.group(1), "constexpr", m.start(2), m.end(2)))
    for offset, params in _template_lists(text):
        for m in _TEMPLATE_PARAM.finditer(params):
            if looks_like_size(m.group(1)):
                sites.append((m.group(1), "template", offset + m.start(2), offset + m.end(2)))
    for m in _LAUNCH.finditer(text):
        line = _line(text, m.start())
        sites.append((f"launch_bounds@L{line}", "launch_bounds", m.start(1), m.end(1)))
        if m.group(2) is not None:
            sites.append((f"launch_min_blocks@L{line}", "launch_min_blocks", m.start(2), m.end(2)))
    for m in _UNROLL.finditer(text):
        sites.append((f"unroll@L{_line(text, m.start(1))}", "unroll", m.start(1), m.end(1)))
    for pragma in _OMP.finditer(text):
        line = _line(text, pragma.start())
        for pattern, omp_kind in _OMP_KNOBS:
            hit = pattern.search(pragma.group(0))
            if hit is not None:
                start = pragma.start() + hit.start(1)
                sites.append((f"{omp_kind}@L{line}", omp_kind, start, start + len(hit.group(1))))
    return sorted(sites, key=lambda s: s[2])


def find_knobs(source: str, cuda: bool = False, declared: Mapping[str, Sequence[Value]] | None = None) -> list[Knob]:
    """The knobs of ``source`` in source order (declared-only knobs last), each with candidate values."""
    text = mask(source)
    knobs: dict[str, Knob] = {}
    for name, kind, start, end in _literal_sites(text, frozenset(declared or {})):
        spot = Spot(start=start, end=end, line=_line(source, start), text=source[start:end])
        if name in knobs:
            knobs[name].spots.append(spot)
            continue
        current = int(source[start:end])
        values: list[Value] = list(generated_values(name, kind, current, cuda))
        knobs[name] = Knob(name=name, kind=kind, spots=[spot], current=current, values=values)
    for name, wanted in (declared or {}).items():
        if not wanted:
            raise ValueError(f"knob {name!r} is declared with no values")
        if name in knobs:
            knobs[name].values, knobs[name].declared = list(wanted), True
        else:
            knobs[name] = Knob(name=name, kind="declared", spots=[], current=None, values=list(wanted), declared=True)
    return list(knobs.values())


def current_config(knobs: Sequence[Knob]) -> dict[str, Value]:
    """The source's own values, where they are among the candidates (else a knob's first candidate)."""
    return {k.name: k.current if k.current is not None and k.current in k.values else k.values[0] for k in knobs}


def apply(source: str, config: Mapping[str, Value], knobs: Sequence[Knob] | None = None) -> str:
    """``source`` with each knob of ``config`` set: only the knobs' spots change (declared-only knobs become
    ``#define`` lines at the top). ``knobs`` must come from this same source (default: found in it)."""
    found = {k.name: k for k in (knobs if knobs is not None else find_knobs(source))}
    unknown = sorted(set(config) - set(found))
    if unknown:
        raise ValueError(f"unknown knobs {unknown}; known: {sorted(found)}")
    edits: list[tuple[int, int, str]] = []
    header = []
    for name, value in config.items():
        knob = found[name]
        if not knob.spots:
            header.append(f"#define {name} {value}\n")
        for spot in knob.spots:
            if source[spot.start : spot.end] != spot.text:
                raise ValueError(f"knob {name!r} at line {spot.line} does not match this source")
            edits.append((spot.start, spot.end, str(value)))
    out = source
    for start, end, text in sorted(edits, reverse=True):
        out = out[:start] + text + out[end:]
    return "".join(header) + out


def describe(config: Mapping[str, Value]) -> str:
    """``BLOCK=256 UNROLL=4``: a config as one short line."""
    return " ".join(f"{name}={value}" for name, value in config.items())


def nothing_to_tune(task: KernelTask) -> str | None:
    """Why the offline team can do nothing with ``task`` (no knob found in its source, none declared, or a
    source it cannot read), or None when it has something to vary: said before a run starts, not found in the
    journal after it."""
    try:
        source = task.source.read_text()
        knobs = find_knobs(source, cuda=task.language == "cuda", declared=task.knobs)
    except OSError as exc:
        return f"cannot read {task.source}: {exc.strerror or exc}"
    except ValueError as exc:
        return f"the kernel's knobs in evoteam.toml are not usable: {exc}"
    if knobs:
        return None
    return (
        f"the offline team has nothing to tune in {task.source.name}: it finds no knob it can vary (a #define, "
        f"constexpr or template constant such as BLOCK or kLanes) and evoteam.toml declares none for "
        f"{task.name} ([kernel.knobs] NAME = [values]). Declare knobs, or run with a model "
        "(--llm anthropic, openai or claude-code)"
    )
