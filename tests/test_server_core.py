"""The language server's core over stdio: start-up on a repository, settings, live runs, broken features, and
no request left without an answer."""

from __future__ import annotations

import asyncio
import shutil
import sys
from pathlib import Path

import pytest
from lsp_support import evolved_repo, later_run, lsp_session, raw_request, sample_repo, status
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException

pytestmark = pytest.mark.integration


@pytest.fixture
def evolved(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> tuple[Path, str]:
    return evolved_repo(tmp_path_factory.getbasetemp(), tmp_path / "repo")


async def test_it_starts_on_the_repository_and_knows_its_runs(evolved: tuple[Path, str]) -> None:
    repo, run = evolved
    async with lsp_session(repo) as client:
        found = await status(client)
    assert found["root"] == str(repo.resolve())
    assert found["runs"] == [run] and found["broken"] == {}
    assert found["settings"]["budget"] == 200_000 and found["settings"]["team"] == "evolving"


async def test_valid_settings_are_used_and_bad_ones_are_reported_and_replaced(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    settings = {"budget": -5, "team": "fixed", "rounds": "many", "runner": "ssh://gpu-box", "colour": "red"}
    settings["python"] = "/usr/bin/python3"  # the extension's own setting: neither the server's nor unknown
    async with lsp_session(repo, settings=settings) as client:
        found = await status(client)
        warnings = [m.message for m in client.messages if m.type == lsp.MessageType.Warning]
    assert found["settings"]["team"] == "fixed" and found["settings"]["runner"] == "ssh://gpu-box"
    assert found["settings"]["budget"] == 200_000 and found["settings"]["rounds"] == 3
    [warning] = warnings
    assert "evoteam.budget" in warning and "evoteam.rounds" in warning and "evoteam.colour: unknown" in warning
    assert "python" not in warning


async def test_a_run_that_appears_on_disk_is_announced_live(evolved: tuple[Path, str], tmp_path: Path) -> None:
    repo, run = evolved
    runs = repo / ".evoteam" / "runs"
    async with lsp_session(repo) as client:
        assert (await status(client))["runs"] == [run]
        copy = later_run(run, "beef")
        shutil.copytree(runs / run, tmp_path / copy)  # as a CLI started elsewhere would: written, then moved in
        (tmp_path / copy).rename(runs / copy)
        update = await asyncio.wait_for(client.wait_for_notification("evoteam/runUpdated"), timeout=10)
        assert update.run == copy and update.kernel == "scale_add" and update.finished == "rounds"
        assert update.bestSpeedup is not None and update.bestSpeedup > 0
        assert sorted((await status(client))["runs"]) == sorted([run, copy])


async def test_a_broken_feature_is_left_out_and_the_server_answers(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    command = [
        sys.executable,
        "-c",
        "from evoteam.server.app import build_server; build_server(['no_such_feature']).start_io()",
    ]
    async with lsp_session(repo, command=command) as client:
        found = await status(client)
    assert list(found["broken"]) == ["no_such_feature"] and "ModuleNotFoundError" in found["broken"]["no_such_feature"]


async def test_malformed_params_get_an_error_answer(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    async with lsp_session(repo) as client:
        with pytest.raises(JsonRpcException) as raised:
            await raw_request(client, 901, lsp.TEXT_DOCUMENT_HOVER, {"textDocument": 3})
        assert raised.value.code == -32602 and "textDocument/hover" in str(raised.value)
        assert (await status(client))["root"] == str(repo.resolve())  # still serving


async def test_requests_after_shutdown_are_answered_with_an_error(tmp_path: Path) -> None:
    repo = sample_repo(tmp_path / "repo")
    async with lsp_session(repo) as client:
        await client.shutdown_async(None)
        with pytest.raises(JsonRpcException) as raised:
            await asyncio.wait_for(client.protocol.send_request_async("evoteam/status", {}), timeout=10)
        assert raised.value.code == -32600 and "shut down" in str(raised.value)
