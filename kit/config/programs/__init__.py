"""PURE: the published programs a suite may name (`impl: reference`): one module each beside this one, registered
in _ALL below, holding its catalogue row and behaviour (kit.config.programs.base.Program).

    implementation("torch", "resnet50")                  # Impl; ReferenceError names the combinations that exist
    program("ngc-pytorch").recipe(job, cluster, ...)     # its behaviour, by the framework folder of its logs
    check(RefJob("paddle", "arcface", "amp", 128, 8, 1))  # ReferenceError: DLPerf published FP32 runs only

How each program is launched as a whole (paths, scratch, the record) is kit.config.reference; this catalogue is
what the suites are checked against when they load, so a case no published program covers is an error at
file:line:key. Adding a program: a module here with a Program subclass, listed in _ALL; its log format
(kit/results/parsers); its checkout pinned in docker/pins.yaml model_code (else Impl(pinned=False): recipe only).
"""

from __future__ import annotations

from kit.config.programs import (
    dle_bert_pytorch,
    dle_mxnet,
    dle_pytorch,
    dle_tensorflow,
    dle_transformer_pytorch,
    fleetx,
    paddleclas,
    paddlenlp_bert,
    paddleseg_hrnetw18,
    plsc,
)
from kit.config.programs.base import (
    CODE_ROOT,
    FLUID_REMOVED,
    IMPLS,
    PRECISIONS,
    SAVED_PROGRAMS_DIR,
    SCRIPTS_DIR,
    STATIC,
    XLA,
    Cluster,
    Impl,
    Package,
    Program,
    RanAs,
    ReferenceError,
    RefJob,
    SavedProgram,
    WorkCopy,
    default_data,
)
from kit.config.programs.dle_bert_pytorch import BERT_SEQUENCES_PER_STEP
from kit.config.programs.dle_pytorch import DLLOGGER
from kit.config.programs.plsc import PLSC_PATCH

__all__ = [
    "BERT_SEQUENCES_PER_STEP", "BY_NAME", "CODE_DIRS", "CODE_ROOT", "DLLOGGER", "FLUID_REMOVED", "IMPLS",
    "PLSC_PATCH", "PRECISIONS", "PROGRAMS", "SAVED_PROGRAMS_DIR", "SCRIPTS_DIR", "STATIC", "UNPINNED_CODE_DIRS",
    "XLA", "Cluster", "Impl", "Package", "Program", "RanAs", "RefJob", "ReferenceError", "SavedProgram", "WorkCopy",
    "check", "combinations", "default_data", "implementation", "layout_and_mode", "program", "ran_as",
]

_ALL: list[Program] = [
    paddleclas.PROGRAM,
    fleetx.PROGRAM,
    plsc.PROGRAM,
    dle_pytorch.PROGRAM,
    dle_tensorflow.PROGRAM,
    dle_mxnet.PROGRAM,
    # PaddlePaddle/Perf's other models (Bert/, HRNetW18/, Transformer/): the commands their logs record; PaddleNLP's
    # Transformer sets batch and precision by editing its YAML (not in its command), NGC TF1 BERT and mmsegmentation
    # record no command: no programs for those
    paddlenlp_bert.PROGRAM,
    paddleseg_hrnetw18.PROGRAM,
    dle_bert_pytorch.PROGRAM,
    dle_transformer_pytorch.PROGRAM,
]
PROGRAMS: dict[str, Program] = {p.impl.name: p for p in _ALL}  # by the framework folder of its logs
IMPLS.update({(p.impl.framework, p.impl.model): p.impl for p in _ALL})
BY_NAME: dict[str, Impl] = {name: p.impl for name, p in PROGRAMS.items()}
# checkouts by docker/pins.yaml model_code key: those pinned (images check them out), and those not yet (their
# recipes are kept and checked against the recorded commands, their logs re-derived, but the kit refuses to run them)
CODE_DIRS = {i.code: i.checkout for i in BY_NAME.values() if i.pinned}
UNPINNED_CODE_DIRS = {i.code: i.checkout for i in BY_NAME.values() if not i.pinned}


def combinations() -> list[str]:
    return [f"{fw}/{model} ({impl.name})" for (fw, model), impl in IMPLS.items()]


def implementation(framework: str, model: str) -> Impl:
    impl = IMPLS.get((framework, model))
    if impl is None:
        raise ReferenceError(f"no reference implementation for {framework}/{model}; there are: "
                             + ", ".join(combinations()))
    return impl


def program(impl: Impl | str) -> Program:
    """The program of a catalogue row, or of the framework folder of its logs."""
    return PROGRAMS[impl if isinstance(impl, str) else impl.name]


def ran_as(job: RefJob) -> RanAs:
    """What the job's program trains in (RanAs), as its module reads it from its recipe and seed reports."""
    return program(implementation(job.framework, job.model)).ran_as(job)


def layout_and_mode(job: RefJob) -> tuple[str, str] | None:
    """(layout, mode) the job's program trains in where the kit knows both (ran_as); None where its own config or
    code decides one of them."""
    ran = ran_as(job)
    return (ran.layout, ran.mode) if ran.known else None


def check(job: RefJob, recipe_only: bool = False) -> None:
    """ReferenceError when no published program covers the job (its placement aside). recipe_only: the command
    is wanted, not a run (a program whose code no image checks out has a recipe all the same)."""
    impl = implementation(job.framework, job.model)
    prog = program(impl)
    if not impl.pinned and not recipe_only:
        raise ReferenceError(f"{impl.title}: {impl.checkout} is not pinned in docker/pins.yaml (model_code), so no "
                             "image checks it out and the kit cannot run it yet; its recipe and its publisher's "
                             "method are kept (kit.config.programs, kit/claims/perf-models.yaml)")
    if prog.one_node_only and job.nodes > 1:
        raise ReferenceError(f"{impl.title}: one node only ({prog.one_node_only})")
    if job.precision not in PRECISIONS + impl.modes:
        raise ReferenceError(f"precision {job.precision!r}: {impl.short} runs {', '.join(PRECISIONS + impl.modes)}")
    if job.batch_size < 1 or job.gpus_per_node < 1 or job.nodes < 1:
        raise ReferenceError(f"batch, GPUs per node and nodes must be >= 1 ({job})")
    prog.check(job)
    if job.data == "imagenet" and impl.data_format is None:
        raise ReferenceError(f"{impl.title} reads no dataset ({impl.synthetic}): data: synthetic")
    if job.data == "synthetic" and impl.synthetic is None:
        raise ReferenceError(f"{impl.title} has no synthetic-data mode (data: imagenet reads "
                             f"<data_dir>/{impl.data_format or '...'}/); programs with one: "
                             + ", ".join(i.name for i in IMPLS.values() if i.synthetic))
