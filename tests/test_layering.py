"""The pure stages import no remote or container libraries (DESIGN.md layering)."""

from __future__ import annotations

import json
import subprocess
import sys

PURE = [
    "kit.results.parsers", "kit.results.stats", "kit.results.extract", "kit.core.layout", "kit.results.report",
    "kit.results.crosscheck", "kit.config.suites", "kit.run.command", "kit.config.hosts", "kit.hosts.capture",
    "kit.results.compare", "kit.audit.evidence", "kit.audit.rules", "kit.audit.sysdesc", "kit.run.reference",
]
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


def test_what_runs_on_hosts_never_imports_the_kit():
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    files = sorted((root / "scripts").rglob("*.py")) + sorted((root / "data_prep").glob("*.py"))
    assert any(p.name == "train.py" for p in files)
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not [n for n in names if n == "kit" or n.startswith("kit.")], f"{path}:{node.lineno}"
