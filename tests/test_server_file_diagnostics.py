"""Diagnostics of kernel files that are no task, over stdio: a C++ or CUDA file of the workspace gets its
compiler's messages (a header through a source that includes it), with include paths and defines from the
settings and from compile_commands.json; CUDA files get their kernels' ptxas resources as inlay hints, for the
architecture of the settings; typing compiles after a pause (the result of a text that changed meanwhile is
dropped), and that can be turned off."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from lsp_support import lsp_session, sample_repo, status
from lsprotocol import types as lsp

pytest.importorskip("pytest_lsp", reason="pytest-lsp is not installed (a dev tool: pip install -e .[dev])")

from pytest_lsp import LanguageClient

from evoteam.gpu_bench.build.cuda.nvcc import find_nvcc

pytestmark = pytest.mark.integration
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")

BROKEN = """#include <cstdint>
extern "C" void twice(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    out[i] = 2.0f * x[i];
  }
  const int64_t k = undefined_name + 1;
}
"""
CLEAN = BROKEN.replace("  const int64_t k = undefined_name + 1;\n", "")
KERNEL_CU = """#include <cstdint>
template <int N>
__global__ void __launch_bounds__(256) scale(float* x, int n) {
  __shared__ float tile[N * 32];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    tile[threadIdx.x % (N * 32)] = x[i];
    __syncthreads();
    x[i] = tile[(threadIdx.x + 1) % (N * 32)] * N;
  }
}
template __global__ void scale<4>(float*, int);

extern "C" __global__ void add(const float* a, float* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] += a[i];
}
"""


def open_file(client: LanguageClient, path: Path, text: str | None = None, language: str = "cpp") -> str:
    uri = path.as_uri()
    body = path.read_text() if text is None else text
    item = lsp.TextDocumentItem(uri=uri, language_id=language, version=1, text=body)
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(text_document=item))
    return uri


def change(client: LanguageClient, uri: str, text: str, version: int) -> None:
    document = lsp.VersionedTextDocumentIdentifier(uri=uri, version=version)
    whole = lsp.TextDocumentContentChangeWholeDocument(text=text)
    client.text_document_did_change(lsp.DidChangeTextDocumentParams(text_document=document, content_changes=[whole]))


def save(client: LanguageClient, uri: str) -> None:
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(text_document=lsp.TextDocumentIdentifier(uri=uri)))


async def published(client: LanguageClient, uri: str, timeout: float = 90) -> list[lsp.Diagnostic]:
    async with asyncio.timeout(timeout):
        while True:
            params = await client.wait_for_notification(lsp.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
            if params.uri == uri:
                return list(params.diagnostics)


def errors(found: list[lsp.Diagnostic]) -> list[lsp.Diagnostic]:
    return [d for d in found if d.severity == lsp.DiagnosticSeverity.Error]


async def inlay_hints(client: LanguageClient, uri: str, lines: int = 100) -> list[lsp.InlayHint]:
    whole = lsp.Range(lsp.Position(0, 0), lsp.Position(lines, 0))
    params = lsp.InlayHintParams(text_document=lsp.TextDocumentIdentifier(uri=uri), range=whole)
    return list(await client.text_document_inlay_hint_async(params) or [])


async def test_a_cpp_file_that_is_no_task_gets_its_compiler_messages_and_a_clean_save_clears_them(
    tmp_path: Path,
) -> None:
    repo = sample_repo(tmp_path / "repo")
    (repo / "other.cpp").write_text(BROKEN)
    (repo / "notes.txt").write_text("undefined_name\n")
    async with lsp_session(repo) as client:
        notes = open_file(client, repo / "notes.txt", language="plaintext")
        uri = open_file(client, repo / "other.cpp")
        [error] = errors(await published(client, uri))
        assert "undefined_name" in error.message and error.range.start.line == 5
        assert error.data == {"kind": "compile", "tool": "gcc"} and error.source == "evoteam"
        change(client, uri, CLEAN, 2)
        save(client, uri)
        assert errors(await published(client, uri)) == []
        await status(client)
        assert notes not in client.diagnostics  # not a kernel file


async def test_a_file_outside_the_workspace_gets_nothing(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "stray.cpp").write_text(BROKEN)
    (repo / "other.cpp").write_text(BROKEN)
    async with lsp_session(repo) as client:
        stray = open_file(client, elsewhere / "stray.cpp")
        uri = open_file(client, repo / "other.cpp")  # compiled after stray.cpp would have been
        assert errors(await published(client, uri))
        await status(client)
        assert stray not in client.diagnostics


async def test_include_paths_and_defines_come_from_the_settings_and_compile_commands(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    (repo / "third").mkdir()
    (repo / "third" / "lanes.h").write_text("constexpr int kLanes = 8;\n")
    (repo / "gen").mkdir()
    (repo / "gen" / "width.h").write_text("constexpr int kWidth = 4;\n")
    src = repo / "src"
    src.mkdir()
    text = (
        '#include "lanes.h"\n#include "width.h"\n'
        "#ifndef EVOTEAM_FLAVOUR\n#error EVOTEAM_FLAVOUR is not defined\n#endif\n"
        'extern "C" int lanes() { return kLanes * kWidth * EVOTEAM_FLAVOUR; }\n'
    )
    (src / "uses.cpp").write_text(text)
    (src / "header_only.hpp").write_text('#pragma once\n#include "width.h"\ninline int width() { return kWidth; }\n')
    async with lsp_session(repo) as client:
        uri = open_file(client, src / "uses.cpp")
        first = errors(await published(client, uri))
        assert any("lanes.h" in d.message for d in first), [d.message for d in first]
    database = [
        {
            "directory": str(repo / "build"),
            "file": "../src/uses.cpp",
            "arguments": ["g++", "-I../gen", "-D", "EVOTEAM_FLAVOUR=2", "-std=c++17", "-c", "../src/uses.cpp"],
        }
    ]
    (repo / "build").mkdir()
    (repo / "build" / "compile_commands.json").write_text(json.dumps(database))
    async with lsp_session(repo, settings={"includePaths": ["third"]}) as client:
        uri = open_file(client, src / "uses.cpp")
        assert errors(await published(client, uri)) == []
        header = open_file(client, src / "header_only.hpp")  # no entry: its folder's include path
        assert errors(await published(client, header)) == []


async def test_typing_compiles_after_a_pause_and_a_result_for_an_older_text_is_dropped(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    (repo / "other.cpp").write_text(BROKEN)
    async with lsp_session(repo) as client:
        uri = open_file(client, repo / "other.cpp")
        change(client, uri, CLEAN, 2)  # before the open's compile is done: its result is stale
        assert errors(await published(client, uri)) == []  # no save: the change alone was compiled
        change(client, uri, BROKEN, 3)
        change(client, uri, BROKEN.replace("undefined_name", "other_undefined"), 4)
        [error] = errors(await published(client, uri))
        assert "other_undefined" in error.message  # version 3 was never compiled alone or shown


async def test_compile_on_change_can_be_turned_off(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    (repo / "other.cpp").write_text(CLEAN)
    async with lsp_session(repo, settings={"compileOnChange": False}) as client:
        uri = open_file(client, repo / "other.cpp")
        assert errors(await published(client, uri)) == []
        change(client, uri, BROKEN, 2)
        with pytest.raises(TimeoutError):
            await published(client, uri, timeout=4)
        save(client, uri)
        assert errors(await published(client, uri))


@needs_nvcc
async def test_a_cuda_file_gets_ptxas_resources_as_inlay_hints_for_the_settings_arch(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    (repo / "kernels.cu").write_text(KERNEL_CU)
    async with lsp_session(repo, settings={"cudaArch": "sm_80"}) as client:
        uri = open_file(client, repo / "kernels.cu", language="cuda")
        assert errors(await published(client, uri, timeout=180)) == []
        hints = await inlay_hints(client, uri)
        by_line = {h.position.line: h for h in hints}
        assert set(by_line) == {2, 13}, [(h.position, h.label) for h in hints]  # definitions, not instantiations
        scale, add = by_line[2], by_line[13]
        assert scale.position.character == KERNEL_CU.splitlines()[2].index("scale(") + len("scale")
        assert isinstance(scale.label, str) and scale.label.startswith("ptxas: ") and "regs" in scale.label
        assert "512 B smem" in scale.label  # 4 * 32 floats
        assert isinstance(add.label, str) and "smem" not in add.label
        assert isinstance(scale.tooltip, str) and "scale<4>" in scale.tooltip and "(sm_80)" in scale.tooltip
        assert await inlay_hints(client, uri, lines=2) == []  # asked for lines 0-2: none of them


@needs_nvcc
async def test_a_cuda_header_is_compiled_through_a_source_that_includes_it(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    header = "#pragma once\n__device__ inline float twice(float x) {\n  return 2.0f * x + missing_value;\n}\n"
    (repo / "helpers.cuh").write_text(header)
    async with lsp_session(repo) as client:
        uri = open_file(client, repo / "helpers.cuh", language="cuda")
        [error] = errors(await published(client, uri, timeout=180))
        assert "missing_value" in error.message and error.range.start.line == 2
        assert error.data == {"kind": "compile", "tool": "nvcc"}
