"""Turn the text an nvcc or g++ run printed into structured Diagnostics; parses text only, runs no tool.

One pass over the combined stdout+stderr. Each line is tried, in order, as: a front-end (cudafe/EDG)
message, a ptxas/nvlink/nvcc driver message, a g++ (or GNU as) message or context line. Everything else
(``ptxas info`` lines, ``1 error detected in the compilation of ...``, ``Remark: ...``) is skipped.
Notes join the message before them as related places; nvcc's host and device passes repeat front-end
warnings, so exact repeats are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from evoteam.gpu_bench.build.cuda.edg_output import parse_edg
from evoteam.gpu_bench.build.cuda.gcc_output import GccReader
from evoteam.gpu_bench.build.cuda.paths import relative_path
from evoteam.gpu_bench.build.cuda.ptx_lines import map_ptx_lines
from evoteam.gpu_bench.schema import Diagnostic, Related, Severity

__all__ = ["map_ptx_lines", "parse_diagnostics", "relative_path"]

_PTXAS_AT = re.compile(r"^ptxas (?P<file>.+?), line (?P<line>\d+); (?P<sev>error|warning|fatal)\s*: (?P<msg>.*)$")
_TOOL = re.compile(
    r"^(?P<tool>ptxas|nvlink|nvcc|fatbinary|cicc|cudafe\+\+)\s+(?P<sev>error|warning|fatal)\s*: (?P<msg>.*)$"
)


def parse_diagnostics(
    text: str,
    build_dir: str | None = None,
    *,
    host_tool: str = "host",
    sources: Mapping[str, str] | None = None,
) -> list[Diagnostic]:
    """Every diagnostic in ``text``, in the order printed.

    ``build_dir``: absolute paths inside it are reported relative to it. ``host_tool``: the ``tool`` of
    g++-style messages (``host`` behind nvcc, ``gcc`` for a plain g++ run). ``sources``: file texts by
    reported path; with them a front-end caret column is moved from the echoed (macro-expanded) line
    onto the real source line.
    """
    lines = text.splitlines()

    def relative(path: str) -> str:
        return relative_path(path, build_dir)

    def source_line(file: str, line: int) -> str | None:
        content = (sources or {}).get(relative(file))
        if content is None:
            return None
        source = content.splitlines()
        return source[line - 1] if 0 < line <= len(source) else None

    found: list[Diagnostic] = []
    gcc = GccReader(tool=host_tool)
    i = 0
    while i < len(lines):
        edg = parse_edg(lines, i, source_line)
        if edg is not None:
            _add(found, edg[0].diagnostic, is_note=edg[0].is_note)
            i = edg[1]
            continue
        tool = _tool_message(lines[i])
        if tool is not None:
            found.append(tool)
            i += 1
            continue
        host = gcc.read(lines, i)
        if host is not None:
            message, i = host
            if message is not None:
                _add(found, message.diagnostic, is_note=message.is_note)
            continue
        i += 1
    return _unique([_relocate(d, relative) for d in found])


def _tool_message(text: str) -> Diagnostic | None:
    """``ptxas <file>, line N; error : ...`` or ``ptxas|nvlink|nvcc error|warning|fatal : ...``."""
    at = _PTXAS_AT.match(text)
    if at is not None:
        return Diagnostic(
            file=at["file"],
            line=int(at["line"]),
            severity=_severity(at["sev"]),
            message=at["msg"].strip(),
            tool="ptxas",
        )
    plain = _TOOL.match(text)
    if plain is not None:
        return Diagnostic(
            file="", line=0, severity=_severity(plain["sev"]), message=plain["msg"].strip(), tool=plain["tool"]
        )
    return None


def _severity(word: str) -> Severity:
    return Severity.WARNING if word == "warning" else Severity.ERROR


def _add(found: list[Diagnostic], diagnostic: Diagnostic, *, is_note: bool) -> None:
    """Append, or attach a note to the message it explains."""
    if is_note and found:
        note = Related(file=diagnostic.file, line=diagnostic.line, column=diagnostic.column, message=diagnostic.message)
        found[-1] = found[-1].model_copy(update={"related": [*found[-1].related, note]})
    else:
        found.append(diagnostic)


def _relocate(diagnostic: Diagnostic, relative: Callable[[str], str]) -> Diagnostic:
    related = [r.model_copy(update={"file": relative(r.file)}) for r in diagnostic.related]
    return diagnostic.model_copy(update={"file": relative(diagnostic.file), "related": related})


def _unique(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    seen: set[str] = set()
    kept = []
    for diagnostic in diagnostics:
        key = diagnostic.model_dump_json()
        if key not in seen:
            seen.add(key)
            kept.append(diagnostic)
    return kept
