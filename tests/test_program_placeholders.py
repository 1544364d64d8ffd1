"""A published program that imports a module at load time which its host lacks and the kit's modes never call
(DLE PyTorch: `class HybridTrainPipe(Pipeline)` in image_classification/dataloaders.py, DALI or not) loads through
the kit's import placeholder (scripts/reference/placeholders), only where its own Python cannot import the module;
the record and the report say so. Seen on an H200 without DALI: `NameError: name 'Pipeline' is not defined`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from kit.config.programs import IMPLS
from kit.config.reference import Cluster, RefJob, build
from kit.results.sections import program_placeholder_section
from kit.run.command import SCRIPTS, launch_argv

LAUNCHER = SCRIPTS / "reference" / "launch.py"
PLACEHOLDERS = SCRIPTS / "reference" / "placeholders" / "nvidia.dali"  # DALI's folder of them (launch.placeholder_root)
# what DLE's dataloaders.py does at import, then what the run asks for: synthetic data (never DALI) or DALI
PROGRAM = """\
import sys
try:
    from nvidia.dali.plugin.pytorch import DALIClassificationIterator
    from nvidia.dali.pipeline import Pipeline
    import nvidia.dali.ops as ops
    import nvidia.dali.types as types
except ImportError:
    print("Please install DALI")


class HybridTrainPipe(Pipeline):
    def __init__(self):
        super().__init__()
        self.decode = ops.ImageDecoder(device="mixed", output_type=types.RGB)


print("loaded", flush=True)
if sys.argv[1] == "dali-gpu":
    HybridTrainPipe()
"""


def launch(tmp_path: Path, backend: str, env: dict | None = None,
           modules: tuple[str, ...] = ("nvidia.dali",)) -> tuple[subprocess.CompletedProcess, dict]:
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "main.py").write_text(PROGRAM)
    record = tmp_path / "run" / "x.cmd.json"
    argv = [sys.executable, "main.py", backend]
    line = [sys.executable, str(LAUNCHER), "--record", str(record), "--meta", json.dumps({"argv": argv}),
            "--cwd", str(code), *(a for m in modules for a in ("--placeholder", m)), "--", *argv]
    done = subprocess.run(line, capture_output=True, text=True, timeout=60, env=env)
    return done, json.loads(record.read_text())


def test_a_missing_module_is_placed_and_recorded(tmp_path):
    done, meta = launch(tmp_path, "syntetic")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["loaded"]
    [entry] = meta["placeholders"]
    assert entry["module"] == "nvidia.dali" and entry["placeholder"] == str(PLACEHOLDERS)
    assert "No module named 'nvidia" in entry["why"]
    assert meta["environ"]["PYTHONPATH"].split(":")[0] == str(PLACEHOLDERS)


def test_using_the_placeholder_stops_the_program_naming_the_module(tmp_path):
    done, meta = launch(tmp_path, "dali-gpu")
    assert done.returncode == 1 and done.stdout.splitlines() == ["loaded"]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("nvidia.dali.DALIAbsent: nvidia.dali.pipeline.Pipeline: NVIDIA DALI is not installed")
    assert meta["placeholders"][0]["placeholder"]


def real_dali(tmp_path: Path) -> None:
    """A DALI of the host's (the names the program imports) under tmp_path/site."""
    real = tmp_path / "site" / "nvidia" / "dali"
    (real / "plugin").mkdir(parents=True)
    (real / "__init__.py").write_text("")
    (real / "plugin" / "__init__.py").write_text("")
    (real / "plugin" / "pytorch.py").write_text("DALIClassificationIterator = object\n")
    (real / "pipeline.py").write_text("class Pipeline:\n    pass\n")
    (real / "ops.py").write_text("ImageDecoder = dict\n")
    (real / "types.py").write_text("RGB = 1\n")


def test_a_host_with_the_module_gets_no_placeholder(tmp_path):
    real_dali(tmp_path)
    done, meta = launch(tmp_path, "dali-gpu", env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "site")})
    assert done.returncode == 0, done.stderr
    assert meta["placeholders"] == [{"module": "nvidia.dali", "placeholder": None, "why": None}]
    assert str(PLACEHOLDERS) not in meta["environ"]["PYTHONPATH"]


def test_a_host_with_dali_but_no_horovod_keeps_its_own_dali(tmp_path):
    """DLE TensorFlow and MXNet ask for both: only the missing one's folder goes on the path, so the host's DALI
    is the one the program uses (the DALI placeholder would stop a DALI backend)."""
    real_dali(tmp_path)
    done, meta = launch(tmp_path, "dali-gpu", env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tmp_path / "site")},
                        modules=("nvidia.dali", "horovod.mxnet"))
    assert done.returncode == 0, done.stderr
    horovod = SCRIPTS / "reference" / "placeholders" / "horovod"
    assert [(e["module"], e["placeholder"]) for e in meta["placeholders"]] == [("nvidia.dali", None),
                                                                              ("horovod.mxnet", str(horovod))]
    assert meta["environ"]["PYTHONPATH"].split(":") == [str(horovod), str(tmp_path / "site")]


def test_dle_pytorch_asks_for_the_dali_placeholder_and_the_report_says_where_it_stood_in(tmp_path):
    impl = IMPLS[("torch", "resnet50")]
    assert impl.placeholders == ("nvidia.dali",)
    job = RefJob("torch", "resnet50", "amp", 256, 1, 1)
    cmd = build(job, Cluster(), data_dir=None)
    argv = launch_argv("python3", "/s", cmd, job, Cluster(), "/r/x.cmd.json")
    assert argv[argv.index("--placeholder") + 1] == "nvidia.dali"
    logs = tmp_path / "logs" / "ngc-pytorch"
    logs.mkdir(parents=True)
    for i, host in enumerate(("node2", "node1")):
        (logs / f"r_{i}.cmd.json").write_text(json.dumps({"host": host, "placeholders": [
            {"module": "nvidia.dali", "placeholder": "/kit/scripts/reference/placeholders", "why": "No module"}]}))
    (logs / "r_9.cmd.json").write_text(json.dumps({"host": "node3", "placeholders": [
        {"module": "nvidia.dali", "placeholder": None, "why": None}]}))
    line = program_placeholder_section(tmp_path)
    assert line.strip().startswith("The published program imports nvidia.dali, which the Python of node1, node2 lacks")
    assert "node3" not in line
    assert program_placeholder_section(tmp_path / "nothing") == ""
