"""Landlock (``sandbox/landlock.py``) for the Python host, the worker and compilers no sandbox wraps: after
``restrict_writes``, a process and what it starts change files only beneath the folders it was given, still
write to /dev/null, and read everything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evoteam.gpu_bench.sandbox import landlock

pytestmark = pytest.mark.integration

PROBE = """
import json, os, subprocess, sys
from pathlib import Path
from evoteam.gpu_bench.sandbox.landlock import restrict_writes

root = Path(sys.argv[1])
if not restrict_writes([root / "mine"]):
    print(json.dumps(None))
    sys.exit(0)

def attempt(action):
    try:
        action()
        return 0
    except OSError as exc:
        return exc.errno

results = {
    "write mine": attempt(lambda: (root / "mine" / "a.txt").write_text("ok")),
    "make folder in mine": attempt(lambda: (root / "mine" / "sub").mkdir()),
    "write elsewhere": attempt(lambda: (root / "other" / "b.txt").write_text("no")),
    "overwrite elsewhere": attempt(lambda: (root / "other" / "old.txt").write_text("no")),
    "remove elsewhere": attempt(lambda: (root / "other" / "old.txt").unlink()),
    "rename into mine": attempt(lambda: (root / "other" / "old.txt").rename(root / "mine" / "old.txt")),
    "read elsewhere": attempt(lambda: (root / "other" / "old.txt").read_text()),
    "write /dev/null": attempt(lambda: Path("/dev/null").write_text("x")),
    "a child writes elsewhere": subprocess.run(["sh", "-c", f"echo x > {root / 'other' / 'c.txt'}"]).returncode,
    "a child writes in mine": subprocess.run(["sh", "-c", f"echo x > {root / 'mine' / 'c.txt'}"]).returncode,
}
print(json.dumps(results))
"""


def test_writes_are_confined_to_the_given_folders(tmp_path: Path) -> None:
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "old.txt").write_text("kept")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], capture_output=True, text=True, check=True, timeout=60
    )
    results = json.loads(done.stdout.strip().splitlines()[-1])
    if results is None:
        pytest.skip("this Linux kernel has no Landlock")
    assert results["write mine"] == results["make folder in mine"] == 0
    assert results["write elsewhere"] == results["overwrite elsewhere"] == results["remove elsewhere"] == 13
    assert results["rename into mine"] in (13, 18)  # EACCES, or EXDEV where the ABI has REFER
    assert results["read elsewhere"] == 0 and results["write /dev/null"] == 0
    assert results["a child writes elsewhere"] != 0 and results["a child writes in mine"] == 0
    assert (tmp_path / "other" / "old.txt").read_text() == "kept"
    assert not (tmp_path / "other" / "b.txt").exists() and not (tmp_path / "other" / "c.txt").exists()
    assert (tmp_path / "mine" / "a.txt").read_text() == "ok"


def test_the_handled_accesses_grow_with_the_abi() -> None:
    assert landlock.handled(1) & landlock.WRITE_FILE and not landlock.handled(1) & landlock.REFER
    assert landlock.handled(2) & landlock.REFER and not landlock.handled(2) & landlock.TRUNCATE
    assert landlock.handled(3) & landlock.TRUNCATE


@pytest.mark.skipif(landlock.version() < 1, reason="this Linux kernel has no Landlock")
@pytest.mark.parametrize("where", ["inside a sandbox", "no sandbox"])
def test_a_compiler_no_sandbox_wraps_writes_only_its_build_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """``run_confined`` where bubblewrap does not wrap the command (the worker's build helper, inside the
    sandbox: a compiler flag such as ``-fplugin`` runs code in the compiler, which must not get the helper's
    right to write the build cache; or a machine without a sandbox): Landlock holds it to its build folder,
    and its temporary files land there."""
    from evoteam.gpu_bench.sandbox import IN_SANDBOX_ENV
    from evoteam.gpu_bench.sandbox.choose import MODE_ENV
    from evoteam.gpu_bench.sandbox.run import run_confined

    if where == "inside a sandbox":
        monkeypatch.setenv(IN_SANDBOX_ENV, "1")
    else:
        monkeypatch.setenv(MODE_ENV, "off")
        monkeypatch.setattr("evoteam.gpu_bench.sandbox.choose._chosen", None)
    work, cache = tmp_path / "build", tmp_path / "cache"
    work.mkdir()
    cache.mkdir()
    script = f'echo built > kernel.so; echo "$TMPDIR" > tmpdir.txt; echo planted > "{cache}/entry.so" || exit 7'
    done = run_confined(["sh", "-c", script], work, 30)
    assert done.returncode == 7 and "Permission denied" in done.stderr, done
    assert (work / "kernel.so").read_text() == "built\n" and not (cache / "entry.so").exists()
    assert (work / "tmpdir.txt").read_text().strip() == str(work / ".evoteam-tmp")
