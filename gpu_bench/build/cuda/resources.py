"""Per-kernel resource facts from ptxas ``-v`` (``--resource-usage``) output, and C++ name demangling.

ptxas prints, for each entry kernel and target::

    ptxas info    : Compiling entry function '_Z3addPKfPfi' for 'sm_90a'
    ptxas info    : Function properties for _Z3addPKfPfi
        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
    ptxas info    : Used 10 registers, used 0 barriers, 1024 bytes smem, 380 bytes cmem[0]

The items of the ``Used`` line come in any order and any subset across versions. ``Function
properties`` blocks of device functions (not entry kernels) are skipped. Only ``demangle`` runs a tool.
"""

from __future__ import annotations

import re
import shutil
import subprocess

from evoteam.gpu_bench.schema import KernelResources

_ENTRY = re.compile(r"^ptxas info\s*: Compiling entry function '(?P<name>[^']+)'(?: for '(?P<arch>[^']+)')?")
_FUNCTION = re.compile(
    r"^ptxas info\s*: (?:Compiling function '(?P<compiled>[^']+)'|Function properties for (?P<name>\S+))"
)
_USED = re.compile(r"^ptxas info\s*: Used (?P<items>\d+ registers.*)$")
_FRAME = re.compile(
    r"(?P<stack>\d+) bytes stack frame, (?P<stores>\d+) bytes spill stores, (?P<loads>\d+) bytes spill loads"
)
_ITEM = re.compile(
    r"(?P<registers>\d+) registers"
    r"|used (?P<barriers>\d+) barriers"
    r"|(?P<smem>\d+)(?:\+(?P<smem2>\d+))? bytes smem"
    r"|(?P<cmem>\d+) bytes cmem\[\d+\]"
    r"|(?P<cumulative>\d+) bytes cumulative stack size"
    r"|(?P<lmem>\d+) bytes lmem"
)


def parse_resources(text: str, default_arch: str = "") -> list[KernelResources]:
    """One entry per (entry kernel, arch), in the order ptxas compiled them.

    ``constant_bytes`` sums the cmem banks on the kernel's ``Used`` line (module-wide ``__constant__``
    data, printed once per file next to ``gmem``, is not counted). ``stack_bytes`` is the cumulative stack
    size (the frame plus its callees') or the stack frame, whichever is larger. ``default_arch`` names
    the target when ptxas did not (a direct ``ptxas`` run on an older version).
    """
    kernels: dict[tuple[str, str], KernelResources] = {}
    current: tuple[str, str] | None = None
    owner: str | None = None
    """The function the next ``Used``/frame line belongs to."""
    for line in text.splitlines():
        stripped = line.strip()
        entry = _ENTRY.match(stripped)
        if entry is not None:
            current = (entry["name"], entry["arch"] or default_arch)
            kernels[current] = KernelResources(name=current[0], arch=current[1])
            owner = current[0]
            continue
        function = _FUNCTION.match(stripped)
        if function is not None:
            owner = function["name"] or function["compiled"]
            continue
        if current is None or owner != current[0]:
            continue
        kernel = kernels[current]
        frame = _FRAME.match(stripped)
        if frame is not None:
            kernel.stack_bytes = max(kernel.stack_bytes, int(frame["stack"]))
            kernel.spill_stores = int(frame["stores"])
            kernel.spill_loads = int(frame["loads"])
            continue
        used = _USED.match(stripped)
        if used is not None:
            _apply_used(kernel, used["items"])
    return list(kernels.values())


def _apply_used(kernel: KernelResources, items: str) -> None:
    constant = 0
    for item in _ITEM.finditer(items):
        if item["registers"]:
            kernel.registers = int(item["registers"])
        elif item["barriers"]:
            kernel.barriers = int(item["barriers"])
        elif item["smem"]:
            kernel.shared_bytes = int(item["smem"]) + int(item["smem2"] or 0)
        elif item["cmem"]:
            constant += int(item["cmem"])
        elif item["cumulative"]:
            kernel.stack_bytes = max(kernel.stack_bytes, int(item["cumulative"]))
        elif item["lmem"]:
            kernel.stack_bytes = max(kernel.stack_bytes, int(item["lmem"]))
    kernel.constant_bytes = constant


def demangle(names: list[str]) -> dict[str, str]:
    """Each name mapped to its C++ spelling via ``c++filt``; names map to themselves without it."""
    unchanged = {name: name for name in names}
    tool = shutil.which("c++filt")
    if tool is None or not names:
        return unchanged
    try:
        done = subprocess.run(
            [tool], input="\n".join(names) + "\n", capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return unchanged
    spelled = done.stdout.splitlines()
    if done.returncode != 0 or len(spelled) != len(names):
        return unchanged
    return dict(zip(names, spelled, strict=True))
