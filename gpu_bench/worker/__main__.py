"""``python -m evoteam.gpu_bench.worker`` (also ``evoteam worker``): serve evaluation requests on stdio."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--log", type=Path, required=True, help="file that receives everything kernels print")
    p.add_argument("--cache", type=Path, default=None, help="build cache folder")
    p.add_argument("--memory-limit-mb", type=int, default=None, help="address-space limit of the worker")
    p.add_argument("--max-processes", type=int, default=None, help="process limit (RLIMIT_NPROC) of the worker")


def run(args: argparse.Namespace) -> int:
    from evoteam.gpu_bench.worker.server import serve

    return serve(args.log, args.cache, args.memory_limit_mb, args.max_processes)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="evoteam worker")
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
