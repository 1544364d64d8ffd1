"""The layering (README "Architecture"): packages import only packages below them, and the pure stages
import no remote, container or process libraries."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT / "kit"
# bottom to top: a module may import its own package and those before it
ORDER = ["core", "results", "config", "hosts", "images", "run", "audit", "cli", "tasks"]
PURE = [
    "kit.results", "kit.results.parsers", "kit.results.stats", "kit.results.extract", "kit.results.report",
    "kit.results.sections", "kit.results.crosscheck", "kit.results.compare", "kit.core.layout",
    "kit.config.suites", "kit.config.hosts", "kit.config.programs", "kit.hosts.capture", "kit.hosts.consistency",
    "kit.run.command", "kit.run.reference", "kit.images.spec", "kit.audit.evidence", "kit.audit.rules",
    "kit.audit.sysdesc",
]
FORBIDDEN = ("fabric", "invoke", "paramiko", "docker")
NO_PROCESSES = ["kit/results", "kit/audit/rules", "kit/run/command.py", "kit/run/reference.py", "kit/images/spec.py",
                "kit/hosts/capture", "kit/hosts/consistency.py", "kit/config"]


def _imports(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.lineno, node.module))
            if node.module == "kit":  # from kit import x: x is a package or a name of kit/__init__.py
                out += [(node.lineno, f"kit.{a.name}") for a in node.names if (KIT / a.name).exists()]
    return out


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "kit" or len(parts) == 1:
        return None  # another library, or kit/__init__.py (the version and REPO_ROOT: below everything)
    return ORDER.index(parts[1]) if parts[1] in ORDER else None


def test_every_module_lives_in_a_layer():
    stray = [p.name for p in KIT.glob("*.py") if p.stem not in ("__init__", "__main__", "tasks")]
    assert not stray, f"modules outside the packages: {stray}"
    assert sorted(p.name for p in KIT.iterdir() if (p / "__init__.py").is_file()) == sorted(ORDER[:-1])


def test_no_package_imports_one_above_it():
    wrong = []
    for path in sorted(KIT.rglob("*.py")):
        rel = path.relative_to(KIT)
        own = _layer("kit." + ".".join(rel.with_suffix("").parts))
        if own is None:
            continue
        for line, module in _imports(path):
            other = _layer(module)
            if other is not None and other > own:
                wrong.append(f"kit/{rel}:{line} imports {module} ({ORDER[own]} < {ORDER[other]})")
    assert not wrong, "\n".join(wrong)


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


def test_pure_stages_start_no_processes():
    files = [p for entry in NO_PROCESSES for p in ((ROOT / entry).rglob("*.py") if (ROOT / entry).is_dir()
                                                    else [ROOT / entry])]
    assert len(files) > 20
    for path in files:
        bad = [f"{path.relative_to(ROOT)}:{line}" for line, m in _imports(path)
               if m.split(".")[0] in ("subprocess", "socket", *FORBIDDEN)]
        assert not bad, bad


def test_what_runs_on_hosts_never_imports_the_kit():
    files = sorted((ROOT / "scripts").rglob("*.py")) + sorted((ROOT / "data_prep").glob("*.py"))
    assert any(p.name == "train.py" for p in files)
    for path in files:
        for line, name in _imports(path):
            assert not (name == "kit" or name.startswith("kit.")), f"{path}:{line}"
