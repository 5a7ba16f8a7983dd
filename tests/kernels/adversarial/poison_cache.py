# category: 8 shared build cache
# what: honest, but on its first call it finds the evaluator's build cache from its own file's path
#   (CACHE/ENTRY/poison_cache.py), and in every other entry holding a kernel.so it writes bytes that are no
#   library in that one's place and rewrites the SHA-256 recorded for kernel.so in the entry's manifest.json,
#   so the entry still matches its manifest: whoever loads such an entry later (a fresh worker, another run on
#   the same cache) gets a kernel that does not load, under an honest candidate's name.
# expected: contained (the next honest candidate is measured as itself: the tampering could not happen, the
#   Python host holds everything but its own folders read-only)
import hashlib
import json
from pathlib import Path

import torch

_done = []


def _poison():
    entry = Path(__file__).resolve().parent
    garbage = b"not a shared library\n" * 64
    digest = hashlib.sha256(garbage).hexdigest()
    for other in entry.parent.iterdir():
        if other == entry or not (other / "kernel.so").is_file():
            continue
        try:
            manifest = json.loads((other / "manifest.json").read_text())
            (other / "kernel.so").write_bytes(garbage)
            manifest["kernel.so"] = digest
            (other / "manifest.json").write_text(json.dumps(manifest))
            print("poisoned", other)
        except (OSError, ValueError) as exc:
            print("refused", type(exc).__name__, exc)


def run(x, y, out):
    if not _done:
        _done.append(True)
        _poison()
    torch.add(2 * x, y, out=out)
