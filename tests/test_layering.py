"""The pure stages import no remote or container libraries (DESIGN.md layering)."""

from __future__ import annotations

import json
import subprocess
import sys

PURE = ["kit.parsers", "kit.stats", "kit.extract", "kit.layout", "kit.report", "kit.crosscheck"]
FORBIDDEN = ("fabric", "invoke", "paramiko", "docker")


def test_pure_modules_import_no_fabric_or_docker():
    probe = (
        "import importlib, json, sys\n"
        f"for name in {PURE!r}: importlib.import_module(name)\n"
        "print(json.dumps(sorted(m.split('.')[0] for m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    loaded = set(json.loads(out))
    assert loaded.isdisjoint(FORBIDDEN), loaded & set(FORBIDDEN)
    assert "kit" in loaded
