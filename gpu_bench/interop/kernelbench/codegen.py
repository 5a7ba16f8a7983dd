"""The Python that an imported KernelBench problem runs: the definition's reference, the ModelNew adapter and
the starting ModelNew.

Both the reference and the adapter embed the problem's source (with the size overrides applied), so each is
self-contained. They build their model the same way, the way KernelBench makes weights equal: inside
``torch.random.fork_rng`` (the caller's random state is left alone), ``torch.manual_seed(SEED)``, then
``get_init_inputs()``, then ``torch.manual_seed(SEED)`` again right before ``Model(*init)`` or
``ModelNew(*init)``. A ModelNew that creates the same parameters in the same order therefore starts from the
same weights as Model. The model is built once per device, on the first call, then moved to the device of
the first tensor input; ``forward`` runs under ``torch.no_grad()``, as KernelBench's evaluation does.
"""

from __future__ import annotations

from string import Template

MODEL_NEW_FILE = "model_new.py"
ADAPTER_FILE = "kernelbench_run.py"
ENTRY = "run"

_PRELUDE = Template('''\
"""KernelBench problem $origin, as evoteam runs it.

The problem's source is embedded below, with evoteam's size overrides applied. Weights are made equal the way
KernelBench makes them: torch.manual_seed(SEED) before get_init_inputs() and again right before Model(*init)
(and ModelNew(*init) in the candidate adapter), inside torch.random.fork_rng, so the caller's random state is
untouched. The model is built once per device and called under torch.no_grad().
"""

import torch

SEED = $seed
PROBLEM_SOURCE = $source


def _load_problem():
    namespace = {"__name__": "kernelbench_problem"}
    exec(compile(PROBLEM_SOURCE, "<kernelbench problem $origin>", "exec"), namespace)
    return namespace


PROBLEM = _load_problem()
_models = {}


def _seeded(make, device):
    devices = []
    if device.type == "cuda":
        devices = [device.index if device.index is not None else torch.cuda.current_device()]
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(SEED)
        return make()


def init_inputs(device):
    get = PROBLEM.get("get_init_inputs")
    values = list(_seeded(get, device)) if get is not None else []
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def build(cls, device):
    args = init_inputs(device)
    return _seeded(lambda: cls(*args), device).to(device)


def model_for(cls, inputs):
    device = next((x.device for x in inputs if isinstance(x, torch.Tensor)), torch.device("cpu"))
    key = (cls.__name__, str(device))
    if key not in _models:
        _models[key] = build(cls, device)
    return _models[key]


def forward(cls, inputs):
    model = model_for(cls, inputs)
    with torch.no_grad():
        return model(*inputs)


def trial_inputs(seed, device):
    """get_inputs() under torch.manual_seed(seed), on the CPU, then moved to device: how KernelBench draws the
    inputs of each correctness trial. evoteam's evaluator calls it with a fresh seed per trial."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        values = list(PROBLEM["get_inputs"]())
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]
''')

PRELUDE_NAMES = frozenset(
    {"torch", "SEED", "PROBLEM_SOURCE", "PROBLEM", "init_inputs", "build", "model_for", "forward", "trial_inputs"}
)
"""Module-level names of the generated code, which a ``run`` parameter must not shadow."""

_REFERENCE = Template("""

def run($args):
    return forward(PROBLEM["Model"], ($args,))
""")

_ADAPTER = Template('''
import importlib.util
import pathlib
import sys

MODEL_NEW_FILE = $model_new_file
INPUTS = $inputs
OUTPUTS = $outputs


def _load_model_new():
    path = pathlib.Path(__file__).with_name(MODEL_NEW_FILE)
    spec = importlib.util.spec_from_file_location(f"kernelbench_model_new_{abs(hash(str(path)))}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses, pickling and inspect look their module up there
    spec.loader.exec_module(module)
    cls = getattr(module, "ModelNew", None)
    if not (isinstance(cls, type) and issubclass(cls, torch.nn.Module)):
        raise ImportError(f"{MODEL_NEW_FILE} defines no class ModelNew(nn.Module)")
    return cls


ModelNew = _load_model_new()


def run(*args):
    """ModelNew(*get_init_inputs()).forward(*inputs): returns the outputs, or copies them into the output
    tensors when they are passed after the inputs (destination passing)."""
    inputs, outputs = args[: len(INPUTS)], args[len(INPUTS) :]
    produced = forward(ModelNew, inputs)
    if not outputs:
        return produced
    values = (produced,) if isinstance(produced, torch.Tensor) else tuple(produced)
    if len(values) != len(OUTPUTS):
        raise ValueError(f"ModelNew.forward returned {len(values)} outputs; the definition has {len(OUTPUTS)}")
    for name, dest, value in zip(OUTPUTS, outputs, values):
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"ModelNew.forward's output {name!r} is a {type(value).__name__}, not a tensor")
        if value.shape != dest.shape or value.dtype != dest.dtype:
            raise ValueError(
                f"ModelNew.forward's output {name!r} is {tuple(value.shape)} {value.dtype}; "
                f"the definition wants {tuple(dest.shape)} {dest.dtype}"
            )
        dest.copy_(value)
    return None
''')

_STARTING_MODEL_NEW = """

# evoteam: the starting candidate is the problem's own Model. Replace it with a class ModelNew(nn.Module) that
# takes the same __init__ arguments (get_init_inputs()) and forward arguments (get_inputs()) and creates its
# parameters in the same order, so the seeded initialisation gives it the same weights.
class ModelNew(Model):
    pass
"""


_COMPILED_MODEL_NEW = """

# evoteam: KernelBench's compiled baseline, the problem's Model under torch.compile (Inductor, default mode).
# Model is built first, right after the seed, so it has the reference's weights; the first call compiles.
class ModelNew(torch.nn.Module):
    def __init__(self, *args, **kwargs):
        super().__init__()
        self.model = Model(*args, **kwargs)
        self.compiled = torch.compile(self.model)

    def forward(self, *inputs):
        return self.compiled(*inputs)
"""


def compiled_model_new(model_new: str) -> str:
    """A ModelNew file (the baseline's: the problem with ``class ModelNew(Model)``) with its ModelNew replaced by
    the problem's Model under ``torch.compile``, defined last so it wins."""
    return model_new.rstrip() + "\n" + _COMPILED_MODEL_NEW


def prelude(source: str, seed: int, origin: str) -> str:
    return _PRELUDE.substitute(source=repr(source), seed=seed, origin=origin.replace('"', "'"))


def reference_code(source: str, seed: int, origin: str, inputs: list[str]) -> str:
    """The definition's ``reference``: ``run(*inputs)`` returns ``Model(*get_init_inputs())(*inputs)``."""
    return prelude(source, seed, origin) + _REFERENCE.substitute(args=", ".join(inputs))


def adapter_code(source: str, seed: int, origin: str, inputs: list[str], outputs: list[str]) -> str:
    """The ``python``-binding entry file: ``run`` builds ModelNew from ``model_new.py`` beside it."""
    return prelude(source, seed, origin) + _ADAPTER.substitute(
        model_new_file=repr(MODEL_NEW_FILE), inputs=repr(inputs), outputs=repr(outputs)
    )


def starting_model_new(source: str) -> str:
    """The problem's source with ``class ModelNew(Model)`` appended: a candidate equal to the reference."""
    return source.rstrip() + "\n" + _STARTING_MODEL_NEW
