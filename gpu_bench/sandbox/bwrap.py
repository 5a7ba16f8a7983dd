"""The bubblewrap sandbox: a read-only view of the whole file system, private /dev, /proc and IPC, no network,
its own PID namespace (so every process it starts dies with it), secrets hidden, and it dies with its parent.

The GPU device nodes (``/dev/nvidia*``, ``/dev/dri``) are bound in so CUDA works; nothing else of ``/dev`` is.
bubblewrap drops every capability of the sandboxed process, root's included.

Its ``/dev/shm`` is a tmpfs of its own, writable to every process in it (Python's named semaphores live there:
``torch.compile``'s compile workers make some). A tmpfs is memory that no address-space limit counts and no
process's OOM score, and by default it may grow to half the machine's memory: one candidate could hold that
until its worker ends. So it is capped at ``SHARED_MEMORY_BYTES`` where bubblewrap can (``--size``, from
bubblewrap 0.8; the probe falls back to no cap, and says so, where it cannot).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from evoteam.gpu_bench.sandbox.policy import sandbox_environment, secret_paths

NAMESPACES = ("--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
DEVICE_GLOBS = ("nvidia*", "dri")
"""Under /dev: the GPU's device nodes."""
SHARED_MEMORY_BYTES = 256 * 1024 * 1024
"""The most the sandbox's ``/dev/shm`` holds (a named semaphore takes one page)."""


def base_options(shared_memory: int | None = SHARED_MEMORY_BYTES) -> list[str]:
    """Everything but the secrets and the writable folders: the confinement itself, with ``/dev/shm`` capped
    at ``shared_memory`` bytes (None: not capped)."""
    options = ["--die-with-parent", *NAMESPACES, "--ro-bind", "/", "/", "--dev", "/dev"]
    for pattern in DEVICE_GLOBS:
        for node in sorted(Path("/dev").glob(pattern)):
            options += ["--dev-bind-try", str(node), str(node)]
    options += [*(["--size", str(shared_memory)] if shared_memory else []), "--tmpfs", "/dev/shm", "--proc", "/proc"]
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

    def __init__(self, executable: str, version: str, shared_memory: int | None = SHARED_MEMORY_BYTES) -> None:
        self.executable = executable
        self.version = version
        self.shared_memory = shared_memory
        """The cap of the sandbox's ``/dev/shm`` in bytes; None where this bubblewrap cannot set one."""

    @property
    def description(self) -> str:
        shm = f"/dev/shm {self.shared_memory >> 20} MiB" if self.shared_memory else "/dev/shm not capped"
        return f"bubblewrap {self.version}: read-only root, writable workspace, no network, secrets hidden, {shm}"

    def wrap(
        self, command: Sequence[str], *, writable: Sequence[Path], tmpdir: Path, env: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        argv = [self.executable, *base_options(self.shared_memory)]
        for folder in [*writable, tmpdir]:
            folder.mkdir(parents=True, exist_ok=True)
            argv += ["--bind", str(folder), str(folder)]
        argv += hiding_options(secret_paths(env))  # last: a writable folder must not uncover a secret inside it
        return [*argv, "--", *command], sandbox_environment(env, tmpdir)
