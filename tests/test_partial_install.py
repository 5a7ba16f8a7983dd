"""A partial install collects cleanly: on a machine with only evoteam's base install plus pytest (a GPU machine
running ``pytest -m gpu``), the test modules of optional extras and dev tools skip with a reason instead of
failing to import. Checked by collecting the whole suite in a subprocess where those packages cannot be
imported (a ``-p`` plugin puts a blocker first on ``sys.meta_path``) and their pytest plugins are off."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, TESTS

pytestmark = pytest.mark.integration

EXTRAS = {
    "ray": "ray is not installed",
    "asyncssh": "asyncssh is not installed",
    "claude_agent_sdk": "claude-agent-sdk is not installed",
    "hypothesis": "hypothesis is not installed",
    "pytest_lsp": "pytest-lsp is not installed",
}
"""Optional packages (the extras ray, ssh, claude-code, and dev tools) and the skip reason their modules give."""
ALSO_MISSING = (
    "_hypothesis_pytestplugin",
    "pytest_asyncio",
    "pytest_timeout",
    "kernel_tuner",
    "tvm_ffi",
    "flashinfer_bench",
)
PLUGINS_OFF = ("asyncio", "timeout", "hypothesispytest", "pytest-lsp")
"""The dev extra's pytest plugins (entry-point names), absent from a base install."""

BLOCKER = """
import sys
from importlib.abc import MetaPathFinder

BLOCKED = {blocked!r}


class Blocker(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {{name!r}} (blocked: a partial install)", name=name)
        return None


sys.meta_path.insert(0, Blocker())
"""


def test_the_suite_collects_without_the_optional_extras(tmp_path: Path) -> None:
    (tmp_path / "block_extras.py").write_text(BLOCKER.format(blocked=sorted({*EXTRAS, *ALSO_MISSING})))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "EVOTEAM_TIER"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(tmp_path), env.get("PYTHONPATH")]))
    command = [sys.executable, "-m", "pytest", "-p", "block_extras", "-p", "no:cacheprovider"]
    command += [arg for plugin in PLUGINS_OFF for arg in ("-p", f"no:{plugin}")]
    command += ["--collect-only", "-q", "-rs", "-m", "gpu", str(TESTS)]
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=280)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    last = output.strip().splitlines()[-1]
    assert re.search(r"\d+/\d+ tests collected \(\d+ deselected\)", last) and "error" not in last, last
    assert "tests/test_gpu_runtime.py::" in output  # the GPU tests themselves are collected
    for module, reason in EXTRAS.items():
        assert reason in output, f"no module skipped for the missing {module}:\n{output[-3000:]}"
