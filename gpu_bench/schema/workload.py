"""FlashInfer-Bench ``Workload``: concrete axis values and how each input is made."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from evoteam.gpu_bench.schema._base import Model, NonEmptyStr


class RandomInput(Model):
    """Random values drawn by the harness (seeded per trial)."""

    type: Literal["random"] = "random"


class ScalarInput(Model):
    """A scalar value passed as is."""

    type: Literal["scalar"] = "scalar"
    value: bool | int | float


class SafetensorsInput(Model):
    """A tensor stored in a safetensors blob, relative to the dataset root."""

    type: Literal["safetensors"] = "safetensors"
    path: NonEmptyStr
    tensor_key: NonEmptyStr


Fill = Literal["zeros", "ones", "nan", "inf", "-inf", "large", "tiny", "specials"]


class FillInput(Model):
    """Values an engineer (or an agent's scratch test) picks to probe a kernel's edges: all zeros or ones, NaN,
    infinities, values near the dtype's largest or its smallest normal, or random values with NaN, infinities
    and signed zeros sprinkled in (``specials``). An evoteam extension: FlashInfer's datasets never hold it."""

    type: Literal["fill"] = "fill"
    value: Fill


class GeneratedInput(Model):
    """Values the definition's reference draws itself, afresh for every trial: its module-level
    ``trial_inputs(seed, device)`` returns every input in definition order, and the workload takes those of its
    ``generated`` inputs. An imported KernelBench problem's reference calls the problem's ``get_inputs()`` under
    ``torch.manual_seed(seed)`` there, as KernelBench does for each correctness trial. An evoteam extension:
    FlashInfer's datasets never hold it."""

    type: Literal["generated"] = "generated"


InputSpec = Annotated[
    RandomInput | ScalarInput | SafetensorsInput | FillInput | GeneratedInput, Field(discriminator="type")
]


class Workload(Model):
    """One concrete shape (and data source) to evaluate a definition on."""

    uuid: NonEmptyStr
    axes: dict[NonEmptyStr, int]
    inputs: dict[NonEmptyStr, InputSpec]
