"""A second real client: Neovim's built-in LSP client, headless, on the evolved sample repository. It starts
``evoteam serve``, opens the kernel file, asks for what the server advertises (see ``tests/nvim/evoteam_client.lua``)
and shuts the server down; the test checks what it got. Skipped where ``nvim`` is not installed."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from lsp_support import evolved_repo, server_env

NVIM = shutil.which("nvim")
CLIENT = Path(__file__).parent / "nvim" / "evoteam_client.lua"

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(NVIM is None, reason="nvim is not installed (Debian: apt-get install neovim)"),
]


@pytest.fixture
def evolved(tmp_path_factory: pytest.TempPathFactory, tmp_path: Path) -> tuple[Path, str]:
    return evolved_repo(tmp_path_factory.getbasetemp(), tmp_path / "repo")


def neovim_session(repo: Path, tmp_path: Path) -> dict[str, Any]:
    """Runs the Lua client once; what it wrote (its error, if any, is in ``"error"``)."""
    assert NVIM is not None
    out = tmp_path / "nvim.json"
    nvim_home = tmp_path / "nvim-home"
    env = {
        **server_env(repo),
        "EVOTEAM_NVIM_CMD": json.dumps([sys.executable, "-m", "evoteam.cli.main", "serve"]),
        "EVOTEAM_NVIM_ROOT": str(repo),
        "EVOTEAM_NVIM_FILE": str(repo / "kernel.cpp"),
        "EVOTEAM_NVIM_ENTRY": "scale_add",
        "EVOTEAM_NVIM_OUT": str(out),
        **{f"XDG_{kind}_HOME": str(nvim_home / kind.lower()) for kind in ("CONFIG", "DATA", "STATE", "CACHE")},
    }
    done = subprocess.run(
        [NVIM, "--headless", "--clean", "-n", "-c", f"luafile {CLIENT}"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=150,
        stdin=subprocess.DEVNULL,
    )
    assert out.exists(), f"nvim wrote nothing (exit {done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def test_neovim_attaches_asks_and_shuts_the_server_down(evolved: tuple[Path, str], tmp_path: Path) -> None:
    repo, run = evolved
    seen = neovim_session(repo, tmp_path)
    assert "error" not in seen, seen.get("error")
    assert seen["attached"] is True
    assert seen["exit"] == {"code": 0, "signal": 0}  # shutdown, then exit: a clean stop

    status = seen["requests"]["status"]["result"]
    assert status["root"] == str(repo.resolve()) and status["runs"] == [run] and status["broken"] == {}
    assert status["settings"]["budget"] == 123456  # Neovim's `settings`, sent on init
    features, capabilities = status["features"], seen["capabilities"]
    asked = set(seen["requests"])

    assert ("hover" in asked) == bool(capabilities.get("hoverProvider"))
    if "hover" in asked:  # the hover feature: something about the kernel's results at its entry point
        hover = seen["requests"]["hover"]
        assert "error" not in hover and hover["result"] not in (None, [], {}), hover
    for key in ("code_lens", "inlay_hints"):
        if key in asked:
            answer = seen["requests"][key]
            assert "error" not in answer and isinstance(answer["result"], list) and answer["result"], answer
    if "code_actions" in asked:
        actions = seen["requests"]["code_actions"]
        assert "error" not in actions and isinstance(actions["result"], list), actions
        assert all(isinstance(a.get("title"), str) and a["title"] for a in actions["result"]), actions
    if "commands" in features:
        [summary] = seen["requests"]["runs"]["result"]
        assert summary["run"] == run and summary["kernel"] == "scale_add"
    if "diagnostics" in features:
        uri = (repo / "kernel.cpp").as_uri()
        published = [d for d in seen["diagnostics"] if d["uri"] == uri]
        assert published and all(isinstance(d["diagnostics"], list) for d in published), seen["diagnostics"]
