"""The bubblewrap sandbox: a read-only view of the whole file system, private /dev, /proc and IPC, no network,
its own PID namespace (so every process it starts dies with it), secrets hidden, and it dies with its parent.

The GPU device nodes (``/dev/nvidia*``, ``/dev/dri``) are bound in so CUDA works; nothing else of ``/dev`` is.
bubblewrap drops every capability of the sandboxed process, root's included.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from evoteam.gpu_bench.sandbox.policy import sandbox_environment, secret_paths

NAMESPACES = ("--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
DEVICE_GLOBS = ("nvidia*", "dri")
"""Under /dev: the GPU's device nodes."""


def base_options() -> list[str]:
    """Everything but the secrets and the writable folders: the confinement itself."""
    options = ["--die-with-parent", *NAMESPACES, "--ro-bind", "/", "/", "--dev", "/dev"]
    for pattern in DEVICE_GLOBS:
        for node in sorted(Path("/dev").glob(pattern)):
            options += ["--dev-bind-try", str(node), str(node)]
    options += ["--tmpfs", "/dev/shm", "--proc", "/proc"]
    return options


def hiding_options(paths: Sequence[Path]) -> list[str]:
    """An empty folder over each secret folder, /dev/null over each secret file (it cannot even be opened: the
    bind mount is nodev)."""
    options: list[str] = []
    for path in paths:
        if path.is_dir():
            options += ["--tmpfs", str(path)]
        else:
            options += ["--ro-bind", "/dev/null", str(path)]
    return options


class Bubblewrap:
    isolated = True

    def __init__(self, executable: str, version: str) -> None:
        self.executable = executable
        self.version = version

    @property
    def description(self) -> str:
        return f"bubblewrap {self.version}: read-only root, writable workspace, no network, secrets hidden"

    def wrap(
        self, command: Sequence[str], *, writable: Sequence[Path], tmpdir: Path, env: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        argv = [self.executable, *base_options()]
        for folder in [*writable, tmpdir]:
            folder.mkdir(parents=True, exist_ok=True)
            argv += ["--bind", str(folder), str(folder)]
        argv += hiding_options(secret_paths(env))  # last: a writable folder must not uncover a secret inside it
        return [*argv, "--", *command], sandbox_environment(env, tmpdir)
