"""NVIDIA DeepLearningExamples' own PyTorch ResNet50 v1.5 run natively by `kit bench` (a host with PyTorch and no NGC
container), beside the kit's harness with the same settings, and the report's harness ÷ program row.

The program is a STAND-IN (tests/standin/dle_pytorch/main.py, see tests/standin/README.md) replaying the real
published one-GPU AMP log; it is started by the kit's real command line (scripts/reference/launch.py, then DLE's
`python ./main.py ...` in a scratch folder mirroring the checkout's folder), finds dllogger where the kit puts it
before the host's PYTHONPATH (the stand-in package in <model-code root>/dllogger) and pynvml on that inherited
PYTHONPATH, saves its checkpoint where it runs (removed with the scratch folder), and is parsed, reduced and reported
as a real run. The harness runs for real on this CPU (batch 2, 1 + 2 steps). The argv is checked against main.py's
parser at the pinned commit.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace as NS

import pytest

from kit.cli import main
from kit.config import suites
from kit.config.programs import DLLOGGER, layout_and_mode, ran_as
from kit.config.reference import RefJob, build
from kit.core.layout import GroupKey
from kit.images.spec import pin_of
from kit.results.program_ratio import program_ratio_section
from kit.run.command import SCRIPTS
from kit.run.needs import needs_script, read_needs
from kit.run.plan import code_state, plan

STANDIN = Path(__file__).resolve().parent / "standin"
CONVNETS = "DeepLearningExamples/PyTorch/Classification/ConvNets"
AMP_LOG = "perf-v100/pytorch/pytorch_gpu1_amp_bs256.txt"
NOBODY = 65534  # Debian's nobody/nogroup: a checkout another user owns  # expected.yaml: 790.033 (skip 9, mean)
SUITE = """\
schema_version: 1
name: dle-native-cpu
hardware: cpu
defaults: {batch_size: 2, precision: amp, data: synthetic, repeats: 1, timeout_s: 300}
cases:
  - {framework: torch, model: resnet50, impl: harness, layout: nhwc, warmup_steps: 1, measure_steps: 10}
  - {framework: torch, model: resnet50, impl: reference}
"""
# what the kit starts for that reference case: DLE's README flags (--amp --static-loss-scale 256), configs.yml's NHWC
# for AMP, its synthetic backend as spelled at the pin, 100 iterations of one epoch, training only, the raport file
ARGV = ["--arch", "resnet50", "-b", "2", "--training-only", "-p", "1", "--raport-file", "benchmark.json",
        "--epochs", "1", "--prof", "100", "--amp", "--static-loss-scale", "256", "--memory-format", "nhwc",
        "--data-backend", "syntetic", "/imagenet"]


def dle_main_parse(args: list[str]) -> argparse.Namespace:
    """main.py's add_parser_arguments at the pinned commit (NVIDIA/DeepLearningExamples@4a15e914,
    PyTorch/Classification/ConvNets/main.py), choices included, on a host without DALI (data backends pytorch and
    syntetic only: image_classification/dataloaders.py). parse_args: a flag main.py does not know is an error."""
    p = argparse.ArgumentParser(exit_on_error=False)
    p.add_argument("data")
    arch = ("resnet50", "resnext101-32x4d", "se-resnext101-32x4d", "efficientnet-b0", "efficientnet-b4",
            "efficientnet-widese-b0", "efficientnet-widese-b4")
    affinity = ("none", "socket", "socket_single", "socket_single_unique", "socket_unique_interleaved",
                "socket_unique_contiguous")
    for flags, kw in (
        (("--data-backend",), {"default": "dali-cpu", "choices": ["pytorch", "syntetic"]}),
        (("--interpolation",), {"default": "bilinear"}), (("--arch", "-a"), {"default": "resnet50", "choices": arch}),
        (("-j", "--workers"), {"default": 5, "type": int}), (("--prefetch",), {"default": 2, "type": int}),
        (("--epochs",), {"default": 90, "type": int}), (("--run-epochs",), {"default": -1, "type": int}),
        (("--early-stopping-patience",), {"default": -1, "type": int}),
        (("--image-size",), {"default": None, "type": int}), (("-b", "--batch-size"), {"default": 256, "type": int}),
        (("--optimizer-batch-size",), {"default": -1, "type": int}),
        (("--lr", "--learning-rate"), {"default": 0.1, "type": float}),
        (("--lr-schedule",), {"default": "step", "choices": ["step", "linear", "cosine"]}),
        (("--end-lr",), {"default": 0, "type": float}), (("--warmup",), {"default": 0, "type": int}),
        (("--label-smoothing",), {"default": 0.0, "type": float}), (("--mixup",), {"default": 0.0, "type": float}),
        (("--optimizer",), {"default": "sgd", "choices": ("sgd", "rmsprop")}),
        (("--momentum",), {"default": 0.9, "type": float}),
        (("--weight-decay", "--wd"), {"default": 1e-4, "type": float}),
        (("--bn-weight-decay",), {"action": "store_true"}), (("--rmsprop-alpha",), {"default": 0.9, "type": float}),
        (("--rmsprop-eps",), {"default": 1e-3, "type": float}), (("--nesterov",), {"action": "store_true"}),
        (("--print-freq", "-p"), {"default": 10, "type": int}), (("--resume",), {"default": None}),
        (("--static-loss-scale",), {"default": 1, "type": float}),
        (("--dynamic-loss-scale",), {"action": "store_true"}), (("--prof",), {"default": -1, "type": int}),
        (("--amp",), {"action": "store_true"}), (("--seed",), {"default": None, "type": int}),
        (("--gather-checkpoints",), {"action": "store_true"}),
        (("--raport-file",), {"default": "experiment_raport.json"}), (("--evaluate",), {"action": "store_true"}),
        (("--training-only",), {"action": "store_true"}),
        (("--no-checkpoints",), {"action": "store_false", "dest": "save_checkpoints"}),
        (("--jit",), {"default": "no", "choices": ["no", "script"]}),
        (("--checkpoint-filename",), {"default": "checkpoint.pth.tar"}), (("--workspace",), {"default": "./"}),
        (("--memory-format",), {"default": "nchw", "choices": ["nchw", "nhwc"]}),
        (("--use-ema",), {"default": None, "type": float}),
        (("--augmentation",), {"default": None, "choices": [None, "autoaugment"]}),
        (("--num-classes",), {"default": None, "type": int}),
        (("--gpu-affinity",), {"default": "none", "choices": affinity}),
    ):
        p.add_argument(*flags, **kw)
    return p.parse_args(args)


def model_code(tmp_path: Path, published: Path) -> Path:
    """A model-code root as bench/prepare_models.py lays it out: DLE's ConvNets folder (the stand-in main.py beside
    the log it replays) and a dllogger checkout (the stand-in package)."""
    root = tmp_path / "models"
    (root / CONVNETS).mkdir(parents=True)
    shutil.copy(STANDIN / "dle_pytorch" / "main.py", root / CONVNETS / "main.py")
    shutil.copy(published / AMP_LOG, root / CONVNETS / "replay.log")
    shutil.copytree(STANDIN / "dllogger", root / "dllogger")
    return root


@pytest.fixture
def native_host(tmp_path, published, monkeypatch) -> Path:
    """This machine as a native host: KIT_MODEL_CODE names the model code, and the publisher's bare `python` (DLE's
    README starts `python ./main.py`) is this venv's."""
    root = model_code(tmp_path, published)
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").symlink_to(sys.executable)
    monkeypatch.setenv("KIT_MODEL_CODE", str(root))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{Path(sys.executable).parent}:/usr/bin:/bin")
    (tmp_path / "suite.yaml").write_text(SUITE)
    return root


def stand_in_said(log: Path) -> dict:
    (line,) = [x for x in log.read_text().splitlines() if x.startswith("stand-in main.py ")]
    return json.loads(line.removeprefix("stand-in main.py "))


def test_kit_bench_runs_dle_pytorch_natively_beside_the_harness_and_reports_the_ratio(native_host, tmp_path,
                                                                                     monkeypatch):
    root, runs = native_host, tmp_path / "runs"
    site = tmp_path / "site"  # what a GPU host's `pip install --target` put on its own PYTHONPATH
    site.mkdir()
    (site / "pynvml.py").write_text('"""stand-in pynvml: only has to be found"""\n')
    monkeypatch.setenv("PYTHONPATH", str(site))
    assert main(["bench", "--suite", str(tmp_path / "suite.yaml"), "--runs-dir", str(runs), "--force"]) == 0
    (run_dir,) = runs.iterdir()
    meta = json.loads((run_dir / "run.json").read_text())
    entries = {Path(k).parts[1]: v for k, v in meta["runs"].items()}  # logs/<framework folder>/...
    assert entries["torch"]["status"] == entries["ngc-pytorch"]["status"] == "ok", entries

    # the native launch: DLE's main.py in a scratch mirror of its checkout's folder, with the argv main.py at the pin
    # accepts
    log = run_dir / "logs/ngc-pytorch/resnet50/bz2/1n1g/resnet50_b2_amp_1.log"
    said = stand_in_said(log)
    sidecar_path = log.parent / "resnet50_b2_amp_1.cmd.json"
    sidecar = json.loads(sidecar_path.read_text())
    scratch = Path(sidecar["scratch"]["path"])
    assert said["argv"] == ARGV and said["cwd"] == sidecar["ran_in"] == str(scratch)
    assert not scratch.is_relative_to(run_dir) and not scratch.is_relative_to(root) and not scratch.exists()
    assert (said["rank"], said["world"], said["master"]) == (0, 1, None)  # one GPU: no launcher, no process group
    parsed = dle_main_parse(said["argv"])
    assert (parsed.arch, parsed.batch_size, parsed.amp, parsed.static_loss_scale, parsed.memory_format,
            parsed.data_backend, parsed.prof, parsed.epochs, parsed.training_only, parsed.print_freq) == (
        "resnet50", 2, True, 256.0, "nhwc", "syntetic", 100, 1, True, 1)
    # dllogger from the model-code root, put before the PYTHONPATH the program inherited, where it found pynvml
    assert said["dllogger"] == str(root / "dllogger" / "dllogger" / "__init__.py")
    assert said["pynvml"] == str(site / "pynvml.py")
    job = RefJob("torch", "resnet50", "amp", 2, 1, 1, "synthetic")
    assert sidecar["argv"] == build(job, code_root=str(root)).argv == ["python", "./main.py", *ARGV]
    assert "PYTHONPATH" not in sidecar["env"] and sidecar["pythonpath"] == [str(root / "dllogger")]
    # what the program got: no DALI here, so the kit's import placeholder first (DLE's dataloaders.py needs its names)
    placeholders = SCRIPTS / "reference" / "placeholders" / "nvidia.dali"
    assert sidecar["environ"]["PYTHONPATH"] == f"{placeholders}:{root / 'dllogger'}:{site}"
    assert [(e["module"], e["placeholder"]) for e in sidecar["placeholders"]] == [("nvidia.dali", str(placeholders))]
    assert "imports nvidia.dali, which the Python of" in (run_dir / "report.md").read_text()
    assert sidecar["command"].startswith(f"cd {root / CONVNETS} && PYTHONPATH={root / 'dllogger'}"
                                         "${PYTHONPATH:+:$PYTHONPATH} python ./main.py")
    # its checkpoint went to the scratch folder, removed after the run: neither the run nor the checkout holds one
    assert sidecar["scratch"] == {"path": str(scratch), "bytes": 65536,
                                  "removed": [{"path": "checkpoint.pth.tar", "bytes": 65536}]}
    assert [p for p in (*run_dir.rglob("*"), *root.rglob("*")) if p.name.endswith(".pth.tar")] == []
    assert sidecar["data"] == {"mode": "synthetic", "format": None, "path": None, "synthetic": "--data-backend syntetic"}
    key = "ngc-pytorch/resnet50/bz2/1n1g/amp"
    # a stand-in tree is not the pins' files (judged by them: no checkout): it ran with --force
    forced = meta["model_code_forced"]
    assert [(f["host"], f["case"], f["path"], f["head"], f["pin"]) for f in forced] == [
        ("local", key, str(root / CONVNETS), None, pin_of("dle")),
        ("local", key, str(root / "dllogger"), None, DLLOGGER.commit)]
    for f, top in zip(forced, (root / "DeepLearningExamples", root / "dllogger"), strict=True):
        assert f["reason"].startswith(f"{top}: ") and f["reason"].endswith(
            f"; not a checkout: its files differ from the tree of the pin {f['pin'][:7]}; docker/pins.yaml pins "
            f"{f['pin']} (case {key})"), f["reason"]
    assert "PyTorch/Classification/ConvNets/main.py modified" in forced[0]["reason"]

    # the parse: DLLogger's train.total_ips lines by the publisher's method (mean after 9 iterations)
    program = entries["ngc-pytorch"]["figure"]
    harness = entries["torch"]["figure"]
    assert program == pytest.approx(790.033, rel=2e-5) and harness > 0
    report = (run_dir / "report.md").read_text()
    row = (f"| torch resnet50, batch 2/GPU, 1n1g, amp, nhwc, eager, synthetic data | "
           f"torch/resnet50/bz2/1n1g/amp-nhwc | {harness:.2f} | ngc-pytorch/resnet50/bz2/1n1g/amp | "
           f"{program:.2f} | {harness / program:.3f} |")
    assert "### The kit's harness ÷ the published program, same setting" in report
    assert row in report.splitlines(), report
    assert ("What the published programs saved where they ran (checkpoints) went to a scratch folder outside the "
            "run directory, removed after each run: 1 file(s), 65536 bytes (0.1 MiB) in 1 run(s); a bundle never "
            "holds them.") in report.splitlines()

    # kit verify holds the run as made (its command record is the recipe's), and the bundle holds no checkpoint
    from kit.audit import bundle as bd
    from kit.audit.verify import verify

    clock_rule = "program_figure_agrees_with_its_clock"
    packed = bd.make_bundle(run_dir, tmp_path / "run.tar.gz", submitter="Lab", system_name="box")
    with tarfile.open(packed) as tar:
        assert not [n for n in tar.getnames() if n.endswith(".pth.tar")]
    result = verify(packed)
    # ... but the clock of what the stand-in replays: a real bs256 log's lines for this batch-2 case
    # (rule set v9: the figure's mean of its rates against their clock's, and each record beyond the band)
    clock = [v.message for v in result.violations if v.rule == "program_figure_agrees_with_its_clock"]
    assert len(clock) == 2 and re.search(r"train\.total_ips rates its figure counts is 12[78]\.\d+x", clock[0]), clock
    assert "train.total_ips records its figure counts lie beyond 0.75-1.25x their clock" in clock[1], clock
    (v8,) = [v.message for v in verify(packed, rules_version="v8").violations
             if v.rule == "program_figure_agrees_with_its_clock"]
    assert "its train.total_ips rates are 128.0" in v8, v8
    # ... and the stand-in tree is no checkout of the pin: the run was forced, which rule set v6 fails
    (forced,) = [v.message for v in result.violations if v.rule == "program_code_at_pin"]
    assert "it ran forced off the pin (kit bench --force, run.json model_code_forced)" in forced, forced
    assert [v for v in result.violations if v.rule.startswith("program_") and v.rule not in (
        clock_rule, "program_code_at_pin")] == [], result.violations

    # a record made before the packages' folders moved out of the env (they replaced the host's PYTHONPATH) is
    # still the recipe of its time
    old = json.loads(sidecar_path.read_text())
    old["env"] = {**old["env"], "PYTHONPATH": ":".join(old.pop("pythonpath"))}
    sidecar_path.write_text(json.dumps(old))
    result = verify(bd.make_bundle(run_dir, tmp_path / "old.tar.gz", submitter="Lab", system_name="box"))
    assert [v for v in result.violations if v.rule.startswith("program_") and v.rule not in (
        clock_rule, "program_code_at_pin")] == [], result.violations

    # a suite that names ImageNet for the program's case, its synthetic run kept (manifest rebuilt): the record's
    # data is not the case's, which rule set v6 says (v5 held the log's echo to the record alone)
    root = bd.unpack(packed, tmp_path / "data-forged")
    forged_run = next((root / "run").iterdir())
    suite_text = (forged_run / "suite.yaml").read_text()
    line = "  - {framework: torch, model: resnet50, impl: reference}\n"
    assert line in suite_text
    (forged_run / "suite.yaml").write_text(suite_text.replace(line, line.replace("}", ", data: imagenet}")))
    bd.write_manifest(root)
    said = {version: [v.message for v in verify(root, rules_version=version).violations
                      if v.rule == "program_as_published"] for version in ("v5", "v6")}
    assert said == {"v5": [], "v6": ["ngc-pytorch/resnet50/bz2/1n1g/amp (local): the record's data 'synthetic' is not "
                                     "its case's ('imagenet', suite.yaml)"]}, said

    # the program's run copied byte for byte as a second repeat is one run counted twice: rule set v3 says so (v2
    # judged a program's repeats by their command records alone)
    copy = log.with_name("resnet50_b2_amp_2.log")
    shutil.copy(log, copy)
    shutil.copy(sidecar_path, sidecar_path.with_name("resnet50_b2_amp_2.cmd.json"))
    meta = json.loads((run_dir / "run.json").read_text())
    meta["runs"][copy.relative_to(run_dir).as_posix()] = meta["runs"][log.relative_to(run_dir).as_posix()] | {
        "repeat": 2}
    (run_dir / "run.json").write_text(json.dumps(meta, indent=2))
    packed = bd.make_bundle(run_dir, tmp_path / "copied.tar.gz", submitter="Lab", system_name="box")
    said = {version: [v.message for v in verify(packed, rules_version=version).violations
                      if v.rule == "only_declared_repeats" and "byte-identical" in v.message]
            for version in ("v2", "v3")}
    assert said == {"v2": [], "v3": ["ngc-pytorch/resnet50/bz2/1n1g/amp run 2: byte-identical to "
                                     "logs/ngc-pytorch/resnet50/bz2/1n1g/resnet50_b2_amp_1.log (one run counted "
                                     "twice)"]}, said


def test_dle_pytorch_is_refused_where_its_code_is_missing_or_off_the_pin(native_host, tmp_path):
    suite = suites.load_suite(tmp_path / "suite.yaml")
    empty = tmp_path / "empty"
    empty.mkdir()
    _runs, skipped = plan(suite, str(empty))
    assert [c.key for c, _ in skipped] == ["ngc-pytorch/resnet50/bz2/1n1g/amp"]
    assert skipped[0][1] == (
        f"NVIDIA DeepLearningExamples ResNet50 v1.5 (PyTorch): model code not found at {empty / CONVNETS} (a checkout "
        f"of https://github.com/NVIDIA/DeepLearningExamples at {pin_of('dle')}; set KIT_MODEL_CODE to the root of "
        "the pinned checkouts, made by `python3 bench/prepare_models.py --dest ROOT torch/resnet50`; the images "
        "have them under /opt/models)")

    heads = {}
    for folder in ("DeepLearningExamples", "dllogger"):  # both checkouts at a commit of their own, not the pins
        where = native_host / folder
        git = ["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(["git", "init", "-q", str(where)], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", "not the pin"], check=True)
        heads[folder] = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                                       check=True).stdout.strip()
    runs, skipped = plan(suite, str(native_host))
    assert [r.case.impl for r in runs] == ["harness"] and [c.key for c, _ in skipped] == [
        "ngc-pytorch/resnet50/bz2/1n1g/amp"]
    case = "(case ngc-pytorch/resnet50/bz2/1n1g/amp)"
    assert skipped[0][1] == (
        f"{native_host / 'DeepLearningExamples'}: the pin is not in the checkout; HEAD "
        f"{heads['DeepLearningExamples'][:7]} is not the pin; docker/pins.yaml pins {pin_of('dle')} {case}; "
        f"{native_host / 'dllogger'}: the pin is not in the checkout; HEAD {heads['dllogger'][:7]} is not the pin; "
        f"docker/pins.yaml pins {DLLOGGER.commit} {case}; `kit bench --force` runs it (recorded)")
    runs, skipped = plan(suite, str(native_host), force=True)
    assert len(runs) == 2 and skipped == []


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the checkout to another user (chown) needs root; CI runs as "
                                              "root, so this runs there")
def test_a_checkout_another_user_owns_is_read_at_its_commit(native_host, tmp_path):
    """git refuses a repository another user owns unless safe.directory names its top folder (the work tree's root,
    not DLE's ConvNets folder inside it): the plan, a host's needs script and the launcher's record each read the
    commit checked out there (a shared model-code root, owned by whoever prepared it)."""
    heads = {}
    for folder in ("DeepLearningExamples", "dllogger"):
        where = native_host / folder
        git = ["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(["git", "init", "-q", str(where)], check=True)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", "not the pin"], check=True)
        heads[folder] = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True,
                                       check=True).stdout.strip()
    for folder, dirs, files in os.walk(native_host):  # another user's tree: nobody's
        for name in [".", *dirs, *files]:
            os.chown(Path(folder) / name, NOBODY, NOBODY, follow_symlinks=False)
    convnets, top = native_host / CONVNETS, native_host / "DeepLearningExamples"
    refused = subprocess.run(["git", "-C", str(convnets), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert refused.returncode != 0 and "dubious ownership" in refused.stderr  # git >= 2.35.2, without safe.directory
    key = "ngc-pytorch/resnet50/bz2/1n1g/amp"

    suite = suites.load_suite(tmp_path / "suite.yaml")
    _runs, skipped = plan(suite, str(native_host))
    assert [c.key for c, _ in skipped] == [key]
    assert skipped[0][1].startswith(f"{top}: the pin is not in the checkout; HEAD {heads['DeepLearningExamples'][:7]} "
                                    f"is not the pin; docker/pins.yaml pins {pin_of('dle')} (case {key}); "
                                    f"{native_host / 'dllogger'}: the pin is not in the checkout; HEAD "
                                    f"{heads['dllogger'][:7]} ")
    assert code_state.state(str(convnets), str(top))["commit"] == heads["DeepLearningExamples"]

    case = next(c for c in suite.cases if c.impl == "reference")  # an SSH or Slurm host's check, run by sh
    out = subprocess.run(["sh", "-c", needs_script([(key, case)], None, str(native_host))], capture_output=True,
                         text=True, check=True).stdout
    assert out.splitlines()[0] == f"checkout\t{key}\t{convnets}\t{top}"
    assert f"code\t{key}\thead\t+{heads['DeepLearningExamples']}" in out.splitlines()
    assert read_needs([(key, case)], out) == ([], [{
        "case": key, "path": str(convnets), "head": heads["DeepLearningExamples"], "pin": pin_of("dle"),
        "reason": f"{top}: the pin is not in the checkout; HEAD {heads['DeepLearningExamples'][:7]} is not the pin; "
                  f"docker/pins.yaml pins {pin_of('dle')} (case {key})"}])

    runs = tmp_path / "runs"  # the launcher's record of the run (forced off the pin)
    (tmp_path / "program.yaml").write_text("".join(line for line in SUITE.splitlines(keepends=True)
                                                   if "impl: harness" not in line))
    assert main(["bench", "--suite", str(tmp_path / "program.yaml"), "--runs-dir", str(runs), "--force"]) == 0
    (sidecar,) = runs.glob("*/logs/ngc-pytorch/**/*.cmd.json")
    recorded = json.loads(sidecar.read_text())
    assert recorded["model_code_commit"] == recorded["model_code_state"]["commit"] == heads["DeepLearningExamples"]


@pytest.mark.parametrize(("line", "message"), [
    ("precision: bf16", "impl: precision 'bf16': NVIDIA runs fp32, amp"),
    ("precision: tf32", "impl: precision 'tf32': NVIDIA runs fp32, amp"),
    ("layout: nchw", "layout: layout is the published program's own (impl: reference); it applies to harness "
                     "cases only"),
])
def test_a_precision_or_layout_dle_does_not_take_is_refused_at_its_line(tmp_path, line, message):
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE.replace("impl: reference}", f"impl: reference, {line}}}"))
    with pytest.raises(suites.ConfigError) as refused:
        suites.load_suite(path)
    assert str(refused.value) == f"{path}:7: {message}"


def test_dle_pytorch_layout_is_its_own_synthetic_benchmarks_under_amp():
    """NHWC where DLE's configs.yml runs it (AMP, its synthetic benchmark); the Perf runs' recorded commands (ImageNet)
    keep main.py's default NCHW; placed before the data path on every launcher."""
    def argv(precision: str, data: str, gpus: int = 1) -> list[str]:
        return build(RefJob("torch", "resnet50", precision, 256, gpus, 1, data)).argv

    assert layout_and_mode(RefJob("torch", "resnet50", "amp", 256, 1, 1, "synthetic")) == ("nhwc", "eager")
    assert layout_and_mode(RefJob("torch", "resnet50", "amp", 256, 1, 1, "imagenet")) == ("nchw", "eager")
    assert layout_and_mode(RefJob("torch", "resnet50", "fp32", 256, 1, 1, "synthetic")) == ("nchw", "eager")
    assert layout_and_mode(RefJob("paddle", "resnet50", "amp", 256, 1, 1)) == ("nhwc", "static")  # its config's
    assert "--memory-format" not in argv("amp", "imagenet") + argv("fp32", "synthetic")
    eight = argv("amp", "synthetic", 8)
    assert eight[:5] == ["python", "./multiproc.py", "--nproc_per_node", "8", "./main.py"]
    assert eight[-5:] == ["--memory-format", "nhwc", "--data-backend", "syntetic", "/imagenet"]
    assert dle_main_parse(eight[5:]).memory_format == "nhwc"


def test_the_ratio_pairs_only_cases_of_the_same_setting(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(
        "schema_version: 1\nname: s\nhardware: gpu\ndefaults: {precision: amp, data: synthetic, repeats: 1}\ncases:\n"
        "  - {framework: torch, model: resnet50, impl: harness, batch_size: 256, layout: [nchw, nhwc]}\n"
        "  - {framework: torch, model: resnet50, impl: harness, batch_size: 128, layout: nhwc}\n"
        "  - {framework: torch, model: resnet50, impl: harness, batch_size: 256, layout: nhwc, mode: compiled}\n"
        "  - {framework: torch, model: resnet50, impl: reference, batch_size: [256, 128]}\n"
        "  - {framework: paddle, model: resnet50, impl: harness, batch_size: 256, layout: nhwc}\n"
        "  - {framework: paddle, model: resnet50, impl: reference, batch_size: 256, data: imagenet}\n")
    suite = suites.load_suite(path)
    figures = {"torch/amp": 2600.0, "torch/amp-nhwc": 4600.0, "torch/amp-nhwc-compiled": 5400.0,
               "ngc-pytorch/amp": 4000.0, "paddle/amp-nhwc": 3000.0, "paddleclas/amp": 3100.0}
    groups = [NS(key=GroupKey(fw, "resnet50", 256, tag), cases=[NS(name="1n1g", median=m)])
              for fw, tag, m in ((k.split("/")[0], k.split("/")[1], v) for k, v in figures.items())]
    groups.append(NS(key=GroupKey("ngc-pytorch", "resnet50", 128, "amp"), cases=[NS(name="1n1g", median=2000.0)]))
    text = program_ratio_section(NS(groups=groups), suite, ran_as)
    rows = [line for line in text.splitlines() if line.startswith(("| torch ", "| paddle "))]
    # batch 128's harness case has no figure; nchw and compiled are other work; PaddleClas's layout is its config's
    assert rows == ["| torch resnet50, batch 256/GPU, 1n1g, amp, nhwc, eager, synthetic data | "
                    "torch/resnet50/bz256/1n1g/amp-nhwc | 4600.00 | ngc-pytorch/resnet50/bz256/1n1g/amp | 4000.00 | "
                    "1.150 |"]
    refused = [line[2:].split(": ", 1) for line in text.splitlines() if line.startswith("- ")]
    assert [key for key, _why in refused] == ["ngc-pytorch/resnet50/bz128/1n1g/amp (2000.00)",
                                              "paddleclas/resnet50/bz256/1n1g/amp (3100.00)"]
    assert refused[0][1].endswith("the nearest, torch/resnet50/bz256/1n1g/amp-nhwc, differs in batch size 256 "
                                  "(program: 128)")
    assert refused[1][1].endswith("the nearest, paddle/resnet50/bz256/1n1g/amp-nhwc, differs in data synthetic "
                                  "(program: imagenet), mode eager (program: static)")
    assert program_ratio_section(NS(groups=groups[:1]), suite, ran_as) == ""


def test_prepare_models_keeps_what_is_there_and_names_what_it_cannot_use(tmp_path):
    """bench/prepare_models.py overwrites nothing: a checkout off its pin is an error naming both commits; a --from key
    the programs do not need is named with the keys they do (neither reaches the network)."""
    tool = [sys.executable, str(Path(__file__).resolve().parent.parent / "bench" / "prepare_models.py"),
            "--dest", str(tmp_path / "models")]
    unknown = subprocess.run([*tool, "--from", "dl=/x"], capture_output=True, text=True)
    assert unknown.returncode == 1
    assert unknown.stderr.strip() == "prepare_models: --from dl: not needed by torch/resnet50 (keys: dle, dllogger)"
    where = tmp_path / "models" / "DeepLearningExamples"
    git = ["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(where)], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "not the pin"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    kept = subprocess.run(tool, capture_output=True, text=True)
    assert kept.returncode == 1 and kept.stderr.strip() == (
        f"prepare_models: {where} exists at {head}, the pin is {pin_of('dle')}: remove it or check the pin out there")
