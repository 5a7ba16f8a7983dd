# category: 7 python binding
# what: computes nothing and returns (value-returning binding: run(x, y)) a torch.Tensor subclass of zeros whose
#   __torch_function__ lies to whoever compares it: subtraction gives zeros, isfinite/isclose/eq give all-true,
#   allclose/equal give True; the rest behaves as a tensor (results stay of the subclass). Zeros of the right
#   shape and dtype cost about what the reference costs, so its speedup looks plausible.
# binding: python, value-returning
# expected: rejected (outputs are checked as plain tensors: the candidate's type does not get a say; its
#   Python host copies the zeros into the shared outputs, and they are checked)
import torch

_AGREE = {"sub", "__sub__", "__rsub__", "subtract", "isfinite", "isclose", "eq", "__eq__", "allclose", "equal"}


class Agreeable(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in _AGREE:
            first = next(a for a in args if isinstance(a, torch.Tensor))
            with torch._C.DisableTorchFunctionSubclass():
                if name in ("allclose", "equal"):
                    return True
                if name in ("sub", "__sub__", "__rsub__", "subtract"):
                    return torch.zeros_like(first).as_subclass(cls)
                return torch.ones_like(first, dtype=torch.bool)
        return super().__torch_function__(func, types, args, kwargs or {})


def run(x, y):
    return torch.zeros_like(x).as_subclass(Agreeable)
