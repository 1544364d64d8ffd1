"""Every module NVIDIA DeepLearningExamples' ResNet50 programs import when they start (issue 58), read with `ast` from
the archive at the kit's pin (never imported or run): the entry script's module-level imports and, transitively, those
of the program's own modules it imports at module level, `from X import a, b` with its names. Each must be

(a) a module of the program's own tree (the entry script's folder is sys.path[0]), or
(b) the standard library, or
(c) in the program's image: the NGC base its Dockerfile names plus its requirements.txt (IMAGE below; the kit's
    ngc-* images are those bases, docker/pins.yaml), or staged by the kit (Impl.packages: dllogger for PyTorch), and
(d) where the kit declares a placeholder for it (Impl.placeholders: what a NATIVE host lacks, DALI and Horovod), the
    placeholder provides it: a clean Python with only scripts/reference/placeholders on its path imports the module
    and finds every name the program takes from it, and every attribute it calls on it.

A NATIVE run gets (d) for DALI and Horovod and needs the rest of (c) installed; an NGC image run has (c) and the
launcher leaves the placeholders off (scripts/reference/launch.py imports the module with the program's Python first).
An import inside try/except ImportError counts only when a name it binds is used at load time (DLE PyTorch's
`class HybridTrainPipe(Pipeline)`); DLE TensorFlow imports Horovod inside utils/hvd_wrapper.py init(), which main.py
calls at start (hvd.init(True)): Start.lazy lists such imports, each checked to be where it says."""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from test_program_contracts import code_root  # noqa: F401 (the archives, sha256-checked)

from kit.config.programs import IMPLS
from kit.run.command import SCRIPTS

PLACEHOLDERS = SCRIPTS / "reference" / "placeholders"
_spec = importlib.util.spec_from_file_location("kit_launch", SCRIPTS / "reference" / "launch.py")
LAUNCH = importlib.util.module_from_spec(_spec)  # the launcher's own choice of placeholder folder a module
_spec.loader.exec_module(LAUNCH)
OPTIONAL = {"ImportError", "ModuleNotFoundError", "Exception"}


@dataclass(frozen=True)
class Start:
    key: tuple[str, str]  # kit.config.programs IMPLS key: (framework, model)
    entries: tuple[str, ...]  # the Python files that run at start, in the program's folder
    image: frozenset[str]  # top-level modules its image installs
    lazy: tuple[tuple[str, str, str], ...] = ()  # (file, module, why): imported in a function the start path calls


# NGC bases from each Dockerfile (pytorch:21.03-py3, tensorflow:20.12-tf1-py3, mxnet:20.12-py3: the framework, numpy,
# DALI, and Horovod in the TF/MXNet ones) and each requirements.txt (dllogger; PyTorch's pynvml, TF's mpi4py)
PROGRAMS = {
    "pytorch": Start(("torch", "resnet50"), ("multiproc.py", "main.py"),
                     frozenset({"torch", "torchvision", "numpy", "PIL", "nvidia", "pynvml", "dllogger"})),
    "tensorflow": Start(("tensorflow", "resnet50"), ("main.py",),
                        frozenset({"tensorflow", "numpy", "horovod", "nvidia", "dllogger", "mpi4py"}),
                        (("utils/hvd_wrapper.py", "horovod.tensorflow", "main.py: hvd.init(True)"),)),
    # benchmark.py starts ./runner (a Python script without .py), which starts train.py
    "mxnet": Start(("mxnet", "resnet50"), ("benchmark.py", "runner", "train.py"),
                   frozenset({"mxnet", "numpy", "horovod", "nvidia", "dllogger", "packaging"})),
}


@dataclass
class Use:
    module: str
    where: str  # file:line
    names: set[str] = field(default_factory=set)  # from module import names
    attrs: set[str] = field(default_factory=set)  # alias.attr anywhere in the importing file


def load_time_names(tree: ast.Module) -> set[str]:
    """Names read when the module loads: everything outside function bodies (class bases and bodies included)."""
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            out.add(node.id)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


def attrs_of(tree: ast.Module, alias: str) -> set[str]:
    """Every attribute chain the file reads on a name: `dali.pipeline.Pipeline` -> pipeline, pipeline.Pipeline."""
    out = set()
    for node in ast.walk(tree):
        chain = []
        while isinstance(node, ast.Attribute):
            chain.insert(0, node.attr)
            node = node.value
        if chain and isinstance(node, ast.Name) and node.id == alias:
            out.add(".".join(chain))
    return out


def module_imports(tree: ast.Module) -> list[tuple[ast.Import | ast.ImportFrom, ast.Try | None]]:
    """(import statement, guard) at module level, into if/try blocks; guard: the try/except ImportError it is in."""
    out: list[tuple[ast.Import | ast.ImportFrom, ast.Try | None]] = []

    def walk(body: list[ast.stmt], optional: ast.Try | None) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                out.append((node, optional))
            elif isinstance(node, ast.If):
                walk(node.body, optional)
                walk(node.orelse, optional)
            elif isinstance(node, ast.Try):
                guarded = any(h.type is None or any(isinstance(n, ast.Name) and n.id in OPTIONAL
                                                    for n in ast.walk(h.type)) for h in node.handlers)
                walk(node.body, optional or (node if guarded else None))
                walk(node.orelse + node.finalbody, optional)

    walk(tree.body, None)
    return out


def own_file(top: Path, here: Path, module: str, level: int) -> Path | None:
    base = top if level == 0 else here.parents[level - 1]
    target = base.joinpath(*module.split(".")) if module else base
    for cand in (target.with_suffix(".py"), target / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def start_imports(top: Path, entries: tuple[str, ...]) -> list[Use]:
    """Every module outside the program's tree that its start path imports, with where and what."""
    uses: list[Use] = []
    todo, seen = [top / e for e in entries], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        tree = ast.parse(path.read_text(), str(path))
        read = load_time_names(tree)
        found_imports = module_imports(tree)
        # a guarded block counts when a name any of its imports binds is read at load: one failing skips the rest
        binds_of: dict[int, set[str]] = {}
        for node, guard in found_imports:
            if guard is not None:
                binds_of.setdefault(id(guard), set()).update(a.asname or a.name.split(".")[0] for a in node.names)
        for node, guard in found_imports:
            if guard is not None and not read & binds_of[id(guard)]:
                continue  # guarded and unused at load: the program starts without it
            where = f"{path.relative_to(top)}:{node.lineno}"
            if isinstance(node, ast.Import):
                # `import a.b as c` calls c.x; `import a` calls a.x; `import a.b` binds only a
                pairs = [(a.name, a.asname or ("." not in a.name and a.name), None) for a in node.names]
            else:
                pairs = [(node.module or "", None, node)]
            for module, alias, frm in pairs:
                names = [a.name for a in frm.names] if frm else []
                level = frm.level if frm else 0
                found = own_file(top, path, module, level)
                if found or level:
                    assert found, f"{where}: relative import {'.' * level}{module} not in the program's tree"
                    todo.append(found)
                    todo += [f for n in names if (f := own_file(top, path, f"{module}.{n}".strip("."), level))]
                    continue
                subs = [f for n in names if (f := own_file(top, path, f"{module}.{n}", 0))]
                todo += subs
                use = Use(module, where, {n for n in names if n != "*"} if not subs else set(),
                          attrs_of(tree, alias) if alias else set())
                uses.append(use)
                # `from nvidia import dali` then dali.pipeline.Pipeline: the chains on a name taken from a module
                uses += [Use(f"{module}.{a.name}", where, set(), chains) for a in (frm.names if frm else [])
                         if (chains := attrs_of(tree, a.asname or a.name))]
    return uses


def lazy_imports(top: Path, start: Start) -> list[Use]:
    """The imports the start path makes inside a function (Start.lazy), each checked to be in its file; the attributes
    the program calls on the module through its wrapper (hvd_global_object.X) counted as used."""
    out = []
    for rel, module, _why in start.lazy:
        tree = ast.parse((top / rel).read_text())
        [node] = [n for n in ast.walk(tree) if isinstance(n, ast.Import) and any(a.name == module for a in n.names)]
        alias = next(a.asname or a.name for a in node.names if a.name == module)
        attrs = attrs_of(tree, alias)
        for path in top.rglob("*.py"):
            attrs |= {n.attr for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Attribute)
                      and isinstance(n.value, ast.Attribute) and n.value.attr == "hvd_global_object"}
        out.append(Use(module, f"{rel}:{node.lineno}", set(), attrs))
    return out


def stdlib(module: str) -> bool:
    return module.split(".")[0] in sys.stdlib_module_names


PROBE = """\
import importlib, json, sys
missing = []
for module, names in json.loads(sys.argv[1]):
    try:
        mod = importlib.import_module(module)
    except Exception as exc:
        missing.append([module, f"{type(exc).__name__}: {exc}"])
        continue
    for name in names:
        if "__" in name:
            continue  # the placeholders answer no dunder: a program probing __version__ sees no DALI
        try:
            obj = mod
            for i, part in enumerate(name.split(".")):
                if not hasattr(obj, part) and obj is mod and i == 0:
                    try:
                        importlib.import_module(f"{module}.{part}")  # a submodule not loaded by its package
                    except ImportError:
                        raise AttributeError(f"{module} has no {part!r}, nor a submodule of that name") from None
                obj = getattr(obj, part)
        except Exception as exc:
            missing.append([module, f"{name}: {type(exc).__name__}: {exc}"])
print(json.dumps(missing))
"""


def placeholder_misses(uses: list[Use]) -> list[str]:
    """What a clean Python with only the placeholders on its path cannot import, as the program takes it."""
    asks = [(u.module, sorted(u.names | u.attrs)) for u in uses]
    roots = sorted({str(root) for u in uses if (root := LAUNCH.placeholder_root(u.module)) is not None})
    done = subprocess.run([sys.executable, "-I", "-S", "-c", f"import sys; sys.path[:0] = {roots!r}\n"
                           + PROBE, json.dumps(asks)], capture_output=True, text=True, cwd=PLACEHOLDERS, timeout=60)
    assert done.returncode == 0, done.stderr
    where = {u.module: u.where for u in uses}
    return [f"{where[module]} {module}: {why}" for module, why in json.loads(done.stdout)]


def covers(placeholder: str, module: str) -> bool:
    """A declared placeholder `horovod.tensorflow` stands for its package's modules as the program imports them."""
    return module.split(".")[0] == placeholder.split(".")[0]


@pytest.mark.parametrize("framework", sorted(PROGRAMS))
def test_start_imports_are_installed_or_placeheld(framework: str, code_root: Path) -> None:  # noqa: F811
    start = PROGRAMS[framework]
    impl = IMPLS[start.key]
    top = code_root / impl.checkout / impl.subdir
    uses = start_imports(top, start.entries) + lazy_imports(top, start)
    staged = {p.folder for p in impl.packages}
    unknown = [f"{u.where} {u.module}" for u in uses if not stdlib(u.module)
               and u.module.split(".")[0] not in start.image | staged]
    assert not unknown, f"{framework}: imported at start, neither in its image nor staged: {unknown}"
    held = [u for u in uses if any(covers(p, u.module) for p in impl.placeholders)]
    needs = {u.module.split(".")[0] for u in uses} & {"nvidia", "horovod"}
    assert needs <= {p.split(".")[0] for p in impl.placeholders}, \
        f"{framework}: a native host lacks {sorted(needs)}; the kit declares placeholders {impl.placeholders}"
    misses = placeholder_misses(held)
    assert not misses, f"{framework}: the placeholders lack what the program imports at start: {misses}"


def test_the_start_path_is_read(code_root: Path) -> None:  # noqa: F811
    """The collector follows the programs' own modules: what the issue found is among what it reads."""
    found = {fw: {u.module for u in start_imports(code_root / IMPLS[s.key].checkout / IMPLS[s.key].subdir, s.entries)}
             for fw, s in PROGRAMS.items()}
    assert {"nvidia.dali.plugin.mxnet", "horovod.mxnet", "nvidia.dali.pipeline"} <= found["mxnet"]
    assert {"nvidia.dali.plugin.tf", "nvidia", "tensorflow"} <= found["tensorflow"]
    assert {"nvidia.dali.pipeline", "nvidia.dali.plugin.pytorch"} <= found["pytorch"]
    assert "pytorch_quantization" not in found["pytorch"]  # guarded, unused at load


def test_one_rank_horovod_is_exact() -> None:
    """init does nothing, one rank of one, and a reduction or broadcast over one rank returns its input."""
    done = subprocess.run([sys.executable, "-I", "-S", "-c", f"import sys; sys.path.insert(0, {str(LAUNCH.placeholder_root('horovod'))!r})\n"
                           "import horovod.tensorflow as t, horovod.mxnet as m\n"
                           "for h in (t, m):\n"
                           "    h.init(); x = object()\n"
                           "    assert (h.size(), h.rank(), h.local_rank(), h.local_size()) == (1, 0, 0, 1)\n"
                           "    assert h.allreduce(x) is x and h.broadcast(x, 0) is x\n"
                           "opt = object(); assert t.DistributedOptimizer(opt) is opt\n"
                           "assert m.broadcast_parameters({}, root_rank=0) is None\n"
                           "try:\n    t.BroadcastGlobalVariablesHook(0)\nexcept RuntimeError as e:\n"
                           "    assert 'pip install horovod' in str(e)\nelse:\n    raise SystemExit('no error')"],
                          capture_output=True, text=True, cwd=PLACEHOLDERS, timeout=60)
    assert done.returncode == 0, done.stderr
