"""A planted API key never lands anywhere evoteam writes: a model-backed run (the real SDK against the fake
Messages server) whose Optimizer submits a kernel that hunts for secrets, then ``show`` and ``report``; every
file of the repository, the state folder, the home folder (caches) and every git object, every prompt the model
was sent and everything the CLI printed is searched for the key. The key does reach the one place it belongs:
the API's credentials header (``x-api-key``, or the bearer token the SDK sends to a base URL).
"""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hardening import needs_sandbox, record

from conftest import KERNELS, SCALE_ADD_TOML, git, scale_add_repo
from evoteam.roles.backends.fake_messages_script import FakeReply, text, tool_use
from evoteam.roles.backends.fake_messages_server import FakeMessagesServer

pytestmark = [
    pytest.mark.hardening,
    pytest.mark.slow,
    needs_sandbox(),
]

KEY = "sk-ant-api03-" + secrets.token_urlsafe(32)
HUNTER = (KERNELS / "reads_secrets.cpp").read_text()


def responder(body: dict[str, Any]) -> FakeReply:
    """The whole team: the Optimizer submits the secret hunter, the others use their tools once."""
    first = body["system"][0]["text"]
    if first.startswith("You supervise a team"):
        return text('```json\n{"actions": [], "rationale": "keep the team"}\n```')
    role = re.match(r"You are the (.+?) of a small team", first)
    turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
    plays: dict[str, list[FakeReply]] = {
        "Optimizer": [
            tool_use("write", {"path": "kernel.cpp", "content": HUNTER}),
            tool_use("evaluate", {}),
            tool_use("submit_candidate", {"rationale": "reads what it can find"}),
        ],
        "Debugger": [tool_use("evaluate", {})],
        "Profiling Scientist": [tool_use("profile", {})],
        "Knowledge Integrator": [
            tool_use(
                "write_note",
                {"kind": "failed_attempt", "title": "a kernel that reads secrets", "body": "it found none"},
            )
        ],
    }
    steps = plays.get(role.group(1) if role else "", [])
    return steps[turn] if turn < len(steps) else text("Done.")


def scanned(root: Path) -> tuple[int, int, list[str]]:
    """(files, bytes, the files that hold the key) under ``root``."""
    files = size = 0
    hits = []
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            data = path.read_bytes()
            files += 1
            size += len(data)
            if KEY.encode() in data:
                hits.append(str(path))
    return files, size, hits


def test_a_planted_key_is_in_no_commit_journal_knowledge_log_report_or_prompt(tmp_path: Path) -> None:
    repo = scale_add_repo(tmp_path / "repo", SCALE_ADD_TOML)
    home = tmp_path / "home"
    (home / ".config" / "evoteam").mkdir(parents=True)
    key_file = home / ".config" / "evoteam" / "key"
    key_file.write_text(KEY)
    with FakeMessagesServer(responder, api_key=KEY) as server:
        env = {
            "PATH": "/usr/bin:/bin:/usr/local/bin",
            "HOME": str(home),
            "ANTHROPIC_BASE_URL": server.base_url,
            "EVOTEAM_API_KEY_FILE": str(key_file),  # the key comes from the key file ...
        }
        printed: list[str] = []

        def cli(*args: str, key_in_env: bool = True) -> str:
            done = subprocess.run(
                [sys.executable, "-m", "evoteam.cli.main", *args],
                cwd=repo,
                capture_output=True,
                text=True,
                timeout=280,
                env={**env, "ANTHROPIC_API_KEY": KEY} if key_in_env else env,  # ... or from the environment
            )
            assert done.returncode == 0, done.stderr
            printed.extend([done.stdout, done.stderr])
            return done.stdout

        evolve = ("evolve", "scale_add", "--llm", "anthropic", "--team", "fixed", "--rounds", "1", "--budget", "400000")
        cli(*evolve, key_in_env=False)
        cli("runs")
        [run] = [p.name for p in (repo / ".evoteam" / "runs").iterdir()]
        shown = json.loads(cli("show", run, "--json"))
        cli("report", run)
        cli("resume", run)
        requests = list(server.requests)
    [candidate] = shown["candidates"]
    assert candidate["record"]["status"] == "PASSED"  # the hunter read nothing, so it returned 0
    knowledge = list((repo / ".evoteam" / "knowledge").rglob("*.md"))
    assert knowledge and (repo / ".evoteam" / "runs" / run / "report").is_dir()

    repo_files, repo_bytes, repo_hits = scanned(repo)
    home_files, home_bytes, home_hits = scanned(home)
    home_hits = [h for h in home_hits if h != str(key_file)]  # the user's own key file, where they put it
    objects = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split()
    contents = subprocess.run(
        ["git", "cat-file", "--batch-all-objects", "--batch"], cwd=repo, capture_output=True, check=True
    ).stdout
    prompts = [json.dumps(r.body) for r in requests if r.body is not None]
    prompt_hits = sum(KEY in p for p in prompts)
    printed_hits = sum(KEY in p for p in printed)
    headers = sum(
        KEY in (r.headers.get("x-api-key"), r.headers.get("authorization", "").removeprefix("Bearer "))
        for r in requests
        if r.path == "/v1/messages"
    )
    leaks = len(repo_hits) + len(home_hits) + (KEY.encode() in contents) + prompt_hits + printed_hits
    figure = (
        f"{repo_files + home_files} files ({(repo_bytes + home_bytes) / 1e6:.1f} MB), {len(objects)} git objects, "
        f"{len(prompts)} prompts, {len(printed)} CLI outputs: {leaks} holding the key; "
        f"in the credentials header: {headers}"
    )
    record("secrets", "a planted API key, everything written", figure, leaks == 0 and headers == len(prompts))
    assert not repo_hits and not home_hits, repo_hits + home_hits
    assert KEY.encode() not in contents
    assert prompt_hits == 0 and printed_hits == 0
    assert headers == len(prompts) > 0  # it was used: sent in the header of every call, and only there
