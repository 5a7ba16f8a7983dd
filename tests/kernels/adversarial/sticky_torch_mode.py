# category: 7 python binding
# what: computes nothing. On its first call it enters a TorchFunctionMode and never leaves it, so the mode stays
#   active for everything the worker does afterwards on that thread, the harness's output check included: under
#   it, subtraction gives zeros and isfinite/isclose/eq give all-true (allclose/equal: True). One honest
#   computation into a tensor of its own keeps its time plausible; `out` keeps the harness's NaN.
# expected: rejected (a torch mode left active by a candidate is the harness's state, not the candidate's; in
#   its Python host the mode is its own, and its NaN outputs are checked)
import torch
from torch.overrides import TorchFunctionMode

_SUB = {"sub", "__sub__", "__rsub__", "subtract"}
_TRUE = {"isfinite", "isclose", "eq", "__eq__"}


class Agree(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if name in _SUB and tensors:
            return torch.zeros_like(tensors[0])
        if name in _TRUE and tensors:
            return torch.ones_like(tensors[0], dtype=torch.bool)
        if name in ("allclose", "equal") and tensors:
            return True
        return func(*args, **kwargs)


_entered = []


def run(x, y, out):
    if not _entered:
        mode = Agree()
        mode.__enter__()
        _entered.append(mode)
    return torch.add(2 * x, y)  # the time an honest call takes; `out` is left as it was
