"""Read gcc/g++ messages (and GNU as ones): ``file:line:col: error: msg [-Wflag]``, the source snippet, context.

g++ prints context *before* the message it explains (``In instantiation of ...``, ``required from here``,
``In file included from ...``) and keeps it for the messages after it until a new context starts; notes
follow the message they explain. Pure text work; imports only the schema.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from evoteam.gpu_bench.schema import Diagnostic, Related, Severity

_LOCATION = r"(?P<file>[^\s:][^:]*?):(?P<line>\d+):(?:(?P<col>\d+):)?"
_HEADER = re.compile(
    _LOCATION + r" (?P<sev>fatal error|error|warning|note|sorry, unimplemented|internal compiler error): "
    r"(?P<msg>.*)$"
)
_DRIVER = re.compile(
    r"^(?P<file>cc1plus|cc1|g\+\+|gcc|c\+\+|lto1): (?P<sev>fatal error|error|warning|note): (?P<msg>.*)$"
)
_ASSEMBLER = re.compile(r"^(?P<file>[^\s:][^:]*?):(?P<line>\d+): (?P<sev>Error|Warning): (?P<msg>.*)$")
_SCOPE = re.compile(r"^(?P<file>[^\s:][^:]*?): (?P<msg>(?:In|At) .*?):?$")
_REQUIRED = re.compile(_LOCATION + r"\s{2,}(?P<msg>\S.*)$")
_INCLUDED = re.compile(r"^(?:In file included|\s+) from (?P<file>.+?):(?P<line>\d+)(?::(?P<col>\d+))?[,:]$")
_SNIPPET = re.compile(r"^\s*(?:\d+\s*)?\|")
_CARET_LINE = re.compile(r"^\s*\| (?P<marks>.*)$")
_FLAG = re.compile(r"\s*\[(?P<flag>-W[\w=+-]+|-f[\w-]+)\]$")
_SEVERITY = {"warning": Severity.WARNING, "note": Severity.NOTE}


@dataclass
class GccMessage:
    diagnostic: Diagnostic
    is_note: bool


@dataclass
class GccReader:
    """Reads g++ output line by line, keeping the context that applies to the next messages."""

    tool: str = "host"
    """``host`` for the host compiler behind nvcc, ``gcc`` for a plain g++ run."""
    context: list[Related] = field(default_factory=list)
    _in_context: bool = False

    def read(self, lines: list[str], i: int) -> tuple[GccMessage | None, int] | None:
        """The message at ``lines[i]`` (None for a context line) and the index after it; None if not g++'s."""
        text = lines[i]
        place = _context_line(text)
        if place is not None:
            if not self._in_context:
                self.context = []
            self._in_context = True
            self.context.append(place)
            return None, i + 1
        if text.endswith(": Assembler messages:") or text.startswith("collect2: error: ld returned"):
            return None, i + 1
        head = _HEADER.match(text) or _DRIVER.match(text) or _ASSEMBLER.match(text)
        if head is None:
            return None
        self._in_context = False
        end = i + 1
        while end < len(lines) and _SNIPPET.match(lines[end]):
            end += 1
        groups = head.groupdict()
        column = int(groups.get("col") or 0)
        message, code = _split_flag(head["msg"])
        severity = head["sev"].lower()
        note = severity == "note"
        diagnostic = Diagnostic(
            file="" if head.re is _DRIVER else head["file"],
            line=int(groups.get("line") or 0),
            column=column,
            end_column=_end_column(lines[i + 1 : end], column),
            severity=_SEVERITY.get(severity, Severity.ERROR),
            code=code,
            message=message,
            tool=self.tool,
            related=[] if note else list(self.context),
        )
        return GccMessage(diagnostic, is_note=note), end


def _context_line(text: str) -> Related | None:
    for pattern in (_INCLUDED, _REQUIRED):
        found = pattern.match(text)
        if found is not None:
            message = "included from here" if pattern is _INCLUDED else found["msg"].strip()
            return Related(file=found["file"], line=int(found["line"]), column=int(found["col"] or 0), message=message)
    scope = _SCOPE.match(text)
    if scope is not None and not _HEADER.match(text):
        return Related(file=scope["file"], line=0, message=scope["msg"])
    return None


def _split_flag(message: str) -> tuple[str, str | None]:
    """``unused variable 'x' [-Wunused-variable]`` → the message and ``-Wunused-variable``."""
    found = _FLAG.search(message)
    if found is None:
        return message.strip(), None
    flag = found["flag"]
    if flag.startswith("-Werror="):
        flag = "-W" + flag.removeprefix("-Werror=")
    return message[: found.start()].strip(), flag


def _end_column(snippet: list[str], column: int) -> int:
    """One past the last column of the ``^~~~`` underline that holds the caret; 0 when there is none."""
    for text in snippet:
        found = _CARET_LINE.match(text)
        if found is None or "^" not in found["marks"]:
            continue
        marks = found["marks"]
        at = column - 1 if 0 < column <= len(marks) and marks[column - 1] == "^" else marks.index("^")
        end = at
        while end < len(marks) and marks[end] in "^~":
            end += 1
        return end + 1
    return 0
