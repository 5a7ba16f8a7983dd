"""Point ptxas diagnostics at CUDA source lines through the ``.loc``/``.file`` line table of ``-lineinfo`` PTX.

ptxas names a line of the generated PTX; the nearest ``.loc FILE LINE COL`` before it (in the same
function) says which source line produced that instruction, and ``.file FILE "path"`` names the file.
For inlined code, ``.loc`` carries ``function_name $L__info_stringN, inlined_at FILE LINE COL``; the
call site becomes a related place. A ptxas message without a line that names a kernel (``Entry function
'_Z3hogPf' uses too much shared data``) goes to the kernel's first source line. Pure text work.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from evoteam.gpu_bench.build.cuda.paths import relative_path
from evoteam.gpu_bench.schema import Diagnostic, Related

_FILE = re.compile(r'^\s*\.file\s+(?P<index>\d+)\s+"(?P<path>[^"]*)"')
_LOC = re.compile(r"^\s*\.loc\s+(?P<file>\d+)\s+(?P<line>\d+)\s+(?P<col>\d+)(?P<rest>.*)$")
_INLINED = re.compile(r"inlined_at\s+(?P<file>\d+)\s+(?P<line>\d+)\s+(?P<col>\d+)")
_FUNCTION_NAME = re.compile(r"function_name\s+(?P<label>[$\w]+)")
_FUNCTION_START = re.compile(r"^\s*(?:\.visible\s+|\.extern\s+|\.weak\s+)*\.(?:entry|func)\b")
_LABEL = re.compile(r"^\s*(?P<label>\$L__info_string\d+):\s*$")
_BYTES = re.compile(r"^\s*\.b8\s+(?P<values>[\d,\s]+)$")
_NAMED = re.compile(r"\b(?:Entry function|Function) '(?P<name>[^']+)'")


@dataclass(frozen=True)
class SourcePlace:
    file: int
    line: int
    column: int
    function: str | None = None
    """The inlined function (mangled), when the place is inside inlined code."""
    inlined_at: tuple[int, int, int] | None = None
    """(file, line, column) of the call that was inlined."""


def map_ptx_lines(diagnostics: list[Diagnostic], ptx_text: str, build_dir: str | None = None) -> list[Diagnostic]:
    """The diagnostics with each ptxas one that has a PTX line moved to its source place.

    The PTX place stays as a related entry (``in generated PTX line N``). Paths are as the ``.file`` table
    gives them, relative to ``build_dir`` when inside it. Diagnostics with no ``.loc`` before them, and
    those of other tools, come back unchanged.
    """
    lines = ptx_text.splitlines()
    files = {int(m["index"]): m["path"] for m in map(_FILE.match, lines) if m is not None}
    names = _info_strings(lines)
    mapped = []
    for diagnostic in diagnostics:
        place = _place(lines, diagnostic)
        if place is None or place.file not in files:
            mapped.append(diagnostic)
            continue
        related = []
        if diagnostic.line > 0:
            message = f"in generated PTX line {diagnostic.line}"
            related.append(Related(file=diagnostic.file, line=diagnostic.line, message=message))
        if place.inlined_at is not None and place.inlined_at[0] in files:
            name = names.get(place.function or "", "a function")
            file, line, column = place.inlined_at
            related.append(
                Related(
                    file=relative_path(files[file], build_dir),
                    line=line,
                    column=column,
                    message=f"{name} inlined here",
                )
            )
        update = {
            "file": relative_path(files[place.file], build_dir),
            "line": place.line,
            "column": place.column,
            "end_column": 0,
            "related": [*related, *diagnostic.related],
        }
        mapped.append(diagnostic.model_copy(update=update))
    return mapped


def _place(lines: list[str], diagnostic: Diagnostic) -> SourcePlace | None:
    if diagnostic.tool != "ptxas":
        return None
    if diagnostic.line > 0:
        return source_place(lines, diagnostic.line)
    named = _NAMED.search(diagnostic.message)
    return entry_place(lines, named["name"]) if named else None


def entry_place(lines: list[str], name: str) -> SourcePlace | None:
    """The first ``.loc`` with a real line inside the PTX function ``name``."""
    header = re.compile(r"^\s*(?:\.\w+\s+)*\.(?:entry|func)\s+(?:\([^)]*\)\s*)?" + re.escape(name) + r"\s*\(?\s*$")
    start = next((k for k, text in enumerate(lines) if header.match(text)), None)
    if start is None:
        return None
    for text in lines[start + 1 :]:
        if _FUNCTION_START.match(text):
            return None
        loc = _LOC.match(text)
        if loc is not None and int(loc["line"]) > 0:
            return SourcePlace(file=int(loc["file"]), line=int(loc["line"]), column=int(loc["col"]))
    return None


def source_place(lines: list[str], ptx_line: int) -> SourcePlace | None:
    """The last ``.loc`` with a real line at or before PTX line ``ptx_line`` (1-based), within its function."""
    for index in range(min(ptx_line, len(lines)) - 1, -1, -1):
        text = lines[index]
        loc = _LOC.match(text)
        if loc is not None and int(loc["line"]) > 0:
            inlined = _INLINED.search(loc["rest"])
            function = _FUNCTION_NAME.search(loc["rest"])
            return SourcePlace(
                file=int(loc["file"]),
                line=int(loc["line"]),
                column=int(loc["col"]),
                function=function["label"] if function else None,
                inlined_at=(int(inlined["file"]), int(inlined["line"]), int(inlined["col"])) if inlined else None,
            )
        if _FUNCTION_START.match(text):
            return None
    return None


def _info_strings(lines: list[str]) -> dict[str, str]:
    """``$L__info_stringN`` labels of the ``.debug_str`` section, decoded from their ``.b8`` bytes."""
    names: dict[str, str] = {}
    index = 0
    while index < len(lines):
        label = _LABEL.match(lines[index])
        index += 1
        if label is None:
            continue
        data: list[int] = []
        while index < len(lines) and (values := _BYTES.match(lines[index])) is not None:
            data.extend(int(v) for v in values["values"].replace(",", " ").split())
            index += 1
        names[label["label"]] = bytes(data).split(b"\0", 1)[0].decode("utf-8", "replace")
    return names
