"""Plan: which runs (case x repeat) go where — this host, the first n hosts of an inventory — and which cannot.

A case whose program cannot run in the image it would run in (docker/pins.yaml: a Paddle without paddle.fluid for a
program that imports it, an image that does not check out its code) is refused here, with the reason.

Repeats are interleaved (repeat 1 of every case, then repeat 2, ...) so slow drift of the machine spreads over
all cases alike. A publisher's program (impl: reference) runs on this host only where its checkout is found
under the model-code root (KIT_MODEL_CODE, else the images' /opt/models).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from kit.config import programs, reference, settings
from kit.config.cases import Case, Suite
from kit.config.programs import SAVED_PROGRAMS_DIR, Impl
from kit.config.runtimes import runtime
from kit.core.catalogue import load
from kit.core.layout import run_folder
from kit.images.spec import current_pins, pin_of
from kit.run.command import SCRIPTS

code_state = load("code_state", "reference")  # whether a checkout is at its pin: ONE implementation, beside launch.py


@dataclass(frozen=True)
class PlannedRun:
    case: Case
    repeat: int

    @property
    def log_rel(self) -> Path:
        return Path("logs") / self.case.log_path(self.repeat)

    @property
    def folder(self) -> PurePosixPath:
        """The run's own folder under launcher/ and hosts/<host>/ (kit.core.layout.run_folder)."""
        return run_folder(self.case.log_path(self.repeat))

    @property
    def label(self) -> str:
        return f"{self.case.key} #{self.repeat}"


def model_code_root() -> str:
    """This machine's root of the publishers' checkouts: KIT_MODEL_CODE (kit.config.settings), else the images'."""
    return settings.resolve().model_code or reference.CODE_ROOT


def code_dir(case: Case, root: str) -> str:
    impl = reference.implementation(case.framework, case.model)
    return "/".join(p for p in (reference.checkout_dir(root, impl), impl.subdir) if p)


def missing_code(case: Case, root: str) -> str | None:
    """Why this host cannot run the case's program (its checkout is absent), or None."""
    where = code_dir(case, root)
    if Path(where).is_dir():
        return None
    impl = reference.implementation(case.framework, case.model)
    pin = current_pins().model_code[impl.code]
    return (f"{impl.title}: model code not found at {where} (a checkout of {pin.repo} at {pin.commit}; set "
            f"KIT_MODEL_CODE to the root of the pinned checkouts, made by `python3 bench/prepare_models.py "
            f"--dest ROOT {case.framework}/{case.model}`; the images have them under {reference.CODE_ROOT})")


def saved_program_records(case: Case, root: str) -> list[tuple[str, str]]:
    """(name, where its staged record is) of each saved program the case's program loads (Impl.saved_programs)."""
    impl = reference.implementation(case.framework, case.model)
    return [(s.name, f"{root.rstrip('/')}/{SAVED_PROGRAMS_DIR}/{s.into}/{s.name}.json") for s in impl.saved_programs]


def missing_saved(case: Case, root: str) -> str | None:
    """Why the case's program cannot run from this root (a saved program it loads is not staged there), or None."""
    absent = [(name, where) for name, where in saved_program_records(case, root) if not Path(where).is_file()]
    if not absent:
        return None
    impl = reference.implementation(case.framework, case.model)
    return saved_program_advice(impl, absent)


def saved_program_advice(impl: Impl, absent: list[tuple[str, str]]) -> str:
    urls = {p.name: p.url for p in current_pins().model_code[impl.code].saved_programs}
    return "; ".join(f"{impl.title}: its saved program {name} is not staged ({where} is missing; the program would "
                     f"download it from {urls.get(name, 'the web')} while it starts): stage it with `python3 "
                     f"bench/prepare_models.py --saved-program {name}=ARCHIVE`" for name, where in absent)


def checkouts(case: Case, root: str) -> list[tuple[str, str, str, str]]:
    """(path, its checkout's top folder, pinned commit, listing key) of each checkout the case's program runs from
    here: its code, and the packages beside it (Impl.packages) where they are (one missing here may be installed in
    the host's Python instead)."""
    impl = reference.implementation(case.framework, case.model)
    found = [(code_dir(case, root), reference.checkout_dir(root, impl), pinned_commit(case), impl.code)]
    for package in impl.packages:
        where = f"{root.rstrip('/')}/{package.folder}"
        if Path(where).is_dir():
            found.append((where, where, package.commit, package.folder))
    return found


def pinned_listing(key: str):
    """The pinned tree's files of a model_code key or package folder (scripts/reference/trees/<key>.txt), which a
    copy that is no checkout of its own is judged by; None where the kit has none."""
    path = SCRIPTS / reference.listing_file(key)
    return code_state.read_listing(path.read_text()) if path.is_file() else None


def pinned_commit(case: Case) -> str:
    return pin_of(reference.implementation(case.framework, case.model).code)


def code_mismatch(case: Case, where: str, top: str, st: dict, pin: str | None = None) -> dict | None:
    """None when the checkout `top` that the program runs from at `where` is at the pinned commit (`pin`, else the
    case's code's) in full (scripts/reference/code_state.py: HEAD, index, work tree, untracked files); else what
    differs, a record for run.json (model_code_forced) whose reason names the checkout and each difference."""
    pin = pin or pinned_commit(case)
    if not (differs := code_state.differences(st, pin, where, top)):
        return None
    return {"case": case.key, "path": where, "head": st.get("commit"), "pin": pin,
            "reason": f"{top}: {'; '.join(differs)}; docker/pins.yaml pins {pin} (case {case.key})"}


def describe_mismatch(m: dict) -> str:
    return m["reason"]


def local_mismatches(suite: Suite, model_code: str) -> list[dict]:
    """This machine's checkouts of the suite's 1-node programs that are not at their pinned commit in full."""
    found = []
    for case in suite.cases:
        if case.impl == "reference" and case.nodes == 1 and not missing_code(case, model_code):
            for where, top, pin, key in checkouts(case, model_code):
                st = code_state.state(where, top, pin, pinned_listing(key))
                if differs := code_mismatch(case, where, top, st, pin):
                    found.append(differs)
    return found


def image_of(case: Case, suite: Suite):
    """The docker/pins.yaml image the case runs in (its `image:`, else its framework's image of the suite's
    generation), or None where there is none (a suite not named after a generation, without `image:`)."""
    try:
        return current_pins().for_case(case.framework, suite.hardware, suite.name, case.image)
    except KeyError:
        return None


def _release(version: str) -> tuple[int, ...] | None:
    """'2.6.2' -> (2, 6, 2); None for what is not a dotted release number."""
    parts = version.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def image_refusal(case: Case, suite: Suite) -> str | None:
    """Why the case's program cannot run in its image, or None (harness cases, programs the image can run, cases
    with no pinned image). Checked at plan time so that `--dry-run` shows it and no run starts to fail."""
    if case.impl != "reference":
        return _loader_refusal(case, suite)
    spec = image_of(case, suite)
    if spec is None or spec.name == "cpu":
        return None
    impl = programs.implementation(case.framework, case.model)
    paddle = spec.versions.get("paddle")
    release = _release(paddle) if paddle else None
    if impl.needs_fluid and release is not None and release[:2] >= impl.fluid_gone:
        gone = ".".join(map(str, impl.fluid_gone))
        return (f"{impl.short} imports paddle.fluid APIs that Paddle {gone} removed; image {spec.key} pins Paddle "
                f"{paddle}, which has none of them")
    if case.precision in impl.needs_dali and not spec.versions.get("dali"):
        return f"{impl.short} {case.precision} reads its data with DALI; {_no_dali(spec)}"
    if spec.model_code and impl.code not in {m.name for m in spec.model_code}:
        return (f"{impl.short}: image {spec.key} does not check out its code ({impl.code}; it has "
                f"{', '.join(m.name for m in spec.model_code)})")
    return None


def _no_dali(spec) -> str:
    with_dali = [f"{s.key} (DALI {s.versions['dali']})" for s in current_pins().images
                 if s.name == spec.name and s.versions.get("dali")]
    return f"image {spec.key} pins no DALI (image: {', '.join(with_dali) or 'none pins one'})"


def _loader_refusal(case: Case, suite: Suite) -> str | None:
    """A harness case with loader dali needs an image that pins DALI (a GPU suite's image of its generation)."""
    if case.loader != "dali":
        return None
    spec = image_of(case, suite)
    if spec is None:
        return None  # native hosts: the harness says whether DALI imports
    if not spec.versions.get("dali"):
        return f"loader dali: the harness reads JPEGs with NVIDIA DALI; {_no_dali(spec)}"
    return None


def plan(suite: Suite, model_code: str, force: bool = False) -> tuple[list[PlannedRun], list[tuple[Case, str]]]:
    """Runs this host can do (interleaved repeats) and the cases it cannot, with the reason. A program whose
    checkout is not at the pinned commit runs only with `force` (kit.run.bench records it)."""
    skipped: list[tuple[Case, str]] = []
    differs: dict[str, list[dict]] = {}
    for m in local_mismatches(suite, model_code) if not force else []:
        differs.setdefault(m["case"], []).append(m)
    for case in suite.cases:
        if why := image_refusal(case, suite):
            skipped.append((case, why))
        elif case.nodes > 1:
            skipped.append((case, f"{case.nodes} nodes: run it with `fab -H ... run_multinode`"))
        elif case.impl == "reference" and (why := missing_code(case, model_code) or missing_saved(case, model_code)):
            skipped.append((case, why))
        elif case.key in differs:
            skipped.append((case, "; ".join(describe_mismatch(m) for m in differs[case.key])
                            + "; `kit bench --force` runs it (recorded)"))
    ok = {id(c) for c in suite.cases} - {id(c) for c, _ in skipped}
    return plan_for_nodes(suite, 1, lambda c: id(c) in ok), skipped


def plan_for_nodes(suite: Suite, nodes: int, accept: Callable[[Case], bool] | None = None) -> list[PlannedRun]:
    """The runs of cases on exactly `nodes` hosts (harness and published programs, or those `accept` takes),
    repeats interleaved."""
    take = accept or (lambda c: True)
    cases = [c for c in suite.cases if c.nodes == nodes and take(c)]
    most = max((c.repeats for c in cases), default=0)
    return [PlannedRun(c, r) for r in range(1, most + 1) for c in cases if r <= c.repeats]


def unfit(case: Case, hosts: list, hardware: str, suite: Suite | None = None) -> str | None:
    """Why these hosts cannot run the case as planned (its program cannot run in its image, given the suite;
    fewer GPUs than it starts per node, by the inventory's `gpus:`; TensorFlow's mpirun across container hosts), or
    None. A CPU suite's gpus_per_node counts processes."""
    if suite is not None and (why := image_refusal(case, suite)):
        return why
    boxed = [h for h in hosts if runtime(h.runtime)]
    if case.impl == "reference" and case.framework == "tensorflow" and case.nodes > 1 and boxed:
        return (f"one mpirun over {case.nodes} hosts cannot start ranks in the other hosts' containers yet; "
                f"{', '.join(h.name for h in boxed)} {'has' if len(boxed) == 1 else 'have'} runtime "
                f"{', '.join(sorted({h.runtime for h in boxed}))} (run it on native hosts)")
    short = [h for h in hosts if hardware == "gpu" and h.gpus < case.gpus_per_node]
    if not short:
        return None
    have = ", ".join(f"{h.name} has {h.gpus}" for h in short)
    return f"needs {case.gpus_per_node} GPU(s) on each of its {case.nodes} host(s); {have} (inventory gpus:)"


def cluster_plan(suite: Suite, host_names: list[str]) -> tuple[list[tuple[list[str], int]], list[str]]:
    """(hosts, nodes) groups to run: single-node cases on the first host, n-node cases on the first n hosts."""
    wanted = sorted({c.nodes for c in suite.cases})
    groups, skipped = [], []
    for nodes in wanted:
        if nodes <= len(host_names):
            groups.append((host_names[:nodes], nodes))
        else:
            skipped.append(f"{nodes}-node cases: the inventory has {len(host_names)} host(s)")
    return groups, skipped
