"""The kit's import placeholder for NVIDIA DALI (scripts/reference/placeholders/README.md): names to import, nothing
to run."""


class DALIAbsent(RuntimeError):
    pass


def absent(name: str):
    """A class that stops the program with a clear error when it is built or called."""

    def refuse(*_args, **_kwargs):
        raise DALIAbsent(f"nvidia.dali.{name}: NVIDIA DALI is not installed on this host; the kit's import "
                         "placeholder (scripts/reference/placeholders) let the program load, but a DALI data backend "
                         "needs DALI itself (pip install nvidia-dali-cuda120 or -cuda130)")

    return type(name, (), {"__init__": refuse, "__call__": refuse})


def module_getattr(prefix: str):
    def getattr_(name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return absent(f"{prefix}{name}")

    return getattr_


# as the real package does, the submodules load with it: `dali.pipeline.Pipeline` after `from nvidia import
# dali` (DLE TensorFlow's utils/dali_utils.py); module __getattr__ would otherwise answer a class for them
from nvidia.dali import ops, pipeline, plugin, tfrecord, types  # noqa: E402, F401

__getattr__ = module_getattr("")
