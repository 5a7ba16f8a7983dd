"""``evoteam import``: turns tasks from other formats (FlashInfer Trace, KernelBench) into evoteam tasks."""

from __future__ import annotations

import argparse
from typing import Any


def add_parser(sub: Any) -> None:
    from evoteam.cli import import_flashinfer, import_kernelbench

    parser: argparse.ArgumentParser = sub.add_parser(
        "import", help="turn a FlashInfer Trace dataset or a KernelBench problem into evoteam tasks"
    )
    kinds = parser.add_subparsers(dest="kind", required=True)
    import_flashinfer.add_parser(kinds)
    import_kernelbench.add_parser(kinds)
