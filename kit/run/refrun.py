"""Running the published programs (kit.reference) through the kit's runners: where the model code is, the
launcher line that records <log stem>.cmd.json beside the log, and both figures from such a log.

    runs/<id>/logs/<impl>/<model>/bz<B>/<N>n<G>g/<model>_b<B>_<precision>_<repeat>.log        the program's output
    runs/<id>/logs/<impl>/<model>/bz<B>/<N>n<G>g/<model>_b<B>_<precision>_<repeat>.cmd.json   argv, cwd, env
        (secret-looking names redacted), publisher's and kit's methods, model code commit, patch sha256

Model code: the pinned images carry it under kit.reference.CODE_ROOT; on a host it is the root given by
KIT_MODEL_CODE (or a host's `model_code` in hosts.yaml for multi-node jobs), holding the checkouts
named as in the images (PaddleClas, PLSC, FleetX, DeepLearningExamples).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from kit import REPO_ROOT
from kit.config.suites import Case
from kit.results.extract import Method, compute_figure
from kit.results.parsers import parse_log
from kit.run import reference

SCRIPTS = REPO_ROOT / "scripts"
LAUNCHER = "reference/launch.py"  # relative to scripts/
# what a host needs from scripts/ to run every reference case (stage these, or mount scripts/)
SCRIPT_FILES = (LAUNCHER, reference.PLSC_PATCH, "plsc/train.py", "fleetx/vgg16_benchmark.py")
SIDECAR_SUFFIX = ".cmd.json"


def model_code_root(env: dict[str, str] | os._Environ = os.environ) -> str:
    return env.get("KIT_MODEL_CODE") or reference.CODE_ROOT


def code_dir(case: Case, root: str) -> str:
    impl = reference.implementation(case.framework, case.model)
    return "/".join(p for p in (root.rstrip("/"), reference.CODE_DIRS[impl.code], impl.subdir) if p)


def missing_code(case: Case, root: str) -> str | None:
    """Why this host cannot run the case's program (its checkout is absent), or None."""
    where = code_dir(case, root)
    if Path(where).is_dir():
        return None
    impl = reference.implementation(case.framework, case.model)
    return (f"{impl.title}: model code not found at {where} (set KIT_MODEL_CODE to the root of the pinned "
            f"checkouts; the images have them under {reference.CODE_ROOT})")


def sidecar_path(log: Path) -> Path:
    return log.with_name(log.name.removesuffix(".log") + SIDECAR_SUFFIX)


def launch_argv(python: str, scripts_dir: str, cmd: reference.RefCommand, job: reference.RefJob,
                cluster: reference.Cluster, record: str) -> list[str]:
    """The line that records the run, prepares a patched copy where needed and becomes the program."""
    meta = reference.record(cmd, job, cluster)
    argv = [python, f"{scripts_dir}/{LAUNCHER}", "--record", record, "--meta", json.dumps(meta, sort_keys=True),
            "--cwd", cmd.cwd]
    if cmd.work_copy:
        argv += ["--work-copy", cmd.work_copy]
    if cmd.patch:
        argv += ["--patch", f"{scripts_dir}/{cmd.patch}"]
    for name in cmd.add:
        argv += ["--add", f"{scripts_dir}/{name}"]
    return [*argv, "--", *cmd.argv]


def reference_figures(log: Path) -> dict:
    """{'kit': samples/s by the kit's method, 'publisher': by the publisher's (None where none is published)}
    from a reference run's log and its sidecar; ParseError/MethodError when the log gives no figure."""
    meta = json.loads(sidecar_path(log).read_text())
    parsed = parse_log(log, meta["log_format"])
    kit = compute_figure(parsed, Method.from_mapping(meta["kit_method"])).value
    pub = meta.get("publisher_method")
    return {"kit": kit, "publisher": compute_figure(parsed, Method.from_mapping(pub)).value if pub else None,
            "impl": meta["impl"]}
