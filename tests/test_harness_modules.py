"""scripts/harness as modules: each under 500 lines, no import circle among them, and one training step per
framework (the Trainer's; the backends keep none of their own). Which modules may import which framework:
tests/test_harness_models.py."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HARNESS = REPO / "scripts" / "harness"
MODULES = {p.stem: p for p in HARNESS.glob("*.py")}


def imports(path: Path) -> set[str]:
    """Top-level names of every import in PATH, function-level ones included."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            roots.add((node.module or "").split(".")[0])
    return roots


def test_no_file_in_scripts_is_over_500_lines():
    long = {str(p.relative_to(REPO)): n for p in (REPO / "scripts").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > 500}
    assert not long, long


def test_the_harness_modules_import_no_circle():
    graph = {name: imports(path) & set(MODULES) for name, path in MODULES.items()}
    done: set[str] = set()

    def visit(name: str, path: tuple[str, ...]) -> None:
        assert name not in path, " -> ".join((*path, name))
        if name in done:
            return
        for other in sorted(graph[name]):
            visit(other, (*path, name))
        done.add(name)

    for name in sorted(graph):
        visit(name, ())


def test_one_step_per_framework():
    """The backends keep no optimizer or step of their own: the timed loop's launch_step is the Trainer's."""
    for name in ("backend", "backend_torch", "backend_paddle"):
        text = MODULES[name].read_text()
        for word in ("torch.optim", "paddle.optimizer", ".backward(", "zero_grad(", "clear_grad("):
            assert word not in text, (name, word)
