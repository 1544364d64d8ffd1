"""The layering (docs/architecture.md): packages import only packages below them, audit imports nothing of run
(it judges a run from its files, with the recipes and composer run uses from the layers below both), no module
imports itself through others, and the pure stages import no remote, container or process libraries."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KIT = ROOT / "kit"
# bottom to top: a module may import its own package and those before it
ORDER = ["core", "telemetry", "results", "config", "hosts", "images", "run", "audit", "cli", "tasks"]
PURE = [
    "kit.results", "kit.results.parsers", "kit.results.stats", "kit.results.extract", "kit.results.report",
    "kit.results.sections", "kit.results.crosscheck", "kit.results.compare", "kit.results.compose",
    "kit.results.program_ratio", "kit.core.layout", "kit.core.secrets",
    "kit.config.suites", "kit.config.case_keys", "kit.config.cases", "kit.config.case_entries", "kit.config.hosts",
    "kit.config.inventory", "kit.config.host_values", "kit.config.programs", "kit.hosts.capture",
    "kit.hosts.consistency",
    "kit.run.command", "kit.config.reference", "kit.images.spec", "kit.audit.evidence", "kit.audit.rules",
    "kit.audit.sysdesc", "kit.telemetry", "kit.results.gpu_telemetry", "kit.results.plotting",
]
FORBIDDEN = ("fabric", "invoke", "paramiko", "docker")
NO_PROCESSES = ["kit/results", "kit/telemetry", "kit/audit/rules", "kit/run/command.py", "kit/images/spec.py",
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


def test_audit_imports_nothing_of_run():
    """kit verify judges a run from its files alone: what it shares with the runs (the programs' recipes, the report
    composer, the kit's revision) lives below both (kit.config.reference, kit.results.compose, kit.core)."""
    wrong = [f"{path.relative_to(ROOT)}:{line} imports {module}" for path in sorted((KIT / "audit").rglob("*.py"))
             for line, module in _imports(path) if module == "kit.run" or module.startswith("kit.run.")]
    assert not wrong, "\n".join(wrong)


def _module_of(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _import_graph() -> dict[str, dict[str, int]]:
    """module -> {kit module it imports: line}, from every import statement of the kit's files: at module level and
    inside functions alike (a function-local import closes a circle as soon as the function runs), but not those
    under `if TYPE_CHECKING:` (annotations only; never executed). `from a.b import c` names the module a.b.c where
    there is one, else a.b. A package's own __init__ run before its submodules is not an edge of its own: that is how
    Python imports any submodule, not a choice of the code."""
    modules = {_module_of(p): p for p in KIT.rglob("*.py")}
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = {id(n) for node in ast.walk(tree) if isinstance(node, ast.If)
                and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
                for stmt in node.body for n in ast.walk(stmt)}
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = graph.setdefault(name, {})
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join([*package.split(".")[:len(package.split(".")) - node.level + 1], *filter(None, [base])])
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.setdefault(target, node.lineno)
    return graph


def test_no_module_imports_itself_through_others():
    graph = _import_graph()
    assert {"kit.run.bench", "kit.audit.bundle", "kit.audit.rules.predicates"} <= set(graph)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []
    circles: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        path.append(module)
        for other, line in sorted(graph[module].items()):
            if state.get(other) == 1:
                circle = path[path.index(other):] + [other]
                circles.append(" -> ".join(circle) + f" (last edge: {module} line {line})")
            elif other not in state:
                visit(other)
        path.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert not circles, "\n".join(circles)


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


# the run directory's records: each read (and written) by kit/core/rundir.py alone; the audit reads a bundle's copies
# through its evidence, rule by rule, whatever shape a hostile one has (kit/audit/: exempt)
RECORD_NAMES = ("run.json", "results.json", "capture.json", ".cmd.json", "RUN_JSON", "RESULTS_JSON", "CAPTURE_JSON",
                "SIDECAR_SUFFIX", "sidecar_name", "run_meta_path", "results_path", "capture_path")
READS = ("read_bytes", "read_text", "open", "read_json_object", "read_input", "parse_json", "load_yaml", "loads")
RECORD_READERS = ("kit/core/rundir.py", "kit/audit/")


def test_no_module_but_rundir_opens_a_run_record_itself():
    """A read (open, read_bytes, read_text, read_json_object, ...) whose argument or receiver names run.json,
    results.json, a capture or a command record is rundir's; elsewhere it is a second reader of one record."""
    found = []
    for path in sorted(KIT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(RECORD_READERS):
            continue
        tree = ast.parse(path.read_text(), rel)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name not in READS:
                continue
            said = ast.unparse(node)
            if any(n in said for n in RECORD_NAMES):
                found.append(f"{rel}:{node.lineno}: {said[:100]}")
    assert not found, "\n".join(found)
