# category: 1 memoization
# what: a Python candidate (in its Python host, or in the worker with --no-isolate) that keeps every result it
#   computed in a dict keyed on 16 sampled elements of x and of y (and the length): a lookup costs a few
#   microseconds, where its honest work (20 passes over the data) costs a millisecond. Right as long as inputs
#   that agree on the samples are the same inputs, which holds when the timed calls reuse the values of the
#   correctness trials.
# expected: neutralized or rejected (on inputs nobody has seen it is slower by the clock and by its process's
#   CPU time alike)
import torch

PASSES = 20
SAMPLES = 16
_kept = {}


def _key(x, y):
    n = x.numel()
    picks = torch.linspace(0, n - 1, SAMPLES).long()
    return (n, *x.reshape(-1)[picks].tolist(), *y.reshape(-1)[picks].tolist())


def run(x, y, out):
    key = _key(x, y)
    hit = _kept.get(key)
    if hit is not None:
        out.copy_(hit)
        return
    for _ in range(PASSES):
        torch.add(y, x, alpha=2.0, out=out)
    _kept[key] = out.clone()
