"""The inherited environment variables that change what a run runs (the interpreter's paths, preloaded libraries,
the CUDA, NCCL, threading and frameworks' switches): run.json keeps them, secrets redacted, and the report lists
them, so that a figure is never read without the settings it ran under.

    run_environment({"PYTHONPATH": "/x", "HOME": "/root", "NCCL_TOKEN": "s"})
    # {"NCCL_TOKEN": "<redacted>", "PYTHONPATH": "/x"}
"""

from __future__ import annotations

import os

from kit.core.secrets import redact

NAMES = ("PYTHONPATH", "PYTHONHOME", "LD_PRELOAD", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")
PREFIXES = ("CUDA_", "NCCL_", "OMP_", "MKL_", "KMP_", "NVIDIA_", "TORCH_", "PYTORCH_", "FLAGS_", "PADDLE_",
            "XLA_", "TF_", "CUBLAS_", "CUDNN_", "DALI_", "GLOO_", "UCX_", "OPENBLAS_")


def run_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The variables of ENVIRON (default: this process's) that change what runs, by name, secrets redacted."""
    environ = os.environ if environ is None else environ
    return redact({k: v for k, v in sorted(environ.items()) if k in NAMES or k.startswith(PREFIXES)})
