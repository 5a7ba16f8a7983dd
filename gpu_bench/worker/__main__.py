"""``python -m evoteam.gpu_bench.worker`` (also ``evoteam worker``): serve evaluation requests on stdio."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evoteam.gpu_bench.worker.build_helper import BuildHelper


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log", type=Path, required=True, help="file that receives everything kernels print")
    p.add_argument("--cache", type=Path, default=None, help="build cache folder")
    p.add_argument("--memory-limit-mb", type=int, default=None, help="address-space limit of the worker")
    p.add_argument("--max-processes", type=int, default=None, help="process limit (RLIMIT_NPROC) of the worker")
    p.add_argument(
        "--max-file-mb",
        type=int,
        default=None,
        help="largest file the worker and what it starts may write (RLIMIT_FSIZE; default 2048)",
    )
    p.add_argument(
        "--sandbox",
        action="store_true",
        help="re-run itself inside this host's sandbox (bubblewrap) when one works here; a remote runner's worker",
    )
    p.add_argument(
        "--threads",
        type=int,
        default=None,
        help="threads kernels may use (default: $OMP_NUM_THREADS where set, else one per CPU)",
    )
    p.add_argument("--cpus", default=None, help="CPUs to run on, e.g. 0-3,6 (default: every CPU allowed)")


def run(args: argparse.Namespace) -> int:
    from evoteam.gpu_bench.worker.disk import MIB, DiskLimits, limit_file_size
    from evoteam.gpu_bench.worker.threads import default_policy, parse_cpus

    limit_file_size(args.max_file_mb * MIB if args.max_file_mb else DiskLimits().file_bytes)  # before it starts any
    if args.sandbox:
        confine(args)  # returns only where no sandbox works (the log says so) or already inside one
    try:
        policy = default_policy(args.threads, parse_cpus(args.cpus) if args.cpus else None)
    except ValueError as exc:
        print(f"evoteam worker: {exc}", file=sys.stderr)
        return 2
    os.environ.update(policy.environment())  # before torch loads: its OpenMP reads them once, at start
    builder, writes = confine_writes(args)

    from evoteam.gpu_bench.worker.server import serve

    return serve(args.log, builder, args.memory_limit_mb, args.max_processes, policy, writes)


def confine_writes(args: argparse.Namespace) -> tuple[BuildHelper, str]:
    """While the worker has one thread and no candidate: starts its build helper (the one writer of the build
    cache), makes sure the flush library exists, then restricts the worker's own writes to its folders
    (``writes.py``). The helper, and a line saying what holds."""
    from evoteam.gpu_bench.timing import flush_library
    from evoteam.gpu_bench.timing.gpu_lock import lock_folder
    from evoteam.gpu_bench.worker import extension_dirs, writes
    from evoteam.gpu_bench.worker.build_helper import BuildHelper

    locks = lock_folder()  # before TMPDIR moves: the machine's one, shared by every worker
    builder = BuildHelper(args.cache)
    flush_library.library()
    folder = args.log.parent
    writes.private_tmpdir(folder)
    triton = os.environ.get("TRITON_CACHE_DIR")
    builds = extension_dirs.root_from_environment()
    named = [Path(triton)] if triton and (builds is None or builds not in Path(triton).parents) else []
    held = writes.confine(writes.writable_folders(folder, builds, named), locks)
    with args.log.open("a") as log:
        log.write(f"evoteam worker: its writes are {held}\n")
    return builder, held


def confine(args: argparse.Namespace) -> None:
    """Replaces this process by the same worker inside the sandbox (its log folder, cache and evoteam's cache
    writable), with a process limit taken out here, where every process of the user is visible."""
    from evoteam.gpu_bench import sandbox
    from evoteam.gpu_bench.build.builder import default_cache_root
    from evoteam.gpu_bench.worker.client import confined
    from evoteam.gpu_bench.worker.strays import process_limit

    if os.environ.get(sandbox.IN_SANDBOX_ENV) == "1":
        return
    chosen = sandbox.current()
    if not chosen.isolated:
        with args.log.open("a") as log:
            log.write(f"evoteam worker: running unconfined: {chosen.description}\n")
        return
    cache = args.cache or default_cache_root()
    cmd = [sys.executable, "-m", "evoteam.gpu_bench.worker", "--log", str(args.log), "--cache", str(cache)]
    cmd += ["--memory-limit-mb", str(args.memory_limit_mb)] if args.memory_limit_mb else []
    cmd += ["--max-processes", str(args.max_processes or process_limit())]
    cmd += ["--max-file-mb", str(args.max_file_mb)] if args.max_file_mb else []
    cmd += ["--threads", str(args.threads)] if args.threads else []
    cmd += ["--cpus", args.cpus] if args.cpus else []
    argv, env = confined(cmd, dict(os.environ), args.log.parent, cache)
    sys.stdout.flush()
    os.execvpe(argv[0], argv, env)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="evoteam worker")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
