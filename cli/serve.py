"""``evoteam serve``: the language server, on stdio (what editors start) or on 127.0.0.1:PORT for debugging.

Logs go to stderr (``--log-level``); stdout carries only the protocol.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "serve", help="run the language server (stdio)", description="Run evoteam's language server."
    )
    p.add_argument("--tcp", type=int, metavar="PORT", help="listen on 127.0.0.1:PORT instead of stdio")
    p.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.set_defaults(run=run_serve)


def run_serve(args: argparse.Namespace) -> int:
    from evoteam.server.app import build_server

    logging.basicConfig(stream=sys.stderr, level=args.log_level, format="%(asctime)s %(name)s %(message)s")
    if args.tcp is not None and not 0 < args.tcp < 65536:
        print(f"evoteam: --tcp {args.tcp} is not a port", file=sys.stderr)
        return 2
    server = build_server()
    if args.tcp is not None:
        server.start_tcp("127.0.0.1", args.tcp)
    else:
        server.start_io()
    return 0
