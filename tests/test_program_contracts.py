"""The kit's launchers checked against the published programs' own code at the kit's pins (issue 58): the archives
in ../shared/programs/ (programs.yaml: sha256 and commit of each) are unpacked, their argparse calls and YAML configs
read (never imported or run), and every command the kit's suites build for a program (kit.config.reference, each
rank, with and without a data root) must parse with the program's own parser: every flag, every `-o` key, the script.
The kit's own drivers (PLSC's train.py, FleetX's vgg16_benchmark.py) are checked for what they call in the program's
package; the data the kit stages (data_prep) for the layouts the programs read."""

from __future__ import annotations

import argparse
import ast
import hashlib
import importlib.util
import io
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import types
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SHARED

from kit.config import reference
from kit.config.reference import Cluster, RefCommand
from kit.config.suites import available, load_suite
from kit.core.catalogue import load
from kit.images.spec import current_pins
from kit.results.parsers import ParseError, parse_text

saved_programs = load("saved_programs", "reference")

PROGRAMS = SHARED / "programs"
SCRIPTS = REPO / "scripts"
DATA_ROOT = "/data"  # a host's data root: the program reads <root>/<format>/ (reference.data_path)


# -- the archives -----------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def code_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every archive unpacked side by side, as a host's model-code root holds the checkouts; each archive's sha256
    checked against programs.yaml first."""
    listing = PROGRAMS / "programs.yaml"
    assert listing.is_file(), f"missing: {listing} (put shared/ beside the repo or set KIT_SHARED)"
    root = tmp_path_factory.mktemp("model_code")
    for entry in yaml.safe_load(listing.read_text()):
        archive = PROGRAMS / entry["archive"]
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        assert digest == entry["sha256"], f"{archive.name}: sha256 {digest}, programs.yaml says {entry['sha256']}"
        with tarfile.open(archive) as tar:
            tar.extractall(root, filter="data")
        assert (root / entry["name"]).is_dir(), f"{archive.name} does not unpack to {entry['name']}/"
    return root


# -- the commands the kit builds ----------------------------------------------------------------------------------------

def suite_jobs(framework: str, model: str) -> list[reference.RefJob]:
    """Every distinct job of the built-in suites' reference cases for one program."""
    jobs = {case.ref_job() for name in available() for case in load_suite(name).cases
            if case.impl == "reference" and (case.framework, case.model) == (framework, model)}
    assert jobs, f"no built-in suite runs {framework}/{model} as a reference case"
    return sorted(jobs, key=repr)


def kit_commands(framework: str, model: str, code_root: Path) -> Iterator[tuple[str, RefCommand]]:
    """(what, command) for each suite job, each rank of its nodes, with and without a data root: as kit.run.command
    builds them (reference.build, reference.data_path), with the unpacked archives as the model-code root."""
    for job in suite_jobs(framework, model):
        hosts = tuple(f"10.0.0.{i + 1}" for i in range(job.nodes))
        for rank in range(job.nodes):
            for data_root in (None, DATA_ROOT):
                cmd = reference.build(job, Cluster(rank, hosts), code_root=str(code_root),
                                      data_dir=reference.data_path(data_root, job), scripts_dir=str(SCRIPTS))
                if cmd.argv:
                    yield f"{job} rank {rank} data root {data_root}: {cmd.shell()}", cmd


def script_at(argv: list[str]) -> int:
    """Where the program's script is in argv (after python, a launcher and the launcher's flags)."""
    found = [i for i, a in enumerate(argv) if a.endswith(".py") and not a.startswith("-")]
    assert found, f"no script in {argv}"
    return found[0]


# -- the programs' parsers, rebuilt from their source -----------------------------------------------------------------

class ArgvError(Exception):
    pass


class Rebuilt(argparse.ArgumentParser):
    def error(self, message: str):  # type: ignore[override]
        raise ArgvError(message)


def module_constants(paths: list[Path]) -> dict[str, object]:
    """Module-level NAME = <literal> of the files (a choices=NAME list)."""
    found: dict[str, object] = {}
    for path in paths:
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    found[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    pass
    return found


def add_argument_calls(path: Path, functions: tuple[str, ...] = ()) -> list[ast.Call]:
    """The add_argument calls of a file, or of its functions (methods too) of those names."""
    tree = ast.parse(path.read_text())
    scopes = [tree] if not functions else [n for n in ast.walk(tree)
                                           if isinstance(n, ast.FunctionDef) and n.name in functions]
    assert scopes, f"{path}: no function {functions}"
    calls = [n for scope in scopes for n in ast.walk(scope)
             if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "add_argument"]
    assert calls, f"{path} {functions}: no add_argument call"
    return calls


def rebuilt_parser(sources: list[tuple[Path, tuple[str, ...]]], constants: dict[str, object] | None = None,
                   required: bool = True) -> Rebuilt:
    """An argparse parser with the options of the programs' add_argument calls: names, action, nargs, dest, const,
    literal choices and defaults, builtin types as written (others parse as strings). required=False: a parser whose required
    options another stage of the program supplies (MXNet's runner -> train.py)."""
    constants = constants or {}
    parser = Rebuilt(add_help=False)
    for path, functions in sources:
        for call in add_argument_calls(path, functions):
            where = f"{path.name}:{call.lineno}"
            names = [ast.literal_eval(a) for a in call.args]
            assert all(isinstance(n, str) for n in names), f"{where}: names {names}"
            kwargs: dict[str, object] = {}
            for kw in call.keywords:
                value = kw.value
                if kw.arg == "type":
                    builtin = {"int": int, "float": float, "str": str}.get(getattr(value, "id", ""))
                    if builtin:
                        kwargs["type"] = builtin
                elif kw.arg == "nargs" and isinstance(value, (ast.Name, ast.Attribute)):
                    kwargs["nargs"] = getattr(argparse, getattr(value, "id", None) or value.attr)
                elif kw.arg == "action" and isinstance(value, ast.Attribute):
                    kwargs["action"] = getattr(argparse, value.attr)
                elif kw.arg in ("action", "nargs", "dest", "const", "choices", "required", "default"):
                    try:
                        kwargs[kw.arg] = ast.literal_eval(value)
                    except ValueError:
                        if kw.arg == "choices" and isinstance(value, ast.Name) and value.id in constants:
                            kwargs["choices"] = constants[value.id]
                        elif kw.arg in ("action", "nargs"):
                            raise AssertionError(f"{where}: {kw.arg} {ast.unparse(value)} is not read here") from None
            if "choices" in kwargs and "type" not in kwargs and not all(isinstance(c, str)
                                                                       for c in kwargs["choices"]):
                del kwargs["choices"]  # compared after a type this test does not rebuild
            if not required:
                kwargs.pop("required", None)
            parser.add_argument(*names, **kwargs)
    return parser


def parse_all(parser: Rebuilt, args: list[str]) -> tuple[argparse.Namespace, list[str]]:
    try:
        return parser.parse_known_args(args)
    except ArgvError as e:
        raise AssertionError(f"{args}: {e}") from None


def check_commands(commands: Iterator[tuple[str, RefCommand]], check) -> int:
    """Run check(cmd) for each command; one failure lists every command that failed, and why."""
    failures, count = [], 0
    for what, cmd in commands:
        count += 1
        try:
            check(cmd)
        except AssertionError as e:
            failures.append(f"{what}\n    {e}")
    assert not failures, f"{len(failures)} of {count} commands:\n" + "\n".join(failures)
    return count


# -- PaddleClas ResNet50 ------------------------------------------------------------------------------------------------

def key_path_in(config: object, keys: list[str]) -> bool:
    for key in keys:
        if isinstance(config, dict) and key in config:
            config = config[key]
        elif isinstance(config, list) and key.isdigit() and int(key) < len(config):
            config = config[int(key)]
        else:
            return False
    return True


def keys_read(paths: list[Path]) -> set[str]:
    """The keys the code reads by name: x.get('key', ...) and x['key']."""
    read = set()
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                read.add(node.args[0].value)
            elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
                read.add(node.slice.value)
    return read


def test_paddleclas_flags_config_keys_and_script(code_root: Path) -> None:
    """ppcls/static/train.py parses every command (-c, -o; parse_args: nothing unknown); the config exists; each
    override has one '=' (ppcls/utils/config.py override_config: `assert len(pair) == 2`) and names a key of that
    config, or one the static trainer reads by name (Global.seed, fuse_elewise_add_act_ops: ppcls/static/)."""
    static = code_root / "PaddleClas" / "ppcls" / "static"
    parser = rebuilt_parser([(static / "train.py", ("parse_args",))])
    read = keys_read(sorted(static.glob("*.py")))

    def check(cmd: RefCommand) -> None:
        at = script_at(cmd.argv)
        script = Path(cmd.cwd) / cmd.argv[at]
        assert script.is_file(), f"no {cmd.argv[at]} in {cmd.cwd}"
        args, unknown = parse_all(parser, cmd.argv[at + 1:])
        assert not unknown, f"train.py does not take {unknown}"
        config_file = Path(cmd.cwd) / args.config
        assert config_file.is_file(), f"no config {args.config}"
        config = yaml.safe_load(config_file.read_text())
        for option in args.override:
            assert option.count("=") == 1, f"-o {option}: override_config takes one '='"
            keys = option.split("=")[0].split(".")
            assert key_path_in(config, keys) or keys[-1] in read, \
                f"-o {option}: {'.'.join(keys)} is not in {args.config}, and ppcls/static/ reads no {keys[-1]!r}"

    assert check_commands(kit_commands("paddle", "resnet50", code_root), check) > 0


def make_staged(tmp_path: Path, fmt: str, *options: str, val: bool = False) -> Path:
    """A tiny ImageNet-shaped tree converted by the kit's data_prep to `fmt` under <root>/<fmt>/ (the layout
    reference.data_path points a program at); returns the root. val: the tree has a val/ (train's images) too."""
    src, root = tmp_path / "src", tmp_path / "root"
    if not src.exists():
        subprocess.run([sys.executable, str(REPO / "data_prep" / "make_synthetic_imagenet.py"), str(src),
                        "--classes", "2", "--images-per-class", "2", "--size", "32"], check=True, capture_output=True)
        if val:
            shutil.copytree(src / "train", src / "val")
    root.mkdir(exist_ok=True)
    subprocess.run([sys.executable, str(REPO / "data_prep" / "convert.py"), str(src), str(root / fmt), "--to", fmt, *options],
                   check=True, capture_output=True)
    return root


def test_paddleclas_reads_the_list_and_images_the_kit_stages(code_root: Path, tmp_path: Path) -> None:
    """ImageNetDataset (the config's DataLoader.Train.dataset) reads cls_label_path's lines split on its delimiter
    (' ' unless set) and joins image_root with the first field: every image of the kit's staged list is found so."""
    clas = code_root / "PaddleClas"
    dataset = ast.parse((clas / "ppcls" / "data" / "dataloader" / "imagenet_dataset.py").read_text())
    code = {ast.unparse(n) for n in ast.walk(dataset)}
    assert "os.path.join(self._img_root, line[0])" in code  # _load_anno
    assert "line.strip().split(self.delimiter)" in code
    assert "delimiter if delimiter is not None else ' '" in code
    root = make_staged(tmp_path, "paddle")
    for job in suite_jobs("paddle", "resnet50"):
        cmd = reference.build(job, Cluster(0, tuple(f"h{i}" for i in range(job.nodes))), code_root=str(clas.parent),
                              data_dir=reference.data_path(str(root), job))
        at = script_at(cmd.argv)
        args, _ = parse_all(rebuilt_parser([(clas / "ppcls" / "static" / "train.py", ("parse_args",))]),
                            cmd.argv[at + 1:])
        overrides = dict(o.split("=") for o in args.override)
        train = yaml.safe_load((clas / args.config).read_text())["DataLoader"]["Train"]["dataset"]
        assert train["name"] == "ImageNetDataset" and "delimiter" not in train, train
        image_root = overrides["DataLoader.Train.dataset.image_root"]
        lines = Path(overrides["DataLoader.Train.dataset.cls_label_path"]).read_text().splitlines()
        assert lines
        for line in lines:
            path, label = line.strip().split(" ")
            assert Path(image_root, path).is_file(), f"{line!r}: no {image_root}{path}"
            int(label)


# -- PLSC ArcFace --------------------------------------------------------------------------------------------------------

def function_defs(path: Path, cls: str) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(path.read_text())
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls]
    assert len(classes) == 1, f"{path}: no class {cls}"
    return {n.name: n for n in classes[0].body if isinstance(n, ast.FunctionDef)}


def check_call(call: ast.Call, fn: ast.FunctionDef, where: str) -> None:
    """The call binds to the method's parameters (self aside): not too many positionals, no unknown keyword, every
    parameter without a default given."""
    params = [a.arg for a in fn.args.args][1:]
    required = params[:len(params) - len(fn.args.defaults)]
    keywords = [k.arg for k in call.keywords]
    assert len(call.args) <= len(params) or fn.args.vararg, f"{where}: {len(call.args)} positionals for {params}"
    assert fn.args.kwarg or set(keywords) <= set(params), f"{where}: {keywords} not in {params}"
    given = set(params[:len(call.args)]) | set(keywords)
    assert set(required) <= given, f"{where}: {sorted(set(required) - given)} not given"


def method_calls(path: Path, receiver: str) -> list[ast.Call]:
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name) and n.func.value.id == receiver]


def test_plsc_flags_script_and_entry_calls(code_root: Path) -> None:
    """PLSC runs the kit's train.py (DLPerf's, with flags) copied into a work copy of its checkout: every command's
    flags parse with that driver; the driver's `from plsc import Entry` and each Entry method it calls exist in
    plsc/ at the pin and take its arguments; the attributes it sets are ones Entry reads."""
    plsc = code_root / "PLSC"
    driver = SCRIPTS / "plsc" / "train.py"
    parser = rebuilt_parser([(driver, ("main",))])

    def check(cmd: RefCommand) -> None:
        assert cmd.work_copy and Path(cmd.cwd) == plsc, (cmd.cwd, cmd.work_copy)
        at = script_at(cmd.argv)
        added = {Path(a).name: SCRIPTS / a for a in cmd.add}
        assert cmd.argv[at] in added and added[cmd.argv[at]] == driver, f"{cmd.argv[at]} is not the kit's {driver}"
        args, unknown = parse_all(parser, cmd.argv[at + 1:])
        assert not unknown, f"train.py does not take {unknown}"

    assert check_commands(kit_commands("paddle", "arcface", code_root), check) > 0
    assert "from .entry import Entry" in (plsc / "plsc" / "__init__.py").read_text()
    assert "from plsc import Entry" in driver.read_text()
    entry = plsc / "plsc" / "entry.py"
    methods = function_defs(entry, "Entry")
    calls = method_calls(driver, "ins")
    assert calls
    for call in calls:
        name = call.func.attr
        assert name in methods, f"{driver.name}:{call.lineno}: Entry has no {name}"
        check_call(call, methods[name], f"{driver.name}:{call.lineno} ins.{name}")
    set_attrs = {t.attr for n in ast.walk(ast.parse(driver.read_text())) if isinstance(n, ast.Assign)
                 for t in n.targets if isinstance(t, ast.Attribute) and getattr(t.value, "id", "") == "ins"}
    assert set_attrs
    entry_reads = {f"self.{a}" for a in set_attrs} & {ast.unparse(n) for n in ast.walk(ast.parse(entry.read_text()))
                                                      if isinstance(n, ast.Attribute)}
    assert entry_reads == {f"self.{a}" for a in set_attrs}


def test_plsc_patch_applies_to_entry_py_at_the_pin(code_root: Path) -> None:
    """The kit's launcher applies its patch to the checkout strictly (every context line at its stated line):
    against plsc/entry.py at the pin it applies, and adds the exit at batch 150."""
    spec = importlib.util.spec_from_file_location("contract_launch", SCRIPTS / "reference" / "launch.py")
    launch = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(launch)
    patch = SCRIPTS / reference.PLSC_PATCH
    for rel, hunks in launch.parse_patch(patch.read_text()).items():
        target = code_root / "PLSC" / rel
        assert target.is_file(), f"{patch.name}: no {rel} in the archive"
        patched = launch.apply_hunks(target.read_text(), hunks, rel)
        assert "if batch_id==150:" in patched and "if batch_id==150:" not in target.read_text()


# -- FleetX VGG16 ----------------------------------------------------------------------------------------------------------

def test_fleetx_flags_script_and_package_calls(code_root: Path) -> None:
    """FleetX runs the kit's vgg16_benchmark.py from FleetX/python with PYTHONPATH=. (the fleetx package at the pin):
    every command's flags parse with the driver; what it calls in fleetx exists there and takes its arguments:
    X.applications.VGG16(), model.get_train_dataloader(...), model.loss, X.MultiGPUTrainer().fit(...)."""
    python = code_root / "FleetX" / "python"
    driver = SCRIPTS / "fleetx" / "vgg16_benchmark.py"
    parser = rebuilt_parser([(driver, ("main",))])

    def check(cmd: RefCommand) -> None:
        assert Path(cmd.cwd) == python and cmd.env.get("PYTHONPATH") == ".", (cmd.cwd, cmd.env)
        assert (python / "fleetx" / "__init__.py").is_file()
        at = script_at(cmd.argv)
        assert Path(cmd.argv[at]) == driver, f"{cmd.argv[at]} is not the kit's {driver}"
        args, unknown = parse_all(parser, cmd.argv[at + 1:])
        assert not unknown, f"vgg16_benchmark.py does not take {unknown}"

    assert check_commands(kit_commands("paddle", "vgg16", code_root), check) > 0
    package = python / "fleetx"
    assert "from .applications import *" in (package / "__init__.py").read_text()
    assert "from .model import *" in (package / "applications" / "__init__.py").read_text()
    assert "from .applications.trainer import MultiGPUTrainer" in (package / "__init__.py").read_text()
    vgg = function_defs(package / "applications" / "model.py", "VGG16")
    trainer = function_defs(package / "applications" / "trainer.py", "MultiGPUTrainer")
    tree = ast.parse(driver.read_text())
    calls = {ast.unparse(n.func): n for n in ast.walk(tree) if isinstance(n, ast.Call)}
    wanted = {"X.applications.VGG16": vgg["__init__"], "model.get_train_dataloader": vgg["get_train_dataloader"],
              "X.MultiGPUTrainer": trainer["__init__"], "X.MultiGPUTrainer().fit": trainer["fit"]}
    for name, fn in wanted.items():
        assert name in calls, f"{driver.name} no longer calls {name}: update this test"
        check_call(calls[name], fn, f"{driver.name}:{calls[name].lineno} {name}")
    assert "model.loss" in {ast.unparse(n) for n in ast.walk(tree)}
    assert "self.loss = loss" in {ast.unparse(n) for n in ast.walk(vgg["__init__"])}


def test_fleetx_reads_the_list_and_images_the_kit_stages(code_root: Path, tmp_path: Path) -> None:
    """VGG16.get_train_dataloader(data_dir) reads `data_dir + '/train.txt'`; reader_creator takes the images' folder
    as the list's name less '.txt' (`<data_dir>/train`), rewrites "JPEG" to "jpeg" in each listed path and joins it
    to that folder; DALI (--auto) reads the list as written under file_root/train: every image of the kit's staged
    list is found both ways, with its label."""
    fleetx = code_root / "FleetX" / "python" / "fleetx"
    model = function_defs(fleetx / "applications" / "model.py", "VGG16")
    loader = {ast.unparse(n) for n in ast.walk(model["get_train_dataloader"])}
    assert "filelist = local_path + '/train.txt'" in loader
    reader = {ast.unparse(n) for n in ast.walk(ast.parse((fleetx / "dataset" / "image_dataset.py").read_text()))}
    assert {"data_dir = filelist[:-4]", "img_path, label = line.split()",
            "img_path = img_path.replace('JPEG', 'jpeg')", "img_path = os.path.join(data_dir, img_path)"} <= reader
    dali = {ast.unparse(n) for n in ast.walk(ast.parse((fleetx / "dataset" / "dali.py").read_text()))}
    assert {"file_root = filelist[:-i]", "file_root = os.path.join(file_root, 'train')"} <= dali
    driver = (SCRIPTS / "fleetx" / "vgg16_benchmark.py").read_text()
    assert "data_dir = os.path.relpath(args.data_dir) if args.auto else args.data_dir" in driver

    def dali_file_root(filelist: str) -> str:
        """dali.build: the first i from 0 with filelist[-i] == '/' (i 0 is index 0: '' for an absolute path)."""
        return next(filelist[:-i] for i in range(len(filelist)) if filelist[-i] == "/")
    root = make_staged(tmp_path, "fleetx")
    for job in suite_jobs("paddle", "vgg16"):
        cmd = reference.build(job, Cluster(0, tuple(f"h{i}" for i in range(job.nodes))), code_root=str(code_root),
                              data_dir=reference.data_path(str(root), job), scripts_dir=str(SCRIPTS))
        data_dir = cmd.argv[cmd.argv.index("--data-dir") + 1]
        if "--auto" in cmd.argv:  # as the driver passes it: relative to the program's working directory
            data_dir = os.path.relpath(data_dir, cmd.cwd)
        filelist = data_dir + "/train.txt"
        lines = Path(cmd.cwd, filelist).read_text().splitlines()
        assert len(lines) == 4, filelist
        for line in lines:
            img_path, label = line.split()
            int(label)
            path = os.path.join(filelist[:-4], img_path.replace("JPEG", "jpeg"))
            assert Path(cmd.cwd, path).is_file(), f"{line!r}: FleetX opens {path}, which the kit did not stage"
            if "--auto" in cmd.argv:
                dali = os.path.join(dali_file_root(filelist), "train", img_path)
                assert Path(cmd.cwd, dali).is_file(), f"{line!r}: DALI's file reader opens {dali}: not there"


def test_fleetx_loads_the_saved_program_the_kit_stages_and_downloads_nothing(code_root: Path, tmp_path: Path,
                                                                             vgg16_saved_program) -> None:
    """FleetX's VGG16() (NCHW, its default) looks in sysconfig's purelib + '/fleetx/applications/vgg16_nchw', the
    folder the kit's driver points it at; util.load_program always opens the files the kit checks an archive for;
    download_model's URL at the pinned version is the one pins.yaml names. Run for real on the staged folder,
    download_model (its own code, compiled from model.py) fetches nothing on either worker; unstaged, it would
    wget that URL."""
    fleetx = code_root / "FleetX" / "python" / "fleetx"
    model_py = fleetx / "applications" / "model.py"
    init = function_defs(model_py, "VGG16")["__init__"]
    said = {ast.unparse(n) for n in ast.walk(init)}
    (saved,) = reference.implementation("paddle", "vgg16").saved_programs
    assert {"fleet_path = sysconfig.get_paths()['purelib'] + '/fleetx/applications/'", "model_name = 'vgg16_nchw'",
            "download_model(fleet_path, model_name)"} <= said and saved.into == "fleetx/applications"
    assert [ast.literal_eval(d) for d in init.args.defaults] == ["NCHW"] and saved.name == "vgg16_nchw"
    driver = ast.parse((SCRIPTS / "fleetx" / "vgg16_benchmark.py").read_text())
    assert "SAVED_PROGRAM, INTO = ('vgg16_nchw', 'fleetx/applications')" in {ast.unparse(n) for n in driver.body}

    load_program = next(n for n in ast.parse((fleetx / "applications" / "util.py").read_text()).body
                        if isinstance(n, ast.FunctionDef) and n.name == "load_program")
    opened = {n.args[0].right.value.lstrip("/") for n in ast.walk(load_program) if isinstance(n, ast.Call)
              and ast.unparse(n.func) == "open" and isinstance(n.args[0], ast.BinOp)}
    guarded = {n.args[0].right.value.lstrip("/") for n in ast.walk(load_program) if isinstance(n, ast.Call)
               and ast.unparse(n.func) == "os.path.exists"}
    assert opened - guarded == set(saved.reads) and guarded == {"acc", "lr_name", "checkpoint"}

    version = {}
    exec((fleetx / "version.py").read_text(), version)
    (pin,) = current_pins().model_code["fleetx"].saved_programs
    assert pin.name == saved.name
    source = ast.parse(model_py.read_text())
    download = next(n for n in source.body if isinstance(n, ast.FunctionDef) and n.name == "download_model")
    commands = []

    def system(command: str) -> int:
        commands.append(command)
        return 0
    fake_os = types.SimpleNamespace(path=os.path, system=system)
    for first in (True, False):
        namespace = {"os": fake_os, "time": types.SimpleNamespace(sleep=lambda s: pytest.fail("waits forever")),
                     "utils": types.SimpleNamespace(is_first_worker=lambda first=first: first),
                     "fleetx_version": version["fleetx_version"]}
        exec(compile(ast.Module([download], []), str(model_py), "exec"), namespace)
        staged = tmp_path / "staged"
        saved_programs.stage(vgg16_saved_program[0], staged, saved.into, saved.name, saved.reads,
                             vgg16_saved_program[1], "this test")
        namespace["download_model"](f"{staged}/{saved.into}/", saved.name)
        assert commands == []
        if first:
            namespace["download_model"](f"{tmp_path}/empty/{saved.into}/", saved.name)
            assert commands[0] == f"wget -P {tmp_path}/empty/{saved.into}/ --no-check-certificate {pin.url}"
            commands.clear()


# -- NVIDIA DLE PyTorch ResNet50 ----------------------------------------------------------------------------------------

def test_dle_pytorch_flags_and_scripts(code_root: Path) -> None:
    """multiproc.py (parse_args: its flags, then the training script and its arguments) and main.py as it parses:
    its own parser's known args, the rest through the resnet50 model's parser, `assert len(rest) == 0`. It writes
    its raport to os.path.join(--workspace, --raport-file): the file the kit collects where it runs."""
    convnets = code_root / "DeepLearningExamples" / "PyTorch" / "Classification" / "ConvNets"
    models = convnets / "image_classification" / "models"
    multiproc = rebuilt_parser([(convnets / "multiproc.py", ("parse_args",))])
    main = rebuilt_parser([(convnets / "main.py", ("add_parser_arguments",))],
                          module_constants([convnets / "image_classification" / "dataloaders.py"]))
    model = rebuilt_parser([(models / "model.py", ("parser",)), (models / "resnet.py", ("parser",))])

    def check(cmd: RefCommand) -> None:
        at = script_at(cmd.argv)
        script = Path(cmd.cwd) / cmd.argv[at]
        assert script.is_file(), f"no {cmd.argv[at]} in {cmd.cwd}"
        args = cmd.argv[at + 1:]
        if script.name == "multiproc.py":
            launched, unknown = parse_all(multiproc, args)
            assert not unknown, f"multiproc.py does not take {unknown}"
            assert (Path(cmd.cwd) / launched.training_script).is_file(), f"no {launched.training_script}"
            script, args = Path(launched.training_script), launched.training_script_args
        assert script.name == "main.py", script
        parsed, rest = parse_all(main, args)
        assert parsed.arch == "resnet50", parsed.arch
        _, rest = parse_all(model, rest)
        assert not rest, f"main.py: Unknown args passed: {rest}"
        written = os.path.normpath(os.path.join(parsed.workspace, parsed.raport_file))
        assert cmd.outputs == (written,), f"main.py writes {written}; the kit collects {cmd.outputs}"

    assert "os.path.join(args.workspace, args.raport_file)" in (convnets / "main.py").read_text()
    assert check_commands(kit_commands("torch", "resnet50", code_root), check) > 0


def test_dle_pytorch_reads_the_train_folder_the_kit_stages(code_root: Path, tmp_path: Path) -> None:
    """main.py's data argument is the folder whose train/ it reads (dataloaders.py: os.path.join(data_path,
    "train")); the kit's `folder` format has its classes there."""
    convnets = code_root / "DeepLearningExamples" / "PyTorch" / "Classification" / "ConvNets"
    code = {ast.unparse(n) for n in ast.walk(ast.parse(
        (convnets / "image_classification" / "dataloaders.py").read_text()))}
    assert "os.path.join(data_path, 'train')" in code
    root = make_staged(tmp_path, "folder")
    for job in suite_jobs("torch", "resnet50"):
        if job.data != "imagenet":
            continue
        cmd = reference.build(job, Cluster(0, tuple(f"h{i}" for i in range(job.nodes))), code_root=str(code_root),
                              data_dir=reference.data_path(str(root), job))
        train = Path(cmd.argv[-1]) / "train"
        assert len([d for d in train.iterdir() if d.is_dir()]) == 2, train


# -- NVIDIA DLE TensorFlow ResNet50 ------------------------------------------------------------------------------------

def test_dle_tensorflow_flags_and_script(code_root: Path) -> None:
    """main.py's parse_cmdline (utils/cmdline_helper.py) raises on any unknown argument: every command parses; it
    writes its log (and, without --model_dir, its model) under --results_dir: the folder the kit collects."""
    convnets = code_root / "DeepLearningExamples" / "TensorFlow" / "Classification" / "ConvNets"
    parser = rebuilt_parser([(convnets / "utils" / "cmdline_helper.py", ())])

    def check(cmd: RefCommand) -> None:
        at = script_at(cmd.argv)
        assert (Path(cmd.cwd) / cmd.argv[at]).is_file(), f"no {cmd.argv[at]} in {cmd.cwd}"
        assert Path(cmd.argv[at]).name == "main.py"
        flags, unknown = parse_all(parser, cmd.argv[at + 1:])
        assert not unknown, f"main.py: Unknown command line arg(s) {unknown}"
        assert flags.model_dir is None and cmd.outputs == (flags.results_dir,), \
            f"main.py writes its log and model under {flags.results_dir}; the kit collects {cmd.outputs}"

    main_py = (convnets / "main.py").read_text()
    assert "parse_cmdline" in main_py and "log_path = os.path.join(FLAGS.results_dir, FLAGS.log_filename)" in main_py
    assert check_commands(kit_commands("tensorflow", "resnet50", code_root), check) > 0


def test_dle_tensorflow_reads_the_tfrecords_the_kit_stages(code_root: Path, tmp_path: Path) -> None:
    """Training reads --data_dir's `train-*` files (runner.py: parse_tfrecords_dataset(mode="train"), runner_utils.py:
    os.path.join(data_dir, '%s-*' % mode)); the kit's `tfrecord` format writes them there."""
    convnets = code_root / "DeepLearningExamples" / "TensorFlow" / "Classification" / "ConvNets"
    code = {ast.unparse(n) for n in ast.walk(ast.parse((convnets / "runtime" / "runner_utils.py").read_text()))}
    assert "os.path.join(data_dir, '%s-*' % mode)" in code
    assert 'mode="train"' in (convnets / "runtime" / "runner.py").read_text()
    root = make_staged(tmp_path, "tfrecord", "--shards", "1")
    for job in suite_jobs("tensorflow", "resnet50"):
        cmd = reference.build(job, Cluster(0, tuple(f"h{i}" for i in range(job.nodes))), code_root=str(code_root),
                              data_dir=reference.data_path(str(root), job))
        data_dir = [a.split("=", 1)[1] for a in cmd.argv if a.startswith("--data_dir=")]
        assert len(data_dir) == 1 and list(Path(data_dir[0]).glob("train-*")), cmd.argv


# -- NVIDIA DLE MXNet RN50v1.5 -----------------------------------------------------------------------------------------

def test_dle_mxnet_flags_through_benchmark_runner_and_train(code_root: Path) -> None:
    """benchmark.py takes its flags (parse_known_args) and passes the others on to ./runner (its --executable),
    which takes its own (parse_known_args) and passes the rest to train.py, whose parser (models, fit, data, dali,
    data aug groups) takes them with parse_args: nothing may be left. benchmark.py writes its report to -o: the file
    the kit collects."""
    rn50 = code_root / "DeepLearningExamples" / "MxNet" / "Classification" / "RN50v1.5"
    benchmark = rebuilt_parser([(rn50 / "benchmark.py", ())])
    runner = rebuilt_parser([(rn50 / "runner", ())])
    groups = {"models.py": ("add_model_args",), "fit.py": ("add_fit_args",), "data.py": ("add_data_args",
              "add_data_aug_args"), "dali.py": ("add_dali_args",)}
    train = rebuilt_parser([(rn50 / name, fns) for name, fns in groups.items()], required=False)
    train_py = (rn50 / "train.py").read_text()
    assert "with open(args.output, 'w') as f:" in (rn50 / "benchmark.py").read_text()
    assert all(f"{name[:-3]}.{fn}(parser)" in train_py for name, fns in groups.items() for fn in fns)

    def check(cmd: RefCommand) -> None:
        at = script_at(cmd.argv)
        assert cmd.argv[at] == "benchmark.py" and (Path(cmd.cwd) / cmd.argv[at]).is_file()
        ours, others = parse_all(benchmark, cmd.argv[at + 1:])
        assert (Path(cmd.cwd) / ours.executable).is_file(), f"no {ours.executable}"
        assert cmd.outputs == (ours.output,), f"benchmark.py writes {ours.output}; the kit collects {cmd.outputs}"
        _, rest = parse_all(runner, others)
        _, unknown = parse_all(train, rest)
        assert not unknown, f"train.py does not take {unknown}"

    assert check_commands(kit_commands("mxnet", "resnet50", code_root), check) > 0


def test_dle_mxnet_benchmark_that_failed_exits_0_with_nan_and_the_kit_calls_it_failed(code_root: Path) -> None:
    """benchmark.py catches a failed training (no DLLogger report: `except Exception`), sets every metric to NaN and
    still prints its table and exits 0. Its own table code, run here on that result: the kit's parse of what it
    printed gives no figure, naming the line (a failed run, whatever the exit code)."""
    rn50 = code_root / "DeepLearningExamples" / "MxNet" / "Classification" / "RN50v1.5"
    tree = ast.parse((rn50 / "benchmark.py").read_text())
    assert "res['metrics'][str(n)][str(bs)][metric] = float('nan')" in {ast.unparse(n) for n in ast.walk(tree)}
    start = next(i for i, n in enumerate(tree.body) if ast.unparse(n) == "column_len = 11")
    table = ast.Module(tree.body[start:start + 2], [])  # column_len, then the loop that prints every metric's table
    assert ast.unparse(table.body[1]).startswith("for m in res['metric_keys']:")
    printed = io.StringIO()
    res = {"metric_keys": ["train.ips"], "metrics": {"1": {"256": {"train.ips": float("nan")}}}}
    exec(compile(table, str(rn50 / "benchmark.py"), "exec"),
         {"res": res, "args": argparse.Namespace(ngpus=[1], batch_sizes=[256]),
          "sys": types.SimpleNamespace(stderr=printed)})
    assert "nan" in printed.getvalue()
    with pytest.raises(ParseError, match="throughput value is nan \\(the run diverged or failed\\)") as caught:
        parse_text("Traceback (most recent call last):\n" + printed.getvalue(), "rn50.log", "dle-mxnet")
    assert caught.value.line == 5


def test_dle_mxnet_reads_the_train_and_val_records_the_kit_stages(code_root: Path, tmp_path: Path) -> None:
    """./runner always passes train.py `<--data-root>/train.rec`, `train.idx`, `val.rec` and `val.idx`; with
    --data-val set, both the DALI backends (dali.py get_rec_iter: HybridValPipe, built) and the mxnet one (data.py
    get_rec_iter: mx.io.ImageRecordIter) open the val records, whatever --mode: the kit's `recordio` format, from a
    tree with val/, writes all four, each record an IRHeader whose id is in the .idx at its offset."""
    rn50 = code_root / "DeepLearningExamples" / "MxNet" / "Classification" / "RN50v1.5"
    code = {ast.unparse(n) for n in ast.walk(ast.parse((rn50 / "runner").read_text()))}
    names = ("train.rec", "train.idx", "val.rec", "val.idx")
    assert {f"str(opts.data_root / '{name}')" for name in names} <= code
    dali = {ast.unparse(n) for n in ast.walk(ast.parse((rn50 / "dali.py").read_text()))}
    assert {"rec_path=args.data_val", "valpipes[0].build()"} <= dali
    data = {ast.unparse(n) for n in ast.walk(ast.parse((rn50 / "data.py").read_text()))}
    assert {"path_imgrec=args.data_val", "path_imgidx=args.data_val_idx"} <= data
    root = make_staged(tmp_path, "recordio", val=True)
    for job in suite_jobs("mxnet", "resnet50"):
        cmd = reference.build(job, Cluster(0, ("h0",)), code_root=str(code_root),
                              data_dir=reference.data_path(str(root), job))
        data_root = Path(cmd.argv[cmd.argv.index("--data-root") + 1])
        for split in ("train", "val"):
            rec, idx = data_root / f"{split}.rec", data_root / f"{split}.idx"
            assert rec.is_file() and idx.is_file(), (cmd.argv, split)
            offsets = dict(tuple(map(int, line.split("\t"))) for line in idx.read_text().splitlines())
            assert len(offsets) == 4, idx
            with open(rec, "rb") as fh:
                for image_id, offset in offsets.items():
                    fh.seek(offset)
                    magic, lrec = struct.unpack("<II", fh.read(8))
                    assert magic == 0xCED7230A, f"{rec}@{offset}: no RecordIO record"
                    _flag, _label, rid, _id2 = struct.unpack("<IfQQ", fh.read(24))
                    assert rid == image_id, f"{idx}: id {image_id} at {offset}, the record says {rid}"
