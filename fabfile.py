"""Fabric entry point: `fab --list`. Thin by design — the tasks live in kit/tasks.py.

Task names keep their underscores, as the docs and the seeds spell them
(`fab -H node1,node2 run_multinode`, `fab -H node1,node2 check_env`).
"""

import sys

from kit import tasks as _tasks
from kit.tasks import *  # noqa: F403

__all__ = list(_tasks.__all__)

_program = getattr(sys.modules.get("fabric.main"), "program", None)
if _program is not None and getattr(_program, "config", None) is not None:
    _program.config.tasks.auto_dash_names = False  # read right after this module is imported
