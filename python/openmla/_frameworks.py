"""Framework-neutral helpers: dtype and format names, outputs allocated like the input, CUDA streams.

Nothing here imports a tensor framework at module import time; torch and CuPy are imported when a
call needs them (and torch only if it is installed).
"""

from __future__ import annotations

import sys
from typing import Any, Dict, Optional, Sequence

from . import _C
from ._C import Backend, DType, E4M3Overflow, Fp8Math, KVFormat, QueryLayout, TreeMask

_DTYPE_NAMES = {
    "bfloat16": DType.bfloat16,
    "bf16": DType.bfloat16,
    "float16": DType.float16,
    "fp16": DType.float16,
    "half": DType.float16,
    "float32": DType.float32,
    "float": DType.float32,
    "fp32": DType.float32,
    "float64": DType.float64,
    "double": DType.float64,
    "float8_e4m3fn": DType.float8_e4m3fn,
    "float8_e4m3": DType.float8_e4m3fn,
    "uint8": DType.uint8,
    "int32": DType.int32,
    "int64": DType.int64,
}

# NumPy / CuPy spelling of each DType (bfloat16 and float8 have none: NumPy holds their bits).
_NUMPY_NAMES = {
    DType.float32: "float32",
    DType.float16: "float16",
    DType.float64: "float64",
    DType.uint8: "uint8",
    DType.int32: "int32",
    DType.int64: "int64",
}


def as_dtype(value: Any, name: str) -> DType:
    """DType from a DType, a name ('bfloat16', 'fp16'), a torch dtype or a NumPy dtype/type."""
    if isinstance(value, DType):
        return value
    if isinstance(value, str):
        key = value
    elif hasattr(value, "__name__"):  # numpy.float16 and friends
        key = value.__name__
    elif hasattr(value, "name") and isinstance(value.name, str):  # numpy.dtype
        key = value.name
    else:  # torch.bfloat16 prints as 'torch.bfloat16'
        key = str(value).rsplit(".", 1)[-1]
    dtype = _DTYPE_NAMES.get(key.lower())
    if dtype is None:
        raise TypeError(f"{name}: expected a dtype (e.g. 'bfloat16', 'float16', torch.bfloat16), got {value!r}")
    return dtype


def as_kv_format(value: Any, name: str = "kv_format") -> KVFormat:
    """KVFormat from a KVFormat or a name ('bf16', 'fp16', 'fp8_e4m3', 'fp8_ds_mla')."""
    if isinstance(value, KVFormat):
        return value
    if isinstance(value, str):
        try:
            return _C.parse_kv_format(value)
        except ValueError:
            raise ValueError(
                f"{name}: expected one of 'bf16', 'fp16', 'fp8_e4m3', 'fp8_ds_mla' or an openmla.KVFormat, "
                f"got {value!r}"
            ) from None
    raise TypeError(f"{name}: expected a str or an openmla.KVFormat, got {type(value).__name__}")


def kv_format_of(kv_cache: Any, kv_format: Any) -> KVFormat:
    """The explicit format, else the one the cache's dtype and row width imply."""
    if kv_format is None:
        return _C.infer_kv_format(kv_cache)
    return as_kv_format(kv_format)


def as_backend(value: Any) -> Backend:
    """Backend from a Backend or 'auto' / 'portable' / 'sm90'."""
    if isinstance(value, Backend):
        return value
    if isinstance(value, str) and value in ("auto", "portable", "sm90"):
        return Backend[value]
    raise ValueError(f"backend: expected 'auto', 'portable', 'sm90' or an openmla.Backend, got {value!r}")


def as_fp8_math(value: Any) -> Fp8Math:
    """Fp8Math from an Fp8Math or 'off' / 'qk_and_pv'."""
    if isinstance(value, Fp8Math):
        return value
    if isinstance(value, str) and value in ("off", "qk_and_pv"):
        return Fp8Math[value]
    raise ValueError(f"fp8_math: expected 'off', 'qk_and_pv' or an openmla.Fp8Math, got {value!r}")


_E4M3_OVERFLOWS = {"saturate": E4M3Overflow.saturate, "nan": E4M3Overflow.nan}


def as_e4m3_overflow(value: Any) -> E4M3Overflow:
    """E4M3Overflow from an E4M3Overflow or 'saturate' / 'nan'."""
    if type(value) is str:
        found = _E4M3_OVERFLOWS.get(value)
        if found is not None:
            return found
    elif isinstance(value, E4M3Overflow):
        return value
    raise ValueError(f"overflow: expected 'saturate', 'nan' or an openmla.E4M3Overflow, got {value!r}")


def is_tensor_scale(value: Any) -> bool:
    """Whether a kv_scale argument is a tensor (a device-held scale) rather than a number: any DLPack
    tensor, NumPy arrays included (NumPy scalars are numbers)."""
    return hasattr(type(value), "__dlpack__")


def as_query_layout(value: Any) -> QueryLayout:
    """QueryLayout from a QueryLayout or 'uniform' / 'ragged'."""
    if isinstance(value, QueryLayout):
        return value
    if isinstance(value, str) and value in ("uniform", "ragged"):
        return QueryLayout[value]
    raise ValueError(f"query_layout: expected 'uniform', 'ragged' or an openmla.QueryLayout, got {value!r}")


def as_tree_mask(value: Any) -> TreeMask:
    """TreeMask from a TreeMask or 'none' / 'shared' / 'per_request' / 'packed' (None: TreeMask.none)."""
    if value is None:
        return TreeMask.none
    if isinstance(value, TreeMask):
        return value
    if isinstance(value, str) and value in ("none", "shared", "per_request", "packed"):
        return TreeMask[value]
    raise ValueError(
        f"tree_mask: expected 'none', 'shared', 'per_request', 'packed' or an openmla.TreeMask, got {value!r}")


def as_float(value: Any, name: str) -> float:
    """float(value), or TypeError naming the argument."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name}: expected a float, got {type(value).__name__}") from None


# ---- frameworks ------------------------------------------------------------------------------

_torch_module: Any = None
_torch_checked = False
_torch_tensor: Any = None  # torch.Tensor once torch is imported
_torch_dtypes: Dict[DType, Any] = {}


def torch_or_none() -> Any:
    """The torch module if it can be imported, else None (checked once). The first successful
    import also registers OpenMLA's torch custom operators (openmla._torch_ops)."""
    global _torch_module, _torch_checked
    if not _torch_checked:
        _torch_checked = True
        try:
            import torch  # type: ignore[import-not-found,unused-ignore]  # noqa: PLC0415 (lazy: optional)
        except ImportError:
            return None
        _adopt_torch(torch)
    return _torch_module


def _adopt_torch(torch: Any) -> None:
    global _torch_module, _torch_checked, _torch_tensor
    _torch_checked = True
    _torch_module = torch
    _torch_tensor = torch.Tensor
    _torch_dtypes.update({
        DType.bfloat16: torch.bfloat16,
        DType.float16: torch.float16,
        DType.float32: torch.float32,
        DType.float64: torch.float64,
        DType.uint8: torch.uint8,
        DType.int32: torch.int32,
        DType.int64: torch.int64,
    })
    if hasattr(torch, "float8_e4m3fn"):
        _torch_dtypes[DType.float8_e4m3fn] = torch.float8_e4m3fn
    from . import _torch_ops  # noqa: PLC0415 (needs torch)

    _torch_ops.register()


def adopt_torch_if_imported() -> None:
    """Registers the torch operators now if the process has already imported torch (so that
    torch.compile finds them even when no OpenMLA call ran eagerly before tracing)."""
    torch = sys.modules.get("torch")
    if torch is not None and not _torch_checked and hasattr(torch, "Tensor"):
        _adopt_torch(torch)


def compiling() -> bool:
    """True while torch.compile (Dynamo) traces the caller: the GPU entry points then call their
    torch custom operator instead of the extension, so that the call lands in the graph."""
    return _torch_module is not None and _torch_module.compiler.is_compiling()


_exchange_types: Dict[type, bool] = {}


def reports_stream(x: Any) -> bool:
    """Whether the extension reads x's framework's current stream by itself (DLPack's C exchange
    API: PyTorch 2.10 and newer), so that stream=None can be passed down as None."""
    t = type(x)
    known = _exchange_types.get(t)
    if known is None:
        known = _exchange_types[t] = bool(_C.has_dlpack_exchange_api(t))
    return known


def stream_arg(stream: Any, like: Any) -> Optional[int]:
    """The `stream` for a native call: None where the extension resolves the default itself (the
    same stream resolve_stream would return), else resolve_stream(stream, like)."""
    if stream is None and reports_stream(like):
        return None
    return resolve_stream(stream, like)


def framework(x: Any) -> str:
    """'torch', 'cupy', 'jax', 'numpy' or the defining module's top-level name."""
    if isinstance(x, _C.Reinterpreted):
        x = x.tensor
    top = type(x).__module__.split(".", 1)[0]
    return "jax" if top == "jaxlib" else top


def empty_like(like: Any, shape: Sequence[int], dtype: DType, name: str) -> Any:
    """An uninitialised tensor of the framework and device of `like` (the argument the caller
    gave), for an output the caller did not pass as `name=`."""
    if type(like) is _torch_tensor:  # sizes as separate arguments: torch parses them faster than a tuple
        return _torch_module.empty(*shape, dtype=_torch_dtypes[dtype], device=like.device)
    if isinstance(like, _C.Reinterpreted):
        like = like.tensor
    fw = framework(like)
    shape = tuple(int(s) for s in shape)
    if fw == "torch":
        torch = torch_or_none()
        return torch.empty(shape, dtype=_torch_dtypes.get(dtype), device=like.device)
    if fw in ("cupy", "numpy"):
        np_name = _NUMPY_NAMES.get(dtype)
        if np_name is None:
            raise TypeError(f"{name}: {fw} has no {dtype.name} arrays; pass {name}= (e.g. a torch tensor)")
        if fw == "numpy":
            import numpy

            return numpy.empty(shape, dtype=np_name)
        import cupy  # type: ignore[import-not-found,unused-ignore]

        with cupy.cuda.Device(like.device.id):
            return cupy.empty(shape, dtype=np_name)
    raise TypeError(
        f"{name}: cannot allocate an output like a {type(like).__module__}.{type(like).__name__} "
        f"(JAX arrays are immutable); pass {name}= as a writable DLPack tensor (torch, CuPy)"
    )


# ---- streams ---------------------------------------------------------------------------------


def resolve_stream(stream: Any, like: Any = None) -> int:
    """cudaStream_t as an int. Explicit: an int, a torch.cuda.Stream or a cupy.cuda.Stream.
    Default: the current stream of the input's framework (CuPy for CuPy arrays), else PyTorch's
    current stream if torch can be imported, else 0 (the legacy default stream)."""
    if stream is not None:
        if isinstance(stream, int) and not isinstance(stream, bool):
            return stream
        for attr in ("cuda_stream", "ptr"):
            handle = getattr(stream, attr, None)
            if isinstance(handle, int):
                return handle
        raise TypeError(
            f"stream: expected an int (cudaStream_t), a torch.cuda.Stream or a cupy.cuda.Stream, "
            f"got {type(stream).__name__}"
        )
    fw = framework(like) if like is not None else None
    if fw == "cupy":
        import cupy  # type: ignore[import-not-found,unused-ignore]

        return int(cupy.cuda.get_current_stream().ptr)
    torch = torch_or_none()
    if torch is not None and torch.cuda.is_available():
        device = like.device if fw == "torch" and like.device.type == "cuda" else None
        return int(torch.cuda.current_stream(device).cuda_stream)
    return 0


def cuda_device_index(device: Any) -> int:
    """-1 (the current device) for None; an int; a torch.device / 'cuda:1' string."""
    if device is None:
        return -1
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    index = getattr(device, "index", None)
    kind = getattr(device, "type", None)
    if isinstance(device, str):
        kind, _, rest = device.partition(":")
        index = int(rest) if rest else None
    if kind != "cuda":
        raise ValueError(f"device: expected a CUDA device (an index, 'cuda:N' or a torch.device), got {device!r}")
    return -1 if index is None else int(index)
