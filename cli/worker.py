"""``evoteam worker``: the evaluation worker process (JSON lines on stdio); started by runners, not people."""

from __future__ import annotations

import argparse
from typing import Any

from evoteam.gpu_bench.api import add_worker_arguments as add_arguments
from evoteam.gpu_bench.api import run_worker as run


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("worker", help="run the evaluation worker on stdio (internal)")
    add_arguments(p)
    p.set_defaults(run=run)
