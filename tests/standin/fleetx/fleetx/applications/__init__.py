"""STAND-IN for fleetx.applications (tests only): as the real package, the model module (VGG16) and the trainer."""

from fleetx.applications.model import *  # noqa: F403
from fleetx.applications.trainer import MultiGPUTrainer

__all__ = ["VGG16", "Loader", "MultiGPUTrainer"]  # noqa: F405
