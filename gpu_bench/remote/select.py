"""Reads a runner string (``local``, ``ssh://user@host[:port]``, ``ray``, ``ray://ADDRESS``) and builds that runner.

The SSH and Ray runners are imported only when asked for: their libraries are optional extras.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel

from evoteam.gpu_bench.runner import BenchInputError, LocalRunner, Runner
from evoteam.gpu_bench.worker.threads import ThreadPolicy

RUNNER_HELP = "local (default), ssh://user@host[:port], ray (a local or the running cluster) or ray://ADDRESS"


class RunnerSpecError(BenchInputError):
    """A runner string that names no runner (or one whose library is not installed)."""


class RunnerSpec(BaseModel):
    kind: Literal["local", "ssh", "ray"]
    address: str | None = None
    """The SSH target, or the Ray address (None: start or join one on this machine)."""


def parse_runner(text: str) -> RunnerSpec:
    spec = text.strip()
    if spec in ("", "local"):
        return RunnerSpec(kind="local")
    if spec == "ray":
        return RunnerSpec(kind="ray")
    if spec.startswith("ray://") and len(spec) > len("ray://"):
        return RunnerSpec(kind="ray", address=spec)
    if spec.startswith("ssh://"):
        from evoteam.gpu_bench.remote.ssh_target import SshTarget

        try:
            return RunnerSpec(kind="ssh", address=str(SshTarget.parse(spec)))
        except ValueError as exc:
            raise RunnerSpecError(f"--runner: {exc}") from None
    raise RunnerSpecError(f"--runner: unknown runner {text!r}; expected {RUNNER_HELP}")


def make_runner(
    text: str,
    *,
    memory_limit_mb: int | None = None,
    gpu: int | None = None,
    cache_root: Path | None = None,
    remote_command: list[str] | None = None,
    threads: ThreadPolicy | None = None,
) -> Runner:
    """The runner ``text`` names; ``gpu`` is the GPU a local or SSH worker gets (Ray assigns its own);
    ``threads`` is a local worker's thread policy (remote workers choose their own and record it)."""
    spec = parse_runner(text)
    if spec.kind == "local":
        return LocalRunner(cache_root=cache_root, memory_limit_mb=memory_limit_mb, gpu=gpu, threads=threads)
    if spec.kind == "ssh":
        try:
            from evoteam.gpu_bench.remote.ssh import SshRunner
        except ImportError as exc:
            raise RunnerSpecError(f"--runner ssh needs asyncssh: pip install 'evoteam[ssh]' ({exc})") from None
        assert spec.address is not None
        return SshRunner(spec.address, remote_command, gpu=gpu, memory_limit_mb=memory_limit_mb)
    try:
        from evoteam.gpu_bench.remote.ray_runner import RayRunner
    except ImportError as exc:
        raise RunnerSpecError(f"--runner ray needs Ray: pip install 'evoteam[ray]' ({exc})") from None
    return RayRunner(spec.address, memory_limit_mb=memory_limit_mb)
