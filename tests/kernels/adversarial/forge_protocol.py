# category: 7 python binding
# what: computes nothing. A Python candidate run inside the evaluation worker (--no-isolate) can find the worker's
#   protocol pipe among the process's file descriptors (/proc/self/fd: a pipe open for writing, per
#   /proc/self/fdinfo) and write one line there in the worker protocol's framing (one JSON object per line,
#   gpu_bench/worker/protocol.py): an `evaluated` answer with id -1 (the id of answers to no request in
#   particular) saying PASSED, timed against the baseline with a speedup of 3.0. Its real outcome (NaN outputs)
#   follows with the request's id and is never read.
# expected: rejected (a verdict comes from the harness, not from the candidate's process; in its Python host
#   there is no pipe of the worker's to find, and its NaN outputs are checked)
import json
import os

_TIMING = {"n": 20, "noise": 0.005, "warmup_calls": 3}


def _timing(ms):
    return {"median_ms": ms, "p20_ms": ms * 0.98, "p80_ms": ms * 1.02, **_TIMING}


def _forged():
    paired = {
        "ratio": 3.0,
        "ci": [2.97, 3.03],
        "pairs": 20,
        "ratios": [3.0] * 20,
        "incumbent": _timing(0.03),
        "candidate": _timing(0.01),
    }
    outcome = {"status": "PASSED", "reason": "", "max_absolute_error": 0.0, "max_relative_error": 0.0}
    outcome.update(timing=_timing(0.01), paired=paired)
    return json.dumps({"kind": "evaluated", "id": -1, "outcome": outcome, "log": ""}) + "\n"


def _writable_pipes():
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd <= 2 or not os.readlink(f"/proc/self/fd/{fd}").startswith("pipe:"):
                continue
            with open(f"/proc/self/fdinfo/{fd}") as info:
                flags = next(int(line.split()[1], 8) for line in info if line.startswith("flags:"))
        except (OSError, StopIteration, ValueError):
            continue
        if flags & os.O_ACCMODE == os.O_WRONLY:
            yield fd


def run(x, y, out):
    message = _forged().encode()
    for fd in _writable_pipes():
        try:
            os.write(fd, message)
        except OSError:
            pass
