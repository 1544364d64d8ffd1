"""Math modes: each precision's meaning (contract.MATH: TF32, autocast dtype, loss scaling) set in the framework and
read back from it.

One copy for the harness's backends and bench/yardstick.py. Standard library only; the framework module is passed in.
fp32 also sets NVIDIA_TF32_OVERRIDE=0 (cuBLAS and cuDNN honour it). TF32 is a GPU tensor-core mode: on a CPU the
flags are still set and read back, and the run is FP32.
"""

from __future__ import annotations

import contextlib
import os

from catalogue import ADVERSARIAL
from contract import MATH as MODES  # what each precision means: the contract's one table

PRECISIONS = tuple(MODES)
NVIDIA_OVERRIDE = "NVIDIA_TF32_OVERRIDE"  # "0": cuBLAS and cuDNN never use TF32, whatever the framework asks
TORCH_OVERRIDE = "TORCH_ALLOW_TF32_CUBLAS_OVERRIDE"  # torch: "1" forces TF32 matmuls over set_float32_matmul_precision
NAMES = {"float16": "AMP", "bfloat16": "BF16"}


def set_environment(precision: str, environ=os.environ) -> None:
    """Before the framework is imported (the CUDA libraries read these when they start). fp32: NVIDIA's override to
    0 and torch's forcing override removed; the TF32 modes: a 0 set outside is removed, so the switches decide."""
    if MODES[precision].tf32:
        if environ.get(NVIDIA_OVERRIDE) == "0":
            del environ[NVIDIA_OVERRIDE]
    else:
        environ[NVIDIA_OVERRIDE] = "0"
        environ.pop(TORCH_OVERRIDE, None)


def fallback_note(precision: str, device: str, framework: str, model: str = "") -> str | None:
    """Why the run is FP32 although `precision` asked for more (None: it runs as asked, or fp32 was asked).
    The autocast modes run without autocast wherever this gives a note."""
    mode = MODES[precision]
    if mode.autocast is None:
        return "TF32 is a GPU tensor-core mode: on a CPU the run is FP32" if mode.tf32 and device != "gpu" else None
    name = NAMES[mode.autocast]
    if model in ADVERSARIAL:
        return f"{name} requested but {model}'s two-optimizer step has no {name} path here: the run is FP32"
    if device == "gpu":
        return None
    if mode.autocast == "float16":
        return f"{name} requested but the device is a CPU: the run is FP32 (AMP needs a GPU)"
    if framework == "paddle":
        return (f"{name} requested but Paddle's auto_cast does nothing on a CPU (CUDA, XPU and custom devices "
                "only): the run is FP32")
    return None  # torch's CPU autocast runs BF16


# ---------------------------------------------------------------- PyTorch
def torch_set(torch, precision: str) -> None:
    """TF32 for matmuls (cuBLAS) and convolutions (cuDNN), set explicitly, not left to the defaults."""
    tf32 = MODES[precision].tf32
    torch.set_float32_matmul_precision("high" if tf32 else "highest")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def torch_autocast(torch, device_type: str, dtype: str | None):
    """The autocast context for `dtype` (None: a context that does nothing)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type, dtype=getattr(torch, dtype))


def torch_math(torch, device_type: str, dtype: str | None, loss_scaling: bool) -> dict:
    """The math flags read back from torch (autocast: read inside the context the run uses)."""
    with torch_autocast(torch, device_type, dtype):
        on = torch.is_autocast_enabled(device_type)
        ran = str(torch.get_autocast_dtype(device_type)).removeprefix("torch.") if on else None
    return {"tf32_matmul": torch.backends.cuda.matmul.allow_tf32, "tf32_conv": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(), "autocast": ran,
            "loss_scaling": loss_scaling, NVIDIA_OVERRIDE: os.environ.get(NVIDIA_OVERRIDE),
            TORCH_OVERRIDE: os.environ.get(TORCH_OVERRIDE)}


def torch_bf16_supported(torch) -> bool:
    try:
        return torch.cuda.is_bf16_supported(including_emulation=False)
    except TypeError:  # older torch: no emulation argument
        return torch.cuda.is_bf16_supported()


# ---------------------------------------------------------------- Paddle (3.x here; 2.5 and 2.6 in the GPU images)
def _paddle_internals(paddle):
    """(core, framework): paddle.base since 2.6, paddle.fluid before."""
    try:
        from paddle.base import core, framework
    except ImportError:
        from paddle.fluid import core, framework
    return core, framework


def paddle_set(paddle, precision: str) -> None:
    """Paddle's process-wide TF32 switches (cuBLAS, cuDNN; both on by default on CUDA builds; Paddle has no FLAGS_
    for them). A build without them (no CUDA) has no TF32 to set."""
    core, _ = _paddle_internals(paddle)
    tf32 = MODES[precision].tf32
    for name in ("set_cublas_switch", "set_cudnn_switch"):
        if hasattr(core, name):
            getattr(core, name)(tf32)


def paddle_autocast(paddle, dtype: str | None):
    if dtype is None:
        return contextlib.nullcontext()
    return paddle.amp.auto_cast(level="O1", dtype=dtype)


def _paddle_autocast_dtype(paddle) -> str | None:
    """The autocast dtype in force now, None when autocast is off."""
    if hasattr(paddle.amp, "is_autocast_enabled"):
        on = paddle.amp.is_autocast_enabled()
        return str(paddle.amp.get_autocast_dtype()).removeprefix("paddle.") if on else None
    core, framework = _paddle_internals(paddle)  # older Paddle: the dygraph tracer's AMP state
    tracer = framework._dygraph_tracer()
    on = tracer is not None and tracer._amp_level != core.AmpLevel.O0
    return str(tracer._amp_dtype) if on else None


def paddle_math(paddle, dtype: str | None, loss_scaling: bool) -> dict:
    core, _ = _paddle_internals(paddle)
    with paddle_autocast(paddle, dtype):
        ran = _paddle_autocast_dtype(paddle)
    switch = {key: getattr(core, name)() if hasattr(core, name) else None
              for key, name in (("tf32_matmul", "get_cublas_switch"), ("tf32_conv", "get_cudnn_switch"))}
    return {**switch, "autocast": ran, "loss_scaling": loss_scaling, NVIDIA_OVERRIDE: os.environ.get(NVIDIA_OVERRIDE)}


def paddle_bf16_supported(paddle) -> bool:
    if hasattr(paddle.amp, "is_bfloat16_supported"):
        return paddle.amp.is_bfloat16_supported()
    return paddle.device.cuda.get_device_capability()[0] >= 8  # Ampere and later
