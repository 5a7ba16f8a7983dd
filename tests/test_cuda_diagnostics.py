"""nvcc / cudafe / g++ / ptxas / nvlink output → Diagnostics, on recorded real output and on nvcc run now.

Every test that takes ``compiler`` runs twice: on ``tests/cuda/recorded`` (everywhere) and on the same
commands run again now (``live``; skipped without nvcc/g++), which catches a changed nvcc.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import cuda_recordings as recordings
import pytest

from evoteam.gpu_bench.build.cuda.diagnostics import parse_diagnostics
from evoteam.gpu_bench.build.cuda.edg_output import realign_column
from evoteam.gpu_bench.build.cuda.paths import relative_path
from evoteam.gpu_bench.build.cuda.ptx_lines import map_ptx_lines
from evoteam.gpu_bench.schema import Diagnostic, Related, Severity

CUDA = Path(__file__).parent / "cuda"


SOURCES = {str(p.relative_to(CUDA)): p.read_text() for p in CUDA.glob("*/**/*") if p.suffix in (".cu", ".cuh", ".cpp")}


class Source(Protocol):
    """``Recorded`` or ``Live`` of ``tests/cuda_recordings.py``."""

    kind: str
    build: str

    def missing(self, name: str) -> str | None: ...
    def output(self, name: str) -> str: ...
    def ptx(self, name: str) -> str: ...


@dataclass
class Compiler:
    """Parsed output of the recorded cases, recorded or live."""

    source: Source

    @property
    def kind(self) -> str:
        return self.source.kind

    @property
    def build(self) -> str:
        return self.source.build

    def diagnostics(
        self, name: str, *, host_tool: str = "host", sources: dict[str, str] | None = None
    ) -> list[Diagnostic]:
        missing = self.source.missing(name)
        if missing:
            pytest.skip(f"{missing} is not installed")
        return parse_diagnostics(self.source.output(name), self.build, host_tool=host_tool, sources=sources)

    def ptx(self, name: str) -> str:
        return self.source.ptx(name)


# The tier comes with the compiler: recorded outputs are unit tests, the live compiler (nvcc) an integration one.
@pytest.fixture(
    scope="module",
    params=[
        pytest.param("recorded", marks=pytest.mark.unit),
        pytest.param("live", marks=[pytest.mark.slow, pytest.mark.integration]),
    ],
)
def compiler(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Compiler:
    if request.param == "recorded":
        return Compiler(recordings.Recorded())
    return Compiler(recordings.Live(tmp_path_factory.mktemp("cuda-build")))


def plain(text: str) -> str:
    """g++ quotes with ‘’ in UTF-8 locales and '' in the C locale."""
    return text.replace("‘", "'").replace("’", "'")


def only(diagnostics: list[Diagnostic]) -> Diagnostic:
    assert len(diagnostics) == 1, diagnostics
    return diagnostics[0]


# --- front end (cudafe / EDG) ---


def test_undefined_identifier(compiler: Compiler) -> None:
    d = only(compiler.diagnostics("undefined_identifier"))
    assert (d.file, d.line, d.column, d.severity, d.code, d.tool) == (
        "broken/undefined_identifier.cu",
        5,
        34,
        Severity.ERROR,
        None,
        "nvcc",
    )
    assert d.message == 'identifier "undefined_bias" is undefined'
    assert d.related == []


def test_type_mismatch_warnings_are_reported_once(compiler: Compiler) -> None:
    truncation, format_string = compiler.diagnostics("type_mismatch")
    assert (truncation.line, truncation.column, truncation.code, truncation.severity) == (
        6,
        27,
        "69-D",
        Severity.WARNING,
    )
    assert truncation.message == "integer conversion resulted in truncation"
    assert (format_string.line, format_string.column, format_string.code) == (7, 20, "181-D")
    assert 'expected type "int" but argument has type "double"' in format_string.message


def test_unused_variables(compiler: Compiler) -> None:
    declared, set_only = compiler.diagnostics("unused_variable")
    assert (declared.file, declared.line, declared.column, declared.code) == (
        "broken/unused_variable.cu",
        4,
        9,
        "177-D",
    )
    assert declared.message == 'variable "unused_index" was declared but never referenced'
    assert (set_only.line, set_only.column, set_only.code) == (5, 11, "550-D")
    assert set_only.message == 'variable "scratch" was set but never used'


def test_template_instantiation_context(compiler: Compiler) -> None:
    d = only(compiler.diagnostics("template_instantiation"))
    assert (d.file, d.line, d.column) == ("broken/template_instantiation.cu", 5, 12)
    assert d.message == 'expression must have class type but it has type "float"'
    assert d.related == [
        Related(
            file="broken/template_instantiation.cu", line=12, message='instantiation of "T twice(T) [with T=float]"'
        ),
        Related(
            file="broken/template_instantiation.cu",
            line=15,
            message='instantiation of "void scale(T *, int) [with T=float]"',
        ),
    ]


def test_template_error_in_a_header_names_the_instantiating_file(compiler: Compiler) -> None:
    d = only(compiler.diagnostics("template_in_header"))
    assert (d.file, d.line, d.column) == ("broken/include/load_twice.cuh", 5, 12)
    assert d.related == [
        Related(
            file="broken/template_in_header.cu",
            line=6,
            message='instantiation of "T load_twice(const T *) [with T=float]"',
        )
    ]


def test_continued_message_and_notes(compiler: Compiler) -> None:
    d = only(compiler.diagnostics("overload_notes", sources=SOURCES))
    assert d.message == 'no instance of overloaded function "take" matches the argument list\n' + (
        "argument types are: (float *, int)"
    )
    assert (d.line, d.column) == (7, 14)
    assert [(r.file, r.line, r.column) for r in d.related] == [
        ("broken/overload_notes.cu", 3, 18),
        ("broken/overload_notes.cu", 2, 18),
    ]
    assert d.related[0].message.startswith('function "take(float, float)" does not match')


def test_caret_columns_follow_the_macro_expanded_echo_without_sources(compiler: Compiler) -> None:
    """cudafe echoes ``__device__`` as ``__attribute__((device))``; only the real source can correct that."""
    d = only(compiler.diagnostics("overload_notes"))
    assert [r.column for r in d.related] == [31, 31]


def test_elided_instantiation_contexts(compiler: Compiler) -> None:
    d = only(compiler.diagnostics("recursion"))
    assert (d.line, d.column) == (5, 30)
    assert d.message.startswith("excessive recursion at instantiation of member")
    assert len(d.related) == 11
    assert d.related[5] == Related(file="broken/recursion.cu", line=0, message="190 instantiation contexts not shown")
    assert (d.related[-1].line, d.related[-1].message) == (8, 'instantiation of class "Depth<N> [with N=0]"')


# --- host compiler (g++ behind nvcc, and plain g++) ---


def test_host_compiler_error_in_a_cu_file(compiler: Compiler) -> None:
    d = only(compiler.diagnostics("host_error"))
    assert (d.file, d.line, d.column, d.end_column, d.severity, d.tool) == (
        "broken/host_error.cu",
        6,
        16,
        18,
        Severity.ERROR,
        "host",
    )
    assert (
        plain(d.message)
        == "call to 'host_only_entry' declared with attribute error: host_only_entry must not be called"
    )
    assert [(r.line, plain(r.message)) for r in d.related] == [(0, "In function 'void launch()'")]


def test_host_assembler_error(compiler: Compiler) -> None:
    d = only(compiler.diagnostics("host_asm"))
    assert (d.file, d.line, d.column, d.severity, d.tool) == ("broken/host_asm.cu", 5, 0, Severity.ERROR, "host")
    assert d.message == "operand type mismatch for `mov'"


def test_missing_include_is_a_fatal_error(compiler: Compiler) -> None:
    d = only(compiler.diagnostics("missing_include"))
    assert (d.file, d.line, d.column, d.end_column, d.severity) == (
        "broken/missing_include.cu",
        2,
        10,
        30,
        Severity.ERROR,
    )
    assert d.message == "no_such_header.cuh: No such file or directory"


def test_plain_gcc_notes_and_instantiation_context(compiler: Compiler) -> None:
    arity, unused, conversion, operator = compiler.diagnostics("host_template", host_tool="gcc")
    file = "broken/host_template.cpp"
    assert {d.tool for d in (arity, unused, conversion, operator)} == {"gcc"}
    assert (arity.line, arity.column, arity.end_column) == (23, 32, 35)
    assert plain(arity.message) == "too few arguments to function 'int area(int, int)'"
    assert arity.related[-1] == Related(file=file, line=17, column=5, message="declared here")
    assert (unused.severity, unused.code, unused.line, unused.column, unused.end_column) == (
        Severity.WARNING,
        "-Wunused-variable",
        21,
        9,
        21,
    )
    assert plain(unused.message) == "unused variable 'unused_count'"
    assert (conversion.line, conversion.column) == (12, 15)
    for d in (conversion, operator):
        assert [(r.line, r.column, plain(r.message)) for r in d.related] == [
            (0, 0, "In instantiation of 'T sum(const std::vector<T>&) [with T = Point]'"),
            (23, 15, "required from here"),
        ]
    assert (operator.line, operator.column, operator.end_column) == (13, 35, 42)


# --- ptxas and nvlink ---


def test_ptxas_error_from_bad_inline_ptx_maps_to_the_asm_line(compiler: Compiler) -> None:
    found = compiler.diagnostics("bad_inline_ptx")
    mismatch, aborted = found
    assert mismatch.tool == "ptxas" and mismatch.severity == Severity.ERROR
    assert mismatch.file.endswith("_bad_inline_ptx.compute_90.ptx")
    assert mismatch.message == "Arguments mismatch for instruction 'mov'"
    assert (aborted.file, aborted.line, aborted.message) == ("", 0, "Ptx assembly aborted due to errors")
    ptx = compiler.ptx("bad_inline_ptx")
    assert "mov.u32" in ptx.splitlines()[mismatch.line - 1]
    if compiler.kind == "recorded":
        assert mismatch.line == 31
    mapped, unchanged = map_ptx_lines(found, ptx, compiler.build)
    assert (mapped.file, mapped.line, mapped.column, mapped.message) == (
        "broken/bad_inline_ptx.cu",
        6,
        5,
        mismatch.message,
    )
    assert mapped.related == [
        Related(file=mismatch.file, line=mismatch.line, message=f"in generated PTX line {mismatch.line}")
    ]
    assert unchanged == aborted


def test_ptxas_error_in_inlined_header_code(compiler: Compiler) -> None:
    found = compiler.diagnostics("inlined_bad_ptx")
    mapped = map_ptx_lines(found, compiler.ptx("inlined_bad_ptx"), compiler.build)[0]
    assert (mapped.file, mapped.line, mapped.column) == ("broken/include/bad_move.cuh", 5, 5)
    assert mapped.related[1] == Related(
        file="broken/inlined_bad_ptx.cu", line=6, column=5, message="_Z8bad_movef inlined here"
    )


def test_invalid_instruction(compiler: Compiler) -> None:
    found = compiler.diagnostics("invalid_instruction")
    assert [d.message for d in found] == [
        "Unknown modifier '.op'",
        "Not a name of any known instruction: 'bogus'",
        "Ptx assembly aborted due to errors",
    ]
    mapped = map_ptx_lines(found, compiler.ptx("invalid_instruction"), compiler.build)
    assert [(d.file, d.line, d.column) for d in mapped[:2]] == [("broken/invalid_instruction.cu", 4, 5)] * 2


def test_too_much_shared_memory_points_at_the_kernel(compiler: Compiler) -> None:
    d = only(compiler.diagnostics("too_much_shared"))
    assert (d.file, d.line, d.severity, d.tool) == ("", 0, Severity.ERROR, "ptxas")
    assert d.message == "Entry function '_Z3hogPf' uses too much shared data (0x3a980 bytes, 0x38c00 max)"
    mapped = only(map_ptx_lines([d], compiler.ptx("too_much_shared"), compiler.build))
    assert (mapped.file, mapped.line, mapped.message) == ("broken/too_much_shared.cu", 2, d.message)


def test_ptxas_warnings_without_location(compiler: Compiler) -> None:
    first, second = compiler.diagnostics("spill_maxrregcount")
    assert (first.tool, first.severity, first.line) == ("ptxas", Severity.WARNING, 0)
    assert first.message == "Too big maxrregcount value specified 16, will be ignored"
    assert second.message.startswith("For profile sm_90a adjusting per thread register count")


def test_nvlink_undefined_reference(compiler: Compiler) -> None:
    d = only(compiler.diagnostics("link_error"))
    assert (d.tool, d.severity, d.file, d.line) == ("nvlink", Severity.ERROR, "", 0)
    assert d.message.startswith("Undefined reference to '_Z6helperf' in '")


@pytest.mark.parametrize("name", ["spill", "shared_sync", "shared_sync_rdc", "shared_sync_gencode", "template_kernel"])
def test_good_kernels_have_no_diagnostics(compiler: Compiler, name: str) -> None:
    assert compiler.diagnostics(name) == []


# --- shapes that the recordings do not show (pure, on short texts) ---


@pytest.mark.unit
def test_catastrophic_error_and_standalone_remark() -> None:
    text = (
        'k.cu(3): catastrophic error: cannot open source file "missing.h"\n'
        '  #include "missing.h"\n'
        "                      ^\n"
        "\n"
        "k.cu(9): remark #1234-D: something to know\n"
    )
    error, remark = parse_diagnostics(text)
    assert (error.severity, error.line, error.column, error.message) == (
        Severity.ERROR,
        3,
        21,
        'cannot open source file "missing.h"',
    )
    assert (remark.severity, remark.code, remark.column, remark.related) == (Severity.NOTE, "1234-D", 0, [])


@pytest.mark.unit
def test_include_chain_and_driver_messages() -> None:
    text = (
        "In file included from inc/a.h:2,\n"
        "                 from k.cu:1:\n"
        "inc/b.h:7:3: error: 'x' was not declared in this scope\n"
        "nvcc fatal   : Unknown option '-foo'\n"
        "cc1plus: warning: command-line option '-Wbogus' is valid for C only\n"
        "collect2: error: ld returned 1 exit status\n"
    )
    error, nvcc, driver = parse_diagnostics(text)
    assert error.related == [
        Related(file="inc/a.h", line=2, message="included from here"),
        Related(file="k.cu", line=1, message="included from here"),
    ]
    assert (nvcc.tool, nvcc.severity, nvcc.message) == ("nvcc", Severity.ERROR, "Unknown option '-foo'")
    assert (driver.file, driver.line, driver.severity, driver.tool) == ("", 0, Severity.WARNING, "host")


@pytest.mark.unit
def test_werror_flag_is_reported_as_the_warning_flag() -> None:
    d = only(parse_diagnostics("a.cpp:1:5: error: unused variable 'x' [-Werror=unused-variable]\n"))
    assert (d.code, d.message) == ("-Wunused-variable", "unused variable 'x'")


@pytest.mark.unit
def test_paths_outside_the_build_dir_stay_absolute() -> None:
    assert relative_path("/opt/cuda/include/cuda.h", "/b/work") == "/opt/cuda/include/cuda.h"
    assert relative_path("/b/build/x/k.cu", "/b/build/") == "x/k.cu"
    assert relative_path("/b/workshop/k.cu", "/b/work") == "/b/workshop/k.cu"
    assert relative_path("k.cu", "/b/work") == "k.cu"


@pytest.mark.unit
def test_realign_column_falls_back_to_the_same_token() -> None:
    echo = "__attribute__((device)) int f(int a) { return g(a) + 1; }"
    real = "__device__ int f(int a) { return g(a) + 2; }"
    assert realign_column(echo, echo.index("g(") + 1, real) == real.index("g(") + 1
    assert realign_column(echo, 5, None) == 5


@pytest.mark.unit
def test_ptx_mapping_stays_inside_the_function_and_skips_line_zero() -> None:
    ptx = "\n".join(
        [
            '.file 1 "/b/k.cu"',
            ".visible .entry first(",
            ")",
            "{",
            ".loc 1 4 2",
            "ret;",
            "}",
            ".visible .entry second(",
            ")",
            "{",
            "mov.u32 %r1, %f1;",
            ".loc 1 0 0",
            "add.u32 %r1, %f1;",
            ".loc 1 9 3, function_name $L__info_string0, inlined_at 1 12 7",
            "add.f32 %r1, %f1;",
            "}",
        ]
    )
    at = {n: Diagnostic(file="k.ptx", line=n, severity=Severity.ERROR, message="m", tool="ptxas") for n in (11, 13, 15)}
    before_any_loc, after_line_zero, inlined = map_ptx_lines(list(at.values()), ptx, "/b")
    assert before_any_loc == at[11]
    assert after_line_zero == at[13]
    assert (inlined.file, inlined.line, inlined.column) == ("k.cu", 9, 3)
    assert inlined.related[1] == Related(file="k.cu", line=12, column=7, message="a function inlined here")
