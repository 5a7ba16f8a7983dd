"""Which sandbox this process uses: probed once, from ``EVOTEAM_SANDBOX`` (``auto``: bubblewrap when it
works here, else none; ``bwrap``: bubblewrap or an error; ``off``: none, as the user asked).

Inside a sandbox (``EVOTEAM_IN_SANDBOX``) nothing is wrapped again: the process is already confined.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from evoteam.gpu_bench.sandbox.bwrap import SHARED_MEMORY_BYTES, Bubblewrap, base_options
from evoteam.gpu_bench.sandbox.policy import IN_SANDBOX_ENV, Sandbox, Unsandboxed

MODE_ENV = "EVOTEAM_SANDBOX"
MODES = ("auto", "bwrap", "off")
PROBE_TIMEOUT_S = 20.0
INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt install bubblewrap)"


class SandboxUnavailable(RuntimeError):
    """No sandbox is possible here, and the caller needs one."""


class _Inside:
    """Already inside the sandbox: commands run as they are (they are confined by the outer sandbox)."""

    isolated = True
    description = "inside the sandbox"

    def wrap(
        self, command: Sequence[str], *, writable: Sequence[Path], tmpdir: Path, env: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        return list(command), dict(env)


def probe(executable: str | None = None) -> Sandbox:
    """Bubblewrap if it is installed and can build its namespaces here (tried with a real ``true``), else
    ``Unsandboxed`` with the reason."""
    bwrap = executable or shutil.which("bwrap")
    if bwrap is None:
        return Unsandboxed("bubblewrap (bwrap) is not installed")
    try:
        version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
        with tempfile.TemporaryDirectory(prefix="evoteam-probe-") as scratch:
            for shared_memory in (SHARED_MEMORY_BYTES, None):  # no --size before bubblewrap 0.8, nor when setuid
                cmd = [bwrap, *base_options(shared_memory), "--bind", scratch, scratch, "--", "true"]
                tried = subprocess.run(cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
                if tried.returncode == 0:
                    break
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Unsandboxed(f"bubblewrap does not run here: {exc}")
    if tried.returncode != 0:
        why = (tried.stderr.strip() or f"exit status {tried.returncode}").splitlines()[-1]
        return Unsandboxed(
            f"bubblewrap cannot create its namespaces here ({why}); allow unprivileged user namespaces "
            "or run where they are allowed"
        )
    return Bubblewrap(bwrap, version.stdout.strip().removeprefix("bubblewrap ") or "unknown", shared_memory)


_chosen: Sandbox | None = None


def current(env: Mapping[str, str] | None = None) -> Sandbox:
    """This process's sandbox, chosen on first use (see the module docstring)."""
    global _chosen
    source = os.environ if env is None else env
    if source.get(IN_SANDBOX_ENV) == "1":
        return _Inside()
    if _chosen is None:
        mode = source.get(MODE_ENV, "auto").strip().lower() or "auto"
        if mode not in MODES:
            raise SandboxUnavailable(f"{MODE_ENV}={mode!r}: expected one of {', '.join(MODES)}")
        if mode == "off":
            _chosen = Unsandboxed(f"turned off by {MODE_ENV}=off")
        else:
            found = probe()
            if mode == "bwrap" and not found.isolated:
                raise SandboxUnavailable(f"{MODE_ENV}=bwrap but {found.description}")
            _chosen = found
    return _chosen


def reset() -> None:
    """Forgets the choice (tests; a changed ``EVOTEAM_SANDBOX``)."""
    global _chosen
    _chosen = None


def agent_sandbox(unsafe_no_sandbox: bool) -> Sandbox:
    """The sandbox for a run of agents: this process's when it isolates; else ``Unsandboxed`` only when the
    user passed ``--unsafe-no-sandbox`` (a working sandbox is used even then)."""
    chosen = current()
    if chosen.isolated or unsafe_no_sandbox:
        return chosen
    raise SandboxUnavailable(
        f"agent-generated code needs a sandbox, and there is {chosen.description}. Either {INSTALL_HINT}, "
        "or pass --unsafe-no-sandbox to run it unconfined (it can then read your files and use the network)"
    )
