"""The native host (``bindings/host.py``): C ABI kernels on the CPU run in a process of their own, on buffers
shared with the worker, confined, stopped between calls, and unable to forge the host's answers."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from conftest import DATA, OWN_MEMORY_ERRNO, counts_after_calls, reach_codes
from evoteam.gpu_bench.bindings import Call, KernelCallError, KernelIntegrityError, KernelLoadError
from evoteam.gpu_bench.bindings.host import HostKernel, follow_caller, on_one_cpu
from evoteam.gpu_bench.schema import Definition
from evoteam.gpu_bench.task import load_definition

pytestmark = pytest.mark.integration

HONEST = 'extern "C" int scale_add(const float* x, const float* y, float* out, long n) {\n'
HONEST += "  for (long i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];\n  return 0;\n}\n"


@pytest.fixture(scope="module")
def definition() -> Definition:
    return load_definition(DATA / "scale_add.json")


def library(tmp_path: Path, body: str, name: str = "k") -> str:
    source = tmp_path / f"{name}.cpp"
    source.write_text("#include <cerrno>\n#include <cstdio>\n#include <cstring>\n#include <thread>\n" + body)
    built = tmp_path / f"{name}.so"
    command = ["g++", "-O1", "-shared", "-fPIC", "-pthread", "-o", str(built), str(source)]
    subprocess.run(command, check=True)
    return str(built)


def buffers(n: int = 4096) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    return {"x": torch.randn(n), "y": torch.randn(n)}, {"out": torch.full((n,), float("nan"))}


def test_an_honest_kernel_fills_the_worker_s_own_tensors(tmp_path: Path, definition: Definition) -> None:
    kernel = HostKernel(library(tmp_path, HONEST), "scale_add", definition)
    inputs, outputs = buffers()
    out = outputs["out"]
    call = kernel.bind(inputs, outputs, {"n": 4096})
    call()
    assert outputs["out"] is out and torch.allclose(out, 2 * inputs["x"] + inputs["y"])
    inputs["x"].copy_(torch.randn(4096))  # the same buffers, new values: the host sees them
    call()
    assert torch.allclose(out, 2 * inputs["x"] + inputs["y"])
    kernel.release()


def test_a_missing_entry_point_is_a_load_error(tmp_path: Path, definition: Definition) -> None:
    with pytest.raises(KernelLoadError, match="not exported"):
        HostKernel(library(tmp_path, HONEST), "nope", definition)


def test_a_crash_kills_only_the_host_and_the_next_binding_gets_a_fresh_one(
    tmp_path: Path, definition: Definition
) -> None:
    body = HONEST.replace("return 0;", "if (n == 7) { volatile int* p = nullptr; *p = 1; }\n  return 0;")
    kernel = HostKernel(library(tmp_path, body), "scale_add", definition)
    inputs, outputs = buffers(7)
    with pytest.raises(KernelCallError, match="killed by SIGSEGV"):
        kernel.bind(inputs, outputs, {"n": 7})()
    inputs, outputs = buffers()
    kernel.bind(inputs, outputs, {"n": 4096})()
    assert torch.allclose(outputs["out"], 2 * inputs["x"] + inputs["y"])
    kernel.release()


def test_a_host_killed_between_calls_says_how_at_the_next_call(tmp_path: Path, definition: Definition) -> None:
    """Killed while stopped (by the OOM killer, say): the next call is a crash with the reason, not a broken
    pipe, and the binding after it gets a fresh host."""
    kernel = HostKernel(library(tmp_path, HONEST), "scale_add", definition)
    inputs, outputs = buffers(16)
    call = kernel.bind(inputs, outputs, {"n": 16})
    call()
    os.kill(kernel.pids()[0], signal.SIGKILL)
    time.sleep(0.05)
    with pytest.raises(KernelCallError, match="killed by SIGKILL"):
        call()
    kernel.bind(inputs, outputs, {"n": 16})()
    torch.testing.assert_close(outputs["out"], 2 * inputs["x"] + inputs["y"])
    kernel.release()


def test_starting_a_process_kills_the_host_with_sigsys(tmp_path: Path, definition: Definition) -> None:
    body = '#include <unistd.h>\nextern "C" int scale_add(const float*, const float*, float*, long) {\n'
    body += "  pid_t child = fork();\n  if (child == 0) _exit(0);\n  return child < 0 ? errno : 0;\n}\n"
    kernel = HostKernel(library(tmp_path, body), "scale_add", definition)
    inputs, outputs = buffers()
    with pytest.raises(KernelCallError, match="SIGSYS: it started a process"):
        kernel.bind(inputs, outputs, {"n": 4096})()


def test_the_file_system_is_read_only_to_the_kernel(tmp_path: Path, definition: Definition) -> None:
    target = tmp_path / "written"
    body = 'extern "C" int scale_add(const float*, const float*, float*, long) {\n'
    body += f'  FILE* f = fopen("{target}", "w");\n  if (f == nullptr) return errno;\n  fclose(f);\n  return 0;\n}}\n'
    kernel = HostKernel(library(tmp_path, body), "scale_add", definition)
    inputs, outputs = buffers()
    call = kernel.bind(inputs, outputs, {"n": 4096})
    if not kernel.files_confined:
        kernel.release()
        pytest.skip("this Linux kernel has no Landlock")
    with pytest.raises(KernelCallError, match="returned 13"):  # EACCES
        call()
    kernel.release()
    assert not target.exists()


def test_work_left_to_a_thread_is_frozen_with_the_call(tmp_path: Path, definition: Definition) -> None:
    """The kernel returns at once and computes in a detached thread (200 passes, each adding its number): the
    worker stops the host on its answer, so the outputs stay as they were, unfinished, until the next call."""
    body = 'extern "C" int scale_add(const float* x, const float* y, float* out, long n) {\n'
    body += "  std::thread([=] { for (int r = 1; r <= 200; ++r) for (long i = 0; i < n; ++i) "
    body += "out[i] = 2.0f * x[i] + y[i] + r; }).detach();\n  return 0;\n}\n"
    kernel = HostKernel(library(tmp_path, body), "scale_add", definition)
    inputs, outputs = buffers(1 << 20)
    kernel.bind(inputs, outputs, {"n": 1 << 20})()
    seen = outputs["out"].clone()
    time.sleep(0.3)  # far longer than the 200 passes take when the thread runs
    assert _same(outputs["out"], seen)  # frozen
    finished = 2 * inputs["x"] + inputs["y"] + 200
    assert not torch.allclose(seen, finished)  # and unfinished
    kernel.release()


def test_a_call_ends_when_every_thread_of_its_host_has_stopped(tmp_path: Path, definition: Definition) -> None:
    """The kernel returns at once, leaving a thread that counts in ``out[0]`` for as long as it runs: the host
    stops itself after its answer, and the call returns only once that stop is done, so the count read at once
    is the count for good (the worker's own stop, alone, lands a moment after the call returned)."""
    body = "#include <atomic>\nstatic std::atomic<bool> started{false};\n"
    body += 'extern "C" int scale_add(const float* x, const float* y, float* out, long n) {\n'
    body += "  if (!started.exchange(true))\n"
    body += "    std::thread([=] { volatile float* o = out; for (;;) o[0] = o[0] + 1.0f; }).detach();\n"
    body += "  for (volatile long spin = 0; spin < 200000; ++spin) {}\n  return 0;\n}\n"
    kernel = HostKernel(library(tmp_path, body), "scale_add", definition)
    counts = counts_after_calls(kernel)
    assert all(at_once == later for at_once, later in counts), counts
    assert counts[-1][0] > 0  # the thread ran during the calls
    kernel.release()


def test_a_kernel_that_stops_its_own_host_is_continued_and_answers(tmp_path: Path, definition: Definition) -> None:
    """A stop without an answer is not the end of the call: the worker continues the host and waits again."""
    body = "#include <csignal>\n#include <unistd.h>\n"
    body += 'extern "C" int scale_add(const float* x, const float* y, float* out, long n) {\n'
    body += "  kill(getpid(), SIGSTOP);\n  for (long i = 0; i < n; ++i) out[i] = 2.0f * x[i] + y[i];\n  return 0;\n}\n"
    kernel = HostKernel(library(tmp_path, body), "scale_add", definition)
    inputs, outputs = buffers(64)
    call = kernel.bind(inputs, outputs, {"n": 64})
    for _ in range(3):
        outputs["out"].fill_(float("nan"))
        call()
        torch.testing.assert_close(outputs["out"], 2 * inputs["x"] + inputs["y"])
    kernel.release()


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(((a == b) | (torch.isnan(a) & torch.isnan(b))).all())


def test_an_answer_the_kernel_forges_is_an_integrity_error(tmp_path: Path, definition: Definition) -> None:
    """It writes an answer of its own to every socket it has, before the host's answer: the nonce is wrong."""
    body = "#include <sys/socket.h>\n#include <sys/stat.h>\n"
    body += 'extern "C" int scale_add(const float*, const float*, float*, long) {\n'
    body += "  char answer[16] = {'R'};\n  struct stat s;\n"
    body += "  for (int fd = 3; fd < 64; ++fd) if (fstat(fd, &s) == 0 && S_ISSOCK(s.st_mode)) "
    body += "send(fd, answer, sizeof answer, 0);\n  return 0;\n}\n"
    kernel = HostKernel(library(tmp_path, body), "scale_add", definition)
    inputs, outputs = buffers()
    with pytest.raises(KernelIntegrityError):
        kernel.bind(inputs, outputs, {"n": 4096})()
    kernel.release()


def spinning(
    tmp_path: Path, definition: Definition, steps: int
) -> tuple[HostKernel, dict[str, torch.Tensor], dict[str, torch.Tensor], Call]:
    """The honest kernel spinning ``steps`` loop steps more on every call, bound on 4,096 elements."""
    body = HONEST.replace("return 0;", f"for (volatile long s = 0; s < {steps}; ++s) {{}}\n  return 0;")
    kernel = HostKernel(library(tmp_path, body), "scale_add", definition)
    inputs, outputs = buffers()
    return kernel, inputs, outputs, kernel.bind(inputs, outputs, {"n": 4096})


def test_the_round_trip_is_measured_on_an_empty_kernel_the_candidate_cannot_reach(
    tmp_path: Path, definition: Definition
) -> None:
    """A candidate that spins on every call does not make the subtracted round trip any longer: that is timed
    on the worker's own empty kernel, in a host of its own. The round trip is no longer than a call."""
    kernel, inputs, outputs, call = spinning(tmp_path, definition, 2_000_000)
    start = time.perf_counter()
    call()
    spun_ms = (time.perf_counter() - start) * 1e3
    round_trip = kernel.round_trip_ms(inputs, outputs, {"n": 4096})
    assert 0 < round_trip < spun_ms / 4
    assert torch.allclose(outputs["out"], 2 * inputs["x"] + inputs["y"])  # the empty kernel wrote nothing
    kernel.release()


def test_the_host_s_cpu_time_counts_the_kernel_s_work(tmp_path: Path, definition: Definition) -> None:
    kernel, _, _, call = spinning(tmp_path, definition, 100_000_000)
    before = kernel.cpu_seconds()
    call()
    after = kernel.cpu_seconds()
    assert before is not None and after is not None and after - before > 0.005  # 100M loop steps: over 20 ms
    kernel.release()
    assert kernel.cpu_seconds() is None


def test_a_thread_the_library_starts_gets_no_time_between_binding_and_call(
    tmp_path: Path, definition: Definition
) -> None:
    """A library that starts a spinning thread when it is loaded could load the machine while the worker
    measures the round trip it subtracts (after binding, before the first call): the host is stopped then."""
    body = 'static void spin() { for (;;) asm volatile(""); }\n'
    body += "__attribute__((constructor)) static void start() { std::thread(spin).detach(); }\n" + HONEST
    kernel = HostKernel(library(tmp_path, body), "scale_add", definition)
    inputs, outputs = buffers()
    call = kernel.bind(inputs, outputs, {"n": 4096})
    before = kernel.cpu_seconds()
    time.sleep(0.3)
    after = kernel.cpu_seconds()
    assert before is not None and after is not None and after - before < 0.03
    call()
    assert torch.allclose(outputs["out"], 2 * inputs["x"] + inputs["y"])
    kernel.release()


REACHES = """#include <fcntl.h>
#include <sched.h>
#include <sys/prctl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
static int probe(int done) { return done < 0 ? errno : 0; }
static void probes(pid_t pid, float* out) {
  cpu_set_t cpus;
  sched_getaffinity(pid, sizeof cpus, &cpus);
  struct rlimit old;
  errno = 0;
  int nice = getpriority(PRIO_PROCESS, pid);
  out[0] = probe(kill(pid ? pid : getpid(), 0));
  out[1] = probe(sched_setaffinity(pid, sizeof cpus, &cpus));
  out[2] = probe(prlimit(pid, RLIMIT_NOFILE, nullptr, &old));
  out[3] = probe(setpriority(PRIO_PROCESS, pid, nice));
  long fd = syscall(SYS_pidfd_open, pid ? pid : getpid(), 0);
  out[4] = probe((int)fd);
  if (fd >= 0) close((int)fd);
}
extern "C" int scale_add(const float* x, const float*, float* out, long) {
  probes((pid_t)x[0], out);
  probes(0, out + 5);
  char mem[64];
  snprintf(mem, sizeof mem, "/proc/%d/mem", (int)x[0]);
  int fd = open(mem, O_RDONLY);
  out[10] = probe(fd);
  if (fd >= 0) close(fd);
  out[11] = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
  return 0;
}
"""


def test_a_kernel_acts_on_its_own_process_only(tmp_path: Path, definition: Definition) -> None:
    """Signals, affinity, limits, priority and pidfds of the worker and of another host are refused (EPERM),
    its own are not; another host's memory cannot be opened (EACCES: hosts are non-dumpable and, run by root,
    hold no capability); the test's own process is dumpable: a test run by a user sees the probe open its memory."""
    sibling = HostKernel(library(tmp_path, HONEST, "honest"), "scale_add", definition)
    sibling.bind(*buffers(), {"n": 4096})()  # its host stays (stopped) while the other kernel runs, as a pair's
    sibling_pid = sibling.pids()[0]
    prober = HostKernel(library(tmp_path, REACHES, "reaches"), "scale_add", definition)
    for target, memory in ((os.getpid(), OWN_MEMORY_ERRNO), (sibling_pid, 13)):
        codes = reach_codes(prober, target, 12)
        assert codes == [1] * 5 + [0] * 5 + [memory, 0], f"pid {target}: {codes}"
    sibling.release()
    prober.release()


def test_an_openmp_kernel_runs_when_the_owner_asks_openmp_to_bind_threads(
    tmp_path: Path, definition: Definition, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libgomp pins each thread it creates by the thread's id, which the host's filter refuses: the host's
    environment leaves the binding out (else every OpenMP kernel would fail to create its threads)."""
    source = tmp_path / "omp.cpp"
    source.write_text(HONEST.replace("  for (long i", "  #pragma omp parallel for num_threads(2)\n  for (long i"))
    built = tmp_path / "omp.so"
    subprocess.run(["g++", "-O1", "-shared", "-fPIC", "-fopenmp", "-o", str(built), str(source)], check=True)
    monkeypatch.setenv("OMP_PROC_BIND", "true")
    monkeypatch.setenv("OMP_PLACES", "cores")
    kernel = HostKernel(str(built), "scale_add", definition)
    inputs, outputs = buffers()
    kernel.bind(inputs, outputs, {"n": 4096})()
    assert torch.allclose(outputs["out"], 2 * inputs["x"] + inputs["y"])
    kernel.release()


@pytest.fixture
def following() -> Iterator[None]:
    """Hosts follow this process's CPU for the test (as in a worker whose kernels use one thread)."""
    if not follow_caller(True):
        pytest.skip("this platform cannot tell which CPU a thread is on")
    mine = os.sched_getaffinity(0)
    try:
        yield
    finally:
        follow_caller(False)
        os.sched_setaffinity(0, mine)


def cpus_of(pid: int) -> str:
    status = Path(f"/proc/{pid}/status").read_text()
    return next(line.split(":", 1)[1].strip() for line in status.splitlines() if line.startswith("Cpus_allowed_list"))


def test_a_host_takes_turns_with_the_worker_on_its_cpu_and_the_move_is_not_the_kernel_s(
    tmp_path: Path, definition: Definition, following: None
) -> None:
    """Before a call the host is moved to the CPU the caller is on (a call then wakes no other CPU); where
    the caller moves, the host follows at its next call. The move is evoteam's, not reported as the kernel's."""
    cpus = sorted(os.sched_getaffinity(0))
    kernel = HostKernel(library(tmp_path, HONEST), "scale_add", definition)
    inputs, outputs = buffers()
    call = kernel.bind(inputs, outputs, {"n": 4096})
    for cpu in cpus[:2]:
        os.sched_setaffinity(0, {cpu})
        call()
        (pid,) = kernel.pids()
        assert cpus_of(pid) == str(cpu)
    assert torch.allclose(outputs["out"], 2 * inputs["x"] + inputs["y"])
    assert kernel.changed_state() == []
    kernel.release()


def test_a_kernel_that_changes_its_own_cpus_is_reported_though_its_host_is_moved_after(
    tmp_path: Path, definition: Definition, following: None
) -> None:
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("needs two CPUs")
    widens = "#include <sched.h>\n" + HONEST.replace(
        "  return 0;",
        "  cpu_set_t all;\n  memset(&all, 0xff, sizeof all);\n  sched_setaffinity(0, sizeof all, &all);\n  return 0;",
    )
    kernel = HostKernel(library(tmp_path, widens), "scale_add", definition)
    inputs, outputs = buffers()
    call = kernel.bind(inputs, outputs, {"n": 4096})
    os.sched_setaffinity(0, {cpus[0]})
    call()  # moved to the first CPU, then the kernel takes every CPU back
    os.sched_setaffinity(0, {cpus[1]})
    call()  # moved to the second: what the kernel did is read before
    assert kernel.changed_state() == ["the CPU affinity"]
    kernel.release()


def test_the_worker_stays_on_one_cpu_for_a_request_and_gets_its_cpus_back(following: None) -> None:
    before = os.sched_getaffinity(0)
    with on_one_cpu():
        assert len(os.sched_getaffinity(0)) == 1
    assert os.sched_getaffinity(0) == before
    if len(before) < 2:
        return
    with on_one_cpu():  # a kernel in the worker's own process changed them: left for the worker to report
        changed = {min(before - os.sched_getaffinity(0))}
        os.sched_setaffinity(0, changed)
    assert os.sched_getaffinity(0) == changed


def test_what_a_kernel_prints_reaches_the_log_though_its_host_is_killed(
    tmp_path: Path, definition: Definition, capfd: pytest.CaptureFixture[str]
) -> None:
    """A host ends with SIGKILL, so nothing it buffered would be written at exit: the native host flushes
    after every call, and a line the kernel did not end is in the log with the call's answer."""
    body = HONEST.replace("  return 0;", '  std::printf("no newline, n=%ld", n);\n  return 0;')
    kernel = HostKernel(library(tmp_path, body), "scale_add", definition)
    inputs, outputs = buffers()
    kernel.bind(inputs, outputs, {"n": 4096})()
    kernel.release()
    assert "no newline, n=4096" in capfd.readouterr().out


JOINS = """#include <unistd.h>
#include <chrono>
extern "C" int scale_add(const float* x, const float* y, float* out, long n) {
  out[0] = setpgid(0, getpgid(getppid())) == 0 ? 0.0f : (float)errno;  // the worker's group
  std::thread([=] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (long i = 1; i < n; ++i) out[i] = 2.0f * x[i] + y[i];
  }).detach();
  return 0;
}
"""


def test_a_host_cannot_join_the_worker_s_process_group_to_run_on_between_calls(
    tmp_path: Path, definition: Definition
) -> None:
    """The worker stops a host by its process group. Joined to the worker's group, the host was not stopped
    after its answer, and the thread the kernel left wrote the outputs after it; now ``setpgid`` is refused,
    the host stays in its group and is stopped, and the thread's work stays undone."""
    kernel = HostKernel(library(tmp_path, JOINS), "scale_add", definition)
    inputs, outputs = buffers()
    kernel.bind(inputs, outputs, {"n": 4096})()
    time.sleep(0.4)
    (pid,) = kernel.pids()
    assert outputs["out"][0].item() == errno.EPERM
    assert os.getpgid(pid) == pid
    assert Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    assert torch.isnan(outputs["out"][1:]).all()
    kernel.release()


HOLDS = """#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/msg.h>
#include <sys/shm.h>
#include <sys/syscall.h>
#include <unistd.h>
static int probe(long made) { return made < 0 ? errno : 0; }
extern "C" int scale_add(const float*, const float*, float* out, long) {
  int fd = memfd_create("held", 0);
  out[0] = probe(fd);
  if (fd >= 0) close(fd);
  out[1] = probe(shmget(IPC_PRIVATE, 1 << 20, 0600));
  out[2] = probe(msgget(IPC_PRIVATE, 0600));
  char params[120] = {0};  // struct io_uring_params
  out[3] = probe(syscall(425, 8, params));
  return 0;
}
"""


def test_a_kernel_makes_no_memory_outside_its_mappings_and_no_io_uring(tmp_path: Path, definition: Definition) -> None:
    """A memfd (filled with ``write``, no address-space limit counts it), a SysV segment or message queue,
    and an io_uring are refused (EPERM) in the native host too."""
    kernel = HostKernel(library(tmp_path, HOLDS), "scale_add", definition)
    inputs, outputs = buffers(16)
    kernel.bind(inputs, outputs, {"n": 16})()
    kernel.release()
    assert outputs["out"][:4].tolist() == [errno.EPERM] * 4


KEEPS_SIZE = """#include <fcntl.h>
extern "C" int scale_add(const float*, const float*, float* out, long) {
  // The host may write no file: a closed descriptor shows what the program decides before the kernel looks.
  out[0] = fallocate(-1, FALLOC_FL_KEEP_SIZE, 0, 1 << 20) == 0 ? 0 : errno;
  out[1] = fallocate(-1, 0, 0, 1 << 20) == 0 ? 0 : errno;
  return 0;
}
"""


def test_a_kernel_takes_no_disk_past_a_file_s_end(tmp_path: Path, definition: Definition) -> None:
    """``fallocate`` keeping the file's size (beyond the file size limit) is refused with EOPNOTSUPP in the
    native host too (before the kernel looks at the file); one that grows the file reaches the kernel, which
    finds the descriptor closed (EBADF)."""
    kernel = HostKernel(library(tmp_path, KEEPS_SIZE), "scale_add", definition)
    inputs, outputs = buffers(16)
    kernel.bind(inputs, outputs, {"n": 16})()
    kernel.release()
    assert outputs["out"][:2].tolist() == [errno.EOPNOTSUPP, errno.EBADF]
