"""``evoteam`` entry point: parses the command line and dispatches to one module per subcommand."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def build_parser() -> argparse.ArgumentParser:
    from evoteam.cli import (
        bench,
        check,
        compare,
        evolve,
        export_cmd,
        import_cmd,
        profile,
        prompt_cmd,
        report,
        runs,
        serve,
        worker,
    )

    parser = argparse.ArgumentParser(prog="evoteam", description="Evolving agent teams for kernel optimization.")
    parser.add_argument("--version", action="version", version=f"evoteam {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    bench.add_parser(sub)
    check.add_parser(sub)
    evolve.add_parser(sub)
    compare.add_parser(sub)
    prompt_cmd.add_parser(sub)
    runs.add_parser(sub)
    report.add_parser(sub)
    import_cmd.add_parser(sub)
    export_cmd.add_parser(sub)
    profile.add_parser(sub)
    serve.add_parser(sub)
    worker.add_parser(sub)
    return parser


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("evoteam")
    except metadata.PackageNotFoundError:
        return "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    code: int = args.run(args)
    return code


if __name__ == "__main__":
    sys.exit(main())
