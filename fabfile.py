"""Fabric entry point: `fab --list`. Thin by design — the tasks live in kit/tasks.py."""

from kit import tasks as _tasks
from kit.tasks import *  # noqa: F403

__all__ = list(_tasks.__all__)
