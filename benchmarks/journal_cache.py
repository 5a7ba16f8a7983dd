"""How much of a run's input came from the prompt cache, by agent and in all: the ``tokens`` events of a run's
journal (what the model servers reported, call by call), as plain input, cache writes and cache reads.

    python benchmarks/journal_cache.py .evoteam/runs/RUN/journal.jsonl

A team's conversations are short (a few calls an agent), so each agent's first call writing the shared prefix
(tools, system prompt, mission, task, knowledge) weighs more than in one long conversation
(``benchmarks/prompt_cache.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

PARTS = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def shares(journal: Path) -> dict[str, Counter[str]]:
    """Per ``ROLE agent``: the calls and the input tokens of each kind; ``all`` sums them."""
    found: dict[str, Counter[str]] = {}
    for line in journal.read_text().splitlines():
        event = json.loads(line)
        if event.get("kind") != "tokens":
            continue
        data = event["data"]
        usage = data.get("usage", {})
        for key in (f"{data.get('role')} {data.get('agent')}", "all"):
            counts = found.setdefault(key, Counter())
            counts["calls"] += 1
            for part in PARTS:
                counts[part] += int(usage.get(part, 0))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("journal", type=Path)
    args = parser.parse_args(argv)
    found = shares(args.journal)
    if not found:
        print(f"{args.journal}: no tokens events (an offline run calls no model)", file=sys.stderr)
        return 1
    table = Table(title=f"Prompt cache over the run {args.journal.parent.name}")
    for column in ("agent", "calls", "input", "cache write", "cache read", "read share"):
        table.add_column(column, justify="left" if column == "agent" else "right")
    for name, counts in sorted(found.items(), key=lambda item: item[0] == "all"):
        total = sum(counts[p] for p in PARTS) or 1
        if name == "all":
            table.add_section()
        table.add_row(
            name, str(counts["calls"]), f"{counts['input_tokens']:,}", f"{counts['cache_creation_input_tokens']:,}",
            f"{counts['cache_read_input_tokens']:,}", f"{counts['cache_read_input_tokens'] / total:.1%}",
        )  # fmt: skip
    Console().print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
