"""The sandbox that candidate code and the compilers run in: bubblewrap when it works here, else nothing.

``current()`` is this process's sandbox (chosen once: ``EVOTEAM_SANDBOX`` = ``auto``, ``bwrap`` or ``off``);
``wrap`` turns a command into its sandboxed form with a cleared environment. ``agent_sandbox`` is the check
``evoteam evolve`` makes before agents run: without isolation it refuses unless the user said
``--unsafe-no-sandbox`` (which permits running unconfined; it never turns a working sandbox off).
"""

from evoteam.gpu_bench.sandbox.choose import (
    MODE_ENV,
    SandboxUnavailable,
    agent_sandbox,
    current,
    probe,
    reset,
)
from evoteam.gpu_bench.sandbox.policy import (
    IN_SANDBOX_ENV,
    Sandbox,
    Unsandboxed,
    sandbox_environment,
    secret_paths,
)

__all__ = [
    "IN_SANDBOX_ENV",
    "MODE_ENV",
    "Sandbox",
    "SandboxUnavailable",
    "Unsandboxed",
    "agent_sandbox",
    "current",
    "probe",
    "reset",
    "sandbox_environment",
    "secret_paths",
]
