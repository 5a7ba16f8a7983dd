"""Maps FlashInfer-Bench dtype names to torch dtypes and to what the C ABI passes for scalars."""

from __future__ import annotations

import ctypes

import torch

from evoteam.gpu_bench.schema import DType

_TORCH: dict[DType, torch.dtype] = {
    DType.FLOAT64: torch.float64,
    DType.FLOAT32: torch.float32,
    DType.FLOAT16: torch.float16,
    DType.BFLOAT16: torch.bfloat16,
    DType.FLOAT8_E4M3FN: torch.float8_e4m3fn,
    DType.FLOAT8_E4M3: torch.float8_e4m3fn,
    DType.FLOAT8_E5M2: torch.float8_e5m2,
    DType.INT64: torch.int64,
    DType.INT32: torch.int32,
    DType.INT16: torch.int16,
    DType.INT8: torch.int8,
    DType.UINT8: torch.uint8,
    DType.BOOL: torch.bool,
}


def torch_dtype(dtype: DType) -> torch.dtype:
    try:
        return _TORCH[dtype]
    except KeyError:
        raise ValueError(f"dtype {dtype} has no torch equivalent on this machine") from None


def is_floating(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def c_scalar_type(dtype: DType) -> type[ctypes.c_double] | type[ctypes.c_int64]:
    """A scalar input is passed by value: ``double`` for floats, ``int64_t`` for integers and bools."""
    return ctypes.c_double if torch_dtype(dtype).is_floating_point else ctypes.c_int64
