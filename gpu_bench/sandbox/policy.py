"""What a sandboxed process may see: the environment it keeps, the secrets hidden from it, and the
``Sandbox`` seam (with ``Unsandboxed``, the pass-through used when no sandbox is possible or wanted).

The environment is cleared down to what compilers, torch, Triton, CUDA and glibc's heap need; any variable
whose name looks like a credential is dropped even when its prefix is allowed. The secret paths are the usual
credential folders of the home directory plus the API key file (``EVOTEAM_API_KEY_FILE``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

IN_SANDBOX_ENV = "EVOTEAM_IN_SANDBOX"
"""Set inside the sandbox, so nested compiles do not try to sandbox again."""

KEY_FILE_ENV = "EVOTEAM_API_KEY_FILE"

KEPT_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TERM",
        "CC",
        "CXX",
        "CUDAHOSTCXX",
        "LD_LIBRARY_PATH",
        "LIBRARY_PATH",
        "CPATH",
        "C_INCLUDE_PATH",
        "CPLUS_INCLUDE_PATH",
        "PYTHONPATH",
        "PYTHONHASHSEED",
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "XDG_CACHE_HOME",
        "GLIBC_TUNABLES",
    }
)
KEPT_PREFIXES = ("LC_", "CUDA_", "NVCC_", "NVIDIA_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "TORCH_", "PYTORCH_",
                 "TRITON_", "TORCHINDUCTOR_", "EVOTEAM_", "MALLOC_")  # fmt: skip
SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSW", "CREDENTIAL", "AUTH", "COOKIE")

SECRET_HOME_PATHS = (
    ".ssh",
    ".aws",
    ".gnupg",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".pypirc",
    ".claude",
    ".claude.json",
    ".config/gcloud",
    ".config/gh",
    ".config/evoteam",
    ".config/anthropic",
)


def looks_secret(name: str) -> bool:
    upper = name.upper()
    return any(word in upper for word in SECRET_WORDS)


def sandbox_environment(env: Mapping[str, str], tmpdir: Path) -> dict[str, str]:
    """``env`` cleared down to the kept names and prefixes, credentials dropped; ``TMPDIR`` is ``tmpdir``."""
    kept = {
        name: value
        for name, value in env.items()
        if (name in KEPT_NAMES or name.startswith(KEPT_PREFIXES)) and not looks_secret(name)
    }
    kept.setdefault("PATH", os.defpath)
    kept["TMPDIR"] = str(tmpdir)
    kept.setdefault("TRITON_CACHE_DIR", str(tmpdir / "triton"))
    kept.setdefault("TORCH_EXTENSIONS_DIR", str(tmpdir / "torch_extensions"))
    kept.setdefault("TORCHINDUCTOR_CACHE_DIR", str(tmpdir / "torchinductor"))
    kept[IN_SANDBOX_ENV] = "1"
    return kept


def secret_paths(env: Mapping[str, str]) -> list[Path]:
    """The credential files and folders that exist here and must not be visible inside the sandbox."""
    found: list[Path] = []
    home = env.get("HOME")
    if home:
        found += [Path(home) / rel for rel in SECRET_HOME_PATHS]
    key_file = env.get(KEY_FILE_ENV)
    if key_file:
        found.append(Path(key_file))
    return [p for p in found if p.is_absolute() and (p.exists() or p.is_symlink())]


class Sandbox(Protocol):
    @property
    def isolated(self) -> bool:
        """True when commands really run confined (no network, read-only root, secrets hidden)."""
        ...

    @property
    def description(self) -> str:
        """One line for logs, the journal and the editor (what confines, or why nothing does)."""
        ...

    def wrap(
        self, command: Sequence[str], *, writable: Sequence[Path], tmpdir: Path, env: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        """The command line and environment that run ``command`` confined: ``writable`` folders (created if
        missing) and ``tmpdir`` (its ``TMPDIR``) are the only places it may write."""
        ...


class Unsandboxed:
    """Runs commands as they are, with the caller's environment: no isolation (``reason`` says why)."""

    isolated = False

    def __init__(self, reason: str) -> None:
        self.reason = reason

    @property
    def description(self) -> str:
        return f"no sandbox ({self.reason})"

    def wrap(
        self, command: Sequence[str], *, writable: Sequence[Path], tmpdir: Path, env: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        return list(command), dict(env)
