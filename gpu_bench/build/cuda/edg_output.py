"""Read one message of nvcc's C++ front end (cudafe, the EDG parser): header, echoed line, caret, context.

Shape, as nvcc 12-13 print it::

    k.cu(12): error #20-D: identifier "x" is undefined        <- header (the code is optional)
                argument types are: (float *)                  <- optional continuation lines
      int y = x;                                               <- the line, after preprocessing, indented 2
              ^                                                <- caret: the column
              detected during instantiation of "f<T>" at line 7 of k.cu

Pure text work; imports only the schema.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from evoteam.gpu_bench.schema import Diagnostic, Related, Severity

HEADER = re.compile(
    r"^(?P<file>\S.*?)\((?P<line>\d+)\): "
    r"(?P<sev>catastrophic error|internal error|fatal error|error|warning|remark|note)"
    r"(?: #(?P<code>\d+(?:-D)?))?: (?P<msg>.*)$"
)
_CARET = re.compile(r"^\s*\^\s*$")
_AT_LINE = re.compile(r"^(?P<what>.*?) at line (?P<line>\d+)(?: of (?P<file>.+))?$")
_ECHO_INDENT = 2
"""EDG indents the echoed source line by two spaces; the caret line is aligned with the echo."""

SourceLine = Callable[[str, int], str | None]
"""The text of line N (1-based) of a file as the diagnostic names it, or None when not known."""


@dataclass
class EdgMessage:
    diagnostic: Diagnostic
    is_note: bool
    """``note`` messages explain the message before them (remarks stand alone)."""


def parse_edg(lines: list[str], i: int, source_line: SourceLine) -> tuple[EdgMessage, int] | None:
    """The message whose header is ``lines[i]`` and the index after it, or None when it is not a header."""
    head = HEADER.match(lines[i])
    if head is None:
        return None
    end = i + 1
    while end < len(lines) and lines[end][:1] in (" ", "\t") and lines[end].strip():
        end += 1
    block = lines[i + 1 : end]
    caret = next((k for k, text in enumerate(block) if k > 0 and _CARET.match(text)), None)
    file, line = head["file"], int(head["line"])
    column = 0
    if caret is not None:
        message_lines, after = block[: caret - 1], block[caret + 1 :]
        column = max(1, block[caret].index("^") - _ECHO_INDENT + 1)
        column = realign_column(block[caret - 1][_ECHO_INDENT:], column, source_line(file, line))
    else:
        split = next((k for k, text in enumerate(block) if text.strip().startswith("detected during")), len(block))
        message_lines, after = block[:split], block[split:]
    message = "\n".join([head["msg"].strip(), *(text.strip() for text in message_lines)])
    related, extra = _context(after, file)
    severity = head["sev"]
    diagnostic = Diagnostic(
        file=file,
        line=line,
        column=column,
        severity=_SEVERITY.get(severity, Severity.ERROR),
        code=head["code"],
        message="\n".join([message, *extra]),
        tool="nvcc",
        related=related,
    )
    return EdgMessage(diagnostic, is_note=severity == "note"), end


_SEVERITY = {"warning": Severity.WARNING, "remark": Severity.NOTE, "note": Severity.NOTE}


def _context(lines: list[str], file: str) -> tuple[list[Related], list[str]]:
    """Instantiation context (``detected during ...``) as related places; other lines stay message text."""
    related: list[Related] = []
    extra: list[str] = []
    for raw in lines:
        text = raw.strip()
        if text == "detected during:":
            continue
        text = text.removeprefix("detected during ")
        at = _AT_LINE.match(text)
        if at is not None:
            related.append(Related(file=at["file"] or file, line=int(at["line"]), message=at["what"]))
        elif text.startswith("[") and text.endswith("]"):
            related.append(Related(file=file, line=0, message=text.strip("[] ")))
        else:
            extra.append(text)
    return related, extra


def realign_column(echo: str, column: int, source: str | None) -> int:
    """The caret column moved from the echoed (preprocessed) line onto the real source line.

    EDG echoes the line after macro expansion (``__device__`` reads ``__attribute__((device))``), so a
    caret after a macro points too far right. The text from the caret to the end of the line usually
    survives; failing that, the same occurrence of the token under the caret. Unchanged when neither fits.
    """
    if source is None or source.rstrip() == echo.rstrip() or column > len(echo):
        return column
    tail = echo[column - 1 :].rstrip()
    real = source.rstrip()
    if tail and real.endswith(tail):
        return len(real) - len(tail) + 1
    token = re.match(r"\w+|\S", echo[column - 1 :])
    if token is None:
        return column
    pattern = re.compile(re.escape(token[0]))
    nth = len(pattern.findall(echo[: column - 1]))
    found = list(pattern.finditer(real))
    return found[nth].start() + 1 if nth < len(found) else column
