"""The Python host (``bindings/python_host.py``): Python candidates on the CPU run in an interpreter of their own,
on buffers shared with the worker, stopped between calls with everything they started, kept between requests."""

from __future__ import annotations

import errno
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from conftest import OWN_MEMORY_ERRNO, counts_after_calls, reach_codes
from evoteam.gpu_bench.bindings import KernelLoadError, KernelOutputError, KernelRaised, python_host
from evoteam.gpu_bench.bindings.python_host import LIVE_HOSTS, PythonHostKernel, host_pids
from evoteam.gpu_bench.schema import Definition, EvaluationStatus

pytestmark = pytest.mark.integration

KERNELS = '''
import os, signal, sys, time
import torch

def dps(x, y, out):
    torch.add(2 * x, y, out=out)

def returns(x, y):
    return 2 * x + y

def returns_dict(x, y):
    return {"out": 2 * x + y}

def wrong_shape(x, y):
    return (2 * x + y)[:-1]

def wrong_dtype(x, y):
    return (2 * x + y).double()

def two(x, y):
    return x, y

def raises(x, y, out):
    raise ValueError("no luck")

def exits(x, y, out):
    sys.exit(3)

def pid(x, y, out):
    out.fill_(os.getpid())

_helpers = []

def deferred(x, y, out):
    """Returns at once; a process it forked writes the answer a little later."""
    child = os.fork()
    if child == 0:
        time.sleep(0.2)
        torch.add(2 * x, y, out=out)
        os._exit(0)
    _helpers.append(child)

def escapes(x, y, out):
    """As ``deferred``, from a process that leaves the host's process group for a group of its own."""
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)
        time.sleep(0.2)
        torch.add(2 * x, y, out=out)
        os._exit(0)
    _helpers.append(child)
    torch.add(2 * x, y, out=out)

def escapes_and_defers(x, y, out):
    """Returns at once, once a process it forked has left the host's process group; that process writes the
    answer a little later."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)
        os.write(write, b"x")
        time.sleep(0.2)
        torch.add(2 * x, y, out=out)
        os._exit(0)
    os.read(read, 1)
    os.close(read)
    os.close(write)
    _helpers.append(child)

def leaves_and_dies(x, y, out):
    """Starts a process that leaves the host's process group and runs on, puts its pid in out[0], and kills
    the host."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        os.setpgid(0, 0)
        for fd in (1, 2):  # holds no pipe of the test's open: were it left running, the test says so at once
            os.dup2(os.open(os.devnull, os.O_WRONLY), fd)
        os.write(write, b"x")
        while True:
            time.sleep(0.01)
    os.read(read, 1)
    out[0] = child
    os.kill(os.getpid(), signal.SIGKILL)

_counting = []

def counts(x, y, out):
    """Leaves a thread that counts in out[0] for as long as it runs; returns at once."""
    if not _counting:
        import threading

        def count():
            while True:
                out[0] += 1

        _counting.append(threading.Thread(target=count, daemon=True))
        _counting[0].start()
    time.sleep(0.002)

def joins_the_worker_s_group(x, y, out):
    """The host itself, then a process it starts, try to join the worker's process group and to start a
    session: each errno into out (0: done)."""
    worker = os.getpgid(os.getppid())
    codes = []
    for attempt in (lambda: os.setpgid(0, worker), os.setsid):
        try:
            attempt()
            codes.append(0)
        except OSError as exc:
            codes.append(exc.errno)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.setpgid(0, worker)
            os.write(write, b"0")
        except OSError as exc:
            os.write(write, str(exc.errno).encode())
        os._exit(0)
    os.waitpid(child, 0)
    codes.append(int(os.read(read, 8)))
    out[: len(codes)] = torch.tensor(codes, dtype=out.dtype)

def reaches(x, y, out):
    """Tries to act on the process whose pid is x[0], then on itself: each probe's errno into out (0: done)."""
    import resource, subprocess
    other, me = int(x[0].item()), 0

    def nice(pid):
        os.setpriority(os.PRIO_PROCESS, pid, os.getpriority(os.PRIO_PROCESS, pid))

    probes = [
        lambda pid: os.kill(pid or os.getpid(), 0),
        lambda pid: os.sched_setaffinity(pid, os.sched_getaffinity(pid)),
        lambda pid: resource.prlimit(pid, resource.RLIMIT_NOFILE),
        nice,
        lambda pid: os.close(os.pidfd_open(pid or os.getpid())),
    ]
    codes = []
    for pid in (other, me):
        for probe in probes:
            try:
                probe(pid)
                codes.append(0)
            except OSError as exc:
                codes.append(exc.errno)
    codes.append(subprocess.run(["true"]).returncode)  # a Python host may run programs
    try:
        open(f"/proc/{other}/mem", "rb").close()
        codes.append(0)
    except OSError as exc:
        codes.append(exc.errno)
    import ctypes
    codes.append(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))  # PR_GET_DUMPABLE
    out.zero_()
    out[: len(codes)] = torch.tensor(codes, dtype=out.dtype)

def writes(x, y, out):
    """Writes a file in its temporary folder, then one where the test says (outside it): each errno into out."""
    import tempfile
    codes = []
    for target in (os.path.join(tempfile.gettempdir(), "mine.txt"), os.environ["EVOTEAM_TEST_OUTSIDE"]):
        try:
            with open(target, "w") as f:
                f.write("x")
            codes.append(0)
        except OSError as exc:
            codes.append(exc.errno)
    out.zero_()
    out[:2] = torch.tensor(codes, dtype=out.dtype)

def holds_memory(x, y, out):
    """Tries to make memory no mapping holds (a memfd, a SysV segment and message queue) and an io_uring:
    each errno into out (0: made)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    codes = []
    try:
        os.close(os.memfd_create("held"))
        codes.append(0)
    except OSError as exc:
        codes.append(exc.errno)
    params = ctypes.create_string_buffer(120)  # struct io_uring_params
    for made in (libc.shmget(0, 1 << 20, 0o1600), libc.msgget(0, 0o1600), libc.syscall(425, 8, params)):
        codes.append(0 if made >= 0 else ctypes.get_errno())
    out.zero_()
    out[: len(codes)] = torch.tensor(codes, dtype=out.dtype)

def keeps_size(x, y, out):
    """Allocates disk past a file's end (FALLOC_FL_KEEP_SIZE), then grows a file (posix_fallocate): each errno
    into out (0: done)."""
    import ctypes
    import tempfile
    libc = ctypes.CDLL(None, use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    codes = []
    with tempfile.TemporaryFile() as f:
        codes.append(0 if libc.fallocate(f.fileno(), 1, 0, 1 << 20) == 0 else ctypes.get_errno())
        try:
            os.posix_fallocate(f.fileno(), 0, 1 << 20)
            codes.append(0)
        except OSError as exc:
            codes.append(exc.errno)
    out.zero_()
    out[:2] = torch.tensor(codes, dtype=out.dtype)

def leaves_handler(x, y, out):
    signal.signal(signal.SIGUSR1, lambda *_: None)
    torch.add(2 * x, y, out=out)

def writes_from_every_thread(x, y, out):
    """Runs code on each of its host's other threads (a C-level SIGUSR2 handler, sent to each thread), where
    each opens the file the test names for writing: the threads tried, the handlers run, the opens that
    succeeded and those refused with EACCES, into out."""
    import ctypes
    import threading
    import time
    libc = ctypes.CDLL(None, use_errno=True)
    target = os.environ["EVOTEAM_TEST_OUTSIDE"].encode()
    results = []

    def handler(signum):
        fd = libc.open(target, 0o101, 0o644)  # O_WRONLY | O_CREAT
        results.append(fd if fd >= 0 else -ctypes.get_errno())
        if fd >= 0:
            libc.close(fd)

    keep = ctypes.CFUNCTYPE(None, ctypes.c_int)(handler)
    libc.signal.restype = ctypes.c_void_p
    libc.signal(signal.SIGUSR2, keep)
    me = threading.get_native_id()
    others = [int(t) for t in os.listdir("/proc/self/task") if int(t) != me]
    for tid in others:
        libc.syscall(234, os.getpid(), tid, signal.SIGUSR2)  # tgkill (x86-64)
    deadline = time.monotonic() + 5
    while len(results) < len(others) and time.monotonic() < deadline:
        time.sleep(0.01)
    out.zero_()
    out[:4] = torch.tensor([len(others), len(results), sum(r >= 0 for r in results), results.count(-13)])
'''


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("python-host")
    (where / "kernels.py").write_text(KERNELS)
    return where


@pytest.fixture(scope="module")
def definition() -> Definition:
    from conftest import DATA
    from evoteam.gpu_bench.task import load_definition

    return load_definition(DATA / "scale_add.json")


def host(folder: Path, definition: Definition, symbol: str, dps: bool = True) -> PythonHostKernel:
    return PythonHostKernel(str(folder), "kernels.py", symbol, definition, dps)


def buffers(n: int = 4096) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    return {"x": torch.randn(n), "y": torch.randn(n)}, {"out": torch.full((n,), float("nan"))}


@pytest.mark.parametrize(("symbol", "dps"), [("dps", True), ("returns", False), ("returns_dict", False)])
def test_a_kernel_fills_the_worker_s_own_tensors(folder: Path, definition: Definition, symbol: str, dps: bool) -> None:
    kernel = host(folder, definition, symbol, dps)
    inputs, outputs = buffers()
    out = outputs["out"]
    call = kernel.bind(inputs, outputs, {"n": 4096})
    call()
    assert outputs["out"] is out and torch.allclose(out, 2 * inputs["x"] + inputs["y"])
    inputs["x"].copy_(torch.randn(4096))  # the same buffers, new values: the host sees them
    out.fill_(float("nan"))
    call()
    assert torch.allclose(out, 2 * inputs["x"] + inputs["y"])
    kernel.release()


@pytest.mark.parametrize(
    ("symbol", "status", "phrase"),
    [
        ("wrong_shape", EvaluationStatus.INCORRECT_SHAPE, "has shape (4095,), expected (4096,)"),
        ("wrong_dtype", EvaluationStatus.INCORRECT_DTYPE, "has dtype torch.float64, expected float32"),
        ("two", EvaluationStatus.INCORRECT_SHAPE, "expected 1 output(s) ['out'], got tuple of length 2"),
    ],
)
def test_a_result_that_does_not_fit_the_outputs_earns_its_status(
    folder: Path, definition: Definition, symbol: str, status: EvaluationStatus, phrase: str
) -> None:
    kernel = host(folder, definition, symbol, dps=False)
    inputs, outputs = buffers()
    with pytest.raises(
        KernelOutputError, match=phrase.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
    ) as e:
        kernel.bind(inputs, outputs, {"n": 4096})()
    assert e.value.status == status
    kernel.release()


def test_an_exception_is_the_call_s_failure_and_the_host_lives_on(folder: Path, definition: Definition) -> None:
    inputs, outputs = buffers()
    for symbol, message in (("raises", "ValueError: no luck"), ("exits", "SystemExit: 3")):
        kernel = host(folder, definition, symbol)
        call = kernel.bind(inputs, outputs, {"n": 4096})
        with pytest.raises(KernelRaised, match=message):
            call()
        with pytest.raises(KernelRaised, match=message):
            call()  # the same host answers again
        assert len(kernel.pids()) == 1
        kernel.release()


def test_a_candidate_that_does_not_import_is_a_load_error(tmp_path: Path, definition: Definition) -> None:
    (tmp_path / "kernels.py").write_text("import not_a_module_anywhere\n")
    with pytest.raises(KernelLoadError, match=r"importing kernels\.py failed: ModuleNotFoundError"):
        host(tmp_path, definition, "run")
    (tmp_path / "kernels.py").write_text("x = 1\n")
    with pytest.raises(KernelLoadError, match="defines no function 'run'"):
        host(tmp_path, definition, "run")


def test_the_kernel_runs_in_another_process_kept_between_requests(folder: Path, definition: Definition) -> None:
    kernel = host(folder, definition, "pid")
    inputs, outputs = buffers(16)
    kernel.bind(inputs, outputs, {"n": 16})()
    first = int(outputs["out"][0])
    assert first != os.getpid() and first == kernel.pids()[0]
    assert first in host_pids()  # the worker's stray killing spares it
    kernel.bind(inputs, outputs, {"n": 16})()  # a later request: the same interpreter, no new start
    assert int(outputs["out"][0]) == first
    kernel.release()
    assert first not in host_pids()


def test_work_left_to_a_forked_process_is_frozen_with_the_host(folder: Path, definition: Definition) -> None:
    kernel = host(folder, definition, "deferred")
    inputs, outputs = buffers()
    kernel.bind(inputs, outputs, {"n": 4096})()
    assert len(kernel.pids()) == 2  # the host and the helper it forked, stopped with it
    time.sleep(0.6)  # long past the helper's sleep: it is stopped, so the outputs are still the poison
    assert torch.isnan(outputs["out"]).all()
    spent = kernel.cpu_seconds()
    assert spent is not None and spent > 0
    helper = kernel.pids()[1]
    kernel.release()
    assert not Path(f"/proc/{helper}").exists() or "Z" in Path(f"/proc/{helper}/stat").read_text().split()[2]


def test_work_left_to_a_process_outside_the_host_s_group_is_frozen_all_the_same(
    folder: Path, definition: Definition
) -> None:
    kernel = host(folder, definition, "escapes_and_defers")
    inputs, outputs = buffers()
    kernel.bind(inputs, outputs, {"n": 4096})()
    helper = kernel.pids()[1]
    assert os.getpgid(helper) == helper  # it left the host's group before the host answered
    time.sleep(0.6)  # long past its sleep: stopped though outside the group, so the outputs are still the poison
    assert torch.isnan(outputs["out"]).all()
    assert Path(f"/proc/{helper}/stat").read_text().split()[2] == "T"
    kernel._continue()  # continued with the host, as for the next call: it finishes
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and torch.isnan(outputs["out"]).any():
        time.sleep(0.02)
    kernel._stop()
    torch.testing.assert_close(outputs["out"], 2 * inputs["x"] + inputs["y"])
    assert any("left its host's process group" in what for what in kernel.changed_state())
    kernel.release()


ORPHANED = """
import sys, time
from pathlib import Path
import torch
from evoteam.gpu_bench.bindings import KernelCallError
from evoteam.gpu_bench.bindings.python_host import PythonHostKernel
from evoteam.gpu_bench.task import load_definition
from evoteam.gpu_bench.worker.strays import become_subreaper

assert become_subreaper()  # as the worker is: the dead host's orphans come here
folder, definition = sys.argv[1], load_definition(Path(sys.argv[2]))
kernel = PythonHostKernel(folder, "kernels.py", "leaves_and_dies", definition, True)
inputs, outputs = {"x": torch.randn(16), "y": torch.randn(16)}, {"out": torch.full((16,), float("nan"))}
try:
    kernel.bind(inputs, outputs, {"n": 16})()
except KernelCallError as exc:
    print("error:", exc)
helper = int(outputs["out"][0].item())
deadline = time.monotonic() + 2.0
state = "gone"
while time.monotonic() < deadline:
    try:
        state = Path(f"/proc/{helper}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "gone"
    if state in ("Z", "gone"):
        break
    time.sleep(0.02)
print("helper:", state)
"""


def test_what_a_python_host_started_dies_with_it_when_it_crashes(folder: Path, definition: Definition) -> None:
    """A host that died mid-call leaves its processes to the worker (both are child subreapers): those that
    left its group were not found among its descendants any more, and ran on until the request's end."""
    from conftest import DATA

    done = subprocess.run(
        [sys.executable, "-c", ORPHANED, str(folder), str(DATA / "scale_add.json")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "error: the kernel crashed the Python host (killed by SIGKILL)" in done.stdout, done.stdout
    assert "helper: Z" in done.stdout or "helper: gone" in done.stdout, done.stdout


def test_a_call_ends_when_every_thread_of_its_host_has_stopped(folder: Path, definition: Definition) -> None:
    """The host stops itself after its answer and the call returns once that stop is done: the count a thread
    of the kernel's keeps in ``out[0]`` is the same read at once and read later."""
    kernel = host(folder, definition, "counts")
    readings = counts_after_calls(kernel)
    assert all(at_once == later for at_once, later in readings), readings
    assert readings[-1][0] > 0  # the thread ran during the calls
    kernel.release()


def test_a_process_that_leaves_the_host_s_group_is_reported_and_ends_with_it(
    folder: Path, definition: Definition
) -> None:
    kernel = host(folder, definition, "escapes")
    inputs, outputs = buffers()
    kernel.bind(inputs, outputs, {"n": 4096})()
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and len(kernel.pids()) < 2:
        time.sleep(0.01)
    helpers = kernel.pids()[1:]
    assert helpers, "the helper is the host's descendant (the host is a child subreaper)"
    reported: list[str] = []
    while time.monotonic() < deadline + 10.0 and not reported:  # the helper gets to run its setsid
        kernel._continue()
        time.sleep(0.05)
        kernel._stop()
        reported = [what for what in kernel.changed_state() if "left its host's process group" in what]
    assert reported
    kernel.release()
    time.sleep(0.05)
    for pid in helpers:
        assert not Path(f"/proc/{pid}").exists() or " Z " in Path(f"/proc/{pid}/stat").read_text()


def test_a_changed_signal_handler_is_reported(folder: Path, definition: Definition) -> None:
    kernel = host(folder, definition, "leaves_handler")
    inputs, outputs = buffers(16)
    kernel.bind(inputs, outputs, {"n": 16})()
    assert kernel.changed_state() == ["signal handlers"]
    assert kernel.changed_state() == []  # reported once
    kernel.release()


def test_the_least_recently_used_host_is_ended_beyond_the_limit(folder: Path, definition: Definition) -> None:
    inputs, outputs = buffers(16)
    kernels = [host(folder, definition, "pid") for _ in range(LIVE_HOSTS + 1)]
    for kernel in kernels:
        kernel.bind(inputs, outputs, {"n": 16})()
    assert kernels[0].pids() == []  # ended: its next binding starts it again
    assert all(k.pids() for k in kernels[1:])
    kernels[0].bind(inputs, outputs, {"n": 16})()
    assert kernels[0].pids() and kernels[1].pids() == []
    for kernel in kernels:
        kernel.release()


def test_the_round_trip_is_measured_in_an_empty_host_of_the_worker_s_own(folder: Path, definition: Definition) -> None:
    kernel = host(folder, definition, "returns", dps=False)
    inputs, outputs = buffers()
    trip = kernel.round_trip_ms(inputs, outputs, {"n": 4096})
    assert 0 < trip < 1000
    empty = python_host._empty[False]
    assert empty.pids() and empty.pids()[0] not in kernel.pids()
    kernel.release()
    assert empty.pids(), "the empty host is shared by every Python host of the worker: it outlives this one"


def test_a_host_killed_by_a_signal_says_so(folder: Path, definition: Definition) -> None:
    kernel = host(folder, definition, "dps")
    inputs, outputs = buffers(16)
    call = kernel.bind(inputs, outputs, {"n": 16})
    os.kill(kernel.pids()[0], signal.SIGKILL)
    with pytest.raises(Exception, match=r"crashed the Python host \(killed by SIGKILL\)"):
        call()
    kernel.bind(inputs, outputs, {"n": 16})()  # a new binding starts a new host
    assert torch.allclose(outputs["out"], 2 * inputs["x"] + inputs["y"])
    kernel.release()


def test_a_kernel_acts_on_its_own_process_only(folder: Path, definition: Definition) -> None:
    """Signals, affinity, limits, priority and pidfds of the worker and of another host are refused (EPERM),
    its own are not; it may still run a program; another host's memory cannot be opened (EACCES: hosts are
    non-dumpable and, run by root, hold no capability); the test's own process is dumpable: a test run by a
    user sees the probe open its memory."""
    sibling = host(folder, definition, "dps")
    prober = host(folder, definition, "reaches")
    sibling_pid = sibling.pids()[0]
    for target, memory in ((os.getpid(), OWN_MEMORY_ERRNO), (sibling_pid, 13)):
        codes = reach_codes(prober, target, 13)
        assert codes == [1] * 5 + [0] * 5 + [0, memory, 0], f"pid {target}: {codes}"
    sibling.release()
    prober.release()


def test_a_kernel_writes_only_in_its_own_folders(
    folder: Path, definition: Definition, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Landlock: the host's temporary folder (and its build folders) take writes; any other file does not
    (EACCES), whatever the user may write; the temporary folder goes with the host."""
    outside = tmp_path / "outside.txt"
    monkeypatch.setenv("EVOTEAM_TEST_OUTSIDE", str(outside))
    kernel = host(folder, definition, "writes")
    inputs, outputs = buffers()
    kernel.bind(inputs, outputs, {"n": 4096})()
    if not kernel.files_confined:
        kernel.release()
        pytest.skip("this Linux kernel has no Landlock")
    assert outputs["out"][:2].int().tolist() == [0, 13]
    assert not outside.exists()
    temporary = kernel._temporary
    assert temporary is not None and (Path(temporary) / "mine.txt").exists()
    kernel.release()
    assert not Path(temporary).exists()


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the candidate calls tgkill by its x86-64 number")
def test_a_thread_the_host_had_before_its_candidate_loaded_cannot_write_either(
    folder: Path, definition: Definition, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Landlock holds the thread that restricts itself and those it starts later: restricted after torch
    loaded, the host's pool threads (two more with two CPUs) wrote anywhere. The host now restricts itself
    before torch loads, so code a candidate runs on any of its threads is refused (EACCES)."""
    outside = tmp_path / "outside.txt"
    monkeypatch.setenv("EVOTEAM_TEST_OUTSIDE", str(outside))
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # a pool of threads at import, whatever this machine's CPUs
    kernel = host(folder, definition, "writes_from_every_thread")
    inputs, outputs = buffers()
    kernel.bind(inputs, outputs, {"n": 4096})()
    kernel.release()
    if not kernel.files_confined:
        pytest.skip("this Linux kernel has no Landlock")
    others, ran, opened, refused = outputs["out"][:4].int().tolist()
    assert others >= 1 and ran == others, (others, ran)  # code ran on every other thread of the host
    assert opened == 0 and refused == others and not outside.exists()


def test_what_a_kernel_prints_reaches_the_log_though_its_host_is_killed(
    tmp_path: Path, definition: Definition, capfd: pytest.CaptureFixture[str]
) -> None:
    """A host ends with SIGKILL, so nothing it buffered would be written at exit: it runs unbuffered
    (``python -u``), Python's prints and what native code prints through C's stdio alike."""
    (tmp_path / "kernels.py").write_text(
        "import ctypes\n"
        "libc = ctypes.CDLL(None)\n"
        "def run(x, y, out):\n"
        "    out.copy_(2 * x + y)\n"
        "    print('from python', end='')\n"
        "    libc.printf(b'from C, no newline')\n"
    )
    kernel = host(tmp_path, definition, "run")
    inputs, outputs = buffers()
    kernel.bind(inputs, outputs, {"n": 4096})()
    kernel.release()
    printed = capfd.readouterr().out
    assert "from python" in printed and "from C, no newline" in printed


def test_neither_the_host_nor_what_it_starts_joins_the_worker_s_process_group(
    folder: Path, definition: Definition
) -> None:
    """The worker stops a host by its process group: a host that joined the worker's group would run on
    between calls (and its ``kill(0, ...)`` would reach the worker). Refused (EPERM), as a session is."""
    kernel = host(folder, definition, "joins_the_worker_s_group")
    inputs, outputs = buffers(16)
    kernel.bind(inputs, outputs, {"n": 16})()
    assert outputs["out"][:3].tolist() == [errno.EPERM] * 3
    (pid,) = kernel.pids()
    assert os.getpgid(pid) == pid
    kernel.release()


def test_a_kernel_makes_no_memory_outside_its_mappings_and_no_io_uring(folder: Path, definition: Definition) -> None:
    """A memfd filled with ``write`` (2 GiB held by a host under a 6 GiB address-space limit, with 232 MiB
    resident), a SysV segment or message queue, and an io_uring are refused (EPERM) in a Python host."""
    kernel = host(folder, definition, "holds_memory")
    inputs, outputs = buffers(16)
    kernel.bind(inputs, outputs, {"n": 16})()
    kernel.release()
    assert outputs["out"][:4].tolist() == [errno.EPERM] * 4


def test_a_kernel_takes_no_disk_past_a_file_s_end(folder: Path, definition: Definition) -> None:
    """``fallocate`` keeping the file's size, which the file size limit does not count, is refused
    (EOPNOTSUPP); growing a file with ``posix_fallocate`` is not."""
    kernel = host(folder, definition, "keeps_size")
    inputs, outputs = buffers(16)
    kernel.bind(inputs, outputs, {"n": 16})()
    kernel.release()
    assert outputs["out"][:2].tolist() == [errno.EOPNOTSUPP, 0]
