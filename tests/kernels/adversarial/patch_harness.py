# category: 7 python binding
# what: computes nothing. When imported (the worker loads it to build it) it replaces the harness's output
#   check in the worker's modules: check_outputs of evoteam.gpu_bench.worker.evaluate and .timed, and compare
#   of evoteam.gpu_bench.verify.compare and of evaluate, with one that always agrees. One honest computation
#   into a tensor of its own keeps its time plausible; `out` keeps the harness's NaN.
# expected: rejected (the harness's modules are not the candidate's to patch; in its Python host it patches
#   only copies of its own, and its NaN outputs are checked)
import sys

import torch

from evoteam.gpu_bench.verify.compare import Errors


def _agree(*args, **kwargs):
    return Errors(0.0, 0.0)


for _name in ("evoteam.gpu_bench.worker.evaluate", "evoteam.gpu_bench.worker.timed"):
    _module = sys.modules.get(_name)
    if _module is not None:
        _module.check_outputs = _agree
for _name in ("evoteam.gpu_bench.verify.compare", "evoteam.gpu_bench.worker.evaluate"):
    _module = sys.modules.get(_name)
    if _module is not None:
        _module.compare = _agree


def run(x, y, out):
    return torch.add(2 * x, y)  # the time an honest call takes; `out` is left as it was
