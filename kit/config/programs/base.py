"""PURE: what every published program is (its catalogue row, Impl) and does (Program: recipe, reductions, synthetic
mode, outputs, checks, how it ran), and the job and placement types its recipe takes. One module per program beside
this one subclasses Program; kit.config.programs registers them."""

from __future__ import annotations

from dataclasses import dataclass

from kit.results.extract import Method

CODE_ROOT = "/opt/models"  # kit.images.spec clones docker/pins.yaml model_code here (checked by a test)
SCRIPTS_DIR = "/opt/kit/scripts"  # the kit's scripts/ inside a container (mounted by kit bench)
PRECISIONS = ("fp32", "amp")  # every program; Impl.modes adds a program's own (FleetX: auto)
FLUID_REMOVED = (2, 6)  # paddle.fluid is gone from Paddle 2.6 on (scripts/fleetx/vgg16_benchmark.py says the same)
STATIC = "static"  # a static graph built and run by the framework's executor (Paddle's static mode, fluid)
XLA = "xla"  # TensorFlow 1's graph, compiled by XLA
MPI_LAUNCHERS = (["mpirun"], ["mpiexec"])
SAVED_PROGRAMS_DIR = "saved-programs"  # under a model-code root: what programs download at run time, staged


# (framework, model) -> Impl of every registered program: filled by kit.config.programs from its list of modules
IMPLS: dict[tuple[str, str], Impl] = {}


class ReferenceError(ValueError):
    """A case no published program covers (unknown combination, precision or placement)."""


@dataclass(frozen=True)
class Package:
    """A small Python package a program imports, checked out beside its code (<model-code root>/<folder>) and put on
    its PYTHONPATH: a native host installs nothing, and needs no network when the program runs."""

    folder: str
    repo: str
    commit: str
    source: str  # where the program names it


@dataclass(frozen=True)
class SavedProgram:
    """What a program's code downloads at run time unless it finds it where it looks (FleetX's VGG16 program): the
    kit stages it beforehand under <model-code root>/saved-programs/<into>/<name>/ from an archive checked by sha256
    (docker/pins.yaml model_code.<code>.saved_programs; bench/prepare_models.py --saved-program), and the program is
    pointed there."""

    name: str
    into: str  # the folder under site-packages where the program looks for it
    reads: tuple[str, ...]  # the files of it the program always opens


@dataclass(frozen=True)
class Impl:
    name: str  # the framework folder of its logs: logs/<name>/<model>/bz<B>/<N>n<G>g/
    framework: str  # the suite's framework (its image)
    model: str
    title: str
    code: str  # docker/pins.yaml model_code key
    checkout: str  # its checkout's folder under a model-code root
    subdir: str  # inside the checkout
    log_format: str  # kit.results.parsers format name
    source: str  # where the recipe was read
    pinned: bool = True  # docker/pins.yaml pins `code` (model_code): images check it out and the kit may run it
    data_format: str | None = None  # the format it reads (data_prep/convert.py --to), under <data_dir>/<format>/
    synthetic: str | None = None  # its own synthetic-data mode, as the program spells it; None: it has none
    tagged_output: bool = False  # its ranks' output goes through Open MPI's tagging (mpirun, horovodrun)
    needs_fluid: bool = False  # it imports paddle.fluid, which Paddle >= fluid_gone no longer has (kit.run.plan)
    fluid_gone: tuple[int, int] = FLUID_REMOVED  # the first Paddle release without the fluid modules it imports
    modes: tuple[str, ...] = ()  # precisions beyond fp32/amp that name a mode of this program
    needs_dali: tuple[str, ...] = ()  # the precisions (modes) in which it reads its data with DALI
    packages: tuple[Package, ...] = ()  # checked out beside its code, on its PYTHONPATH (kit.config.reference)
    # modules it imports when it loads but never calls in the kit's modes: where its host lacks one, an import
    # placeholder stands in, recorded (scripts/reference/placeholders)
    placeholders: tuple[str, ...] = ()
    # what it saves where it runs besides the outputs the kit collects (its checkpoints): in its scratch folder these
    # names are never links into the checkout, so an earlier run's leftover there is not written through
    saves: tuple[str, ...] = ()
    saved_programs: tuple[SavedProgram, ...] = ()

    @property
    def short(self) -> str:
        """Its name in one word, for messages: PLSC, FleetX, PaddleClas, NVIDIA ..."""
        return self.title.split()[0].rstrip(",")


def default_data(framework: str, model: str) -> str:
    """What a program reads unless a case says otherwise: the dataset it was published on, or its own samples
    where it reads none (PLSC)."""
    impl = IMPLS.get((framework, model))
    return "synthetic" if impl and impl.data_format is None else "imagenet"


@dataclass(frozen=True)
class RefJob:
    framework: str
    model: str
    precision: str
    batch_size: int  # per GPU
    gpus_per_node: int
    nodes: int = 1
    data: str | None = None  # imagenet | synthetic (Impl.synthetic); None: imagenet where the program reads a dataset
    device: str = "gpu"  # the suite's hardware: on a CPU, the program's CPU recipe where it has one (Program.on_cpu)
    image_size: int | None = None  # a CPU case's image side; None: the program's own

    def __post_init__(self) -> None:
        if self.data is None:
            object.__setattr__(self, "data", default_data(self.framework, self.model))

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


@dataclass(frozen=True)
class Cluster:
    """Where this host sits: its rank and every node's address in rank order (rank 0 is the master)."""

    rank: int = 0
    hosts: tuple[str, ...] = ("127.0.0.1",)
    port: int = 29500
    nic: str | None = None

    @property
    def here(self) -> str:
        return self.hosts[self.rank]


@dataclass(frozen=True)
class RanAs:
    """The layout and mode a program's job trains in, each as far as the kit can state it from the program's
    command (kit.config.reference) and the pinned code it read; None where the program's own config or code decides
    and the kit does not read it. `why` says where they were read, or why one is not known. The report pairs a
    program with the harness only where both are known and equal the harness case's (kit.results.program_ratio);
    the harness's modes are eager and compiled, so a program's static graph or XLA is other work."""

    layout: str | None
    mode: str | None
    why: str

    @property
    def known(self) -> bool:
        return self.layout is not None and self.mode is not None


@dataclass(frozen=True)
class WorkCopy:
    """A program run from a patched copy of its folder (scripts/reference/launch.py): the copy's name, the patch
    and the files added to it, relative to scripts/."""

    folder: str
    patch: str
    add: tuple[str, ...] = ()


class Program:
    """A published program: its catalogue row and how the kit launches, reads and judges it. Subclasses set `impl`
    and write `recipe` and `methods`; the rest has defaults that say what a program without them lacks."""

    impl: Impl
    one_node_only: str | None = None  # why it runs on one node only: the recorded logs of more nodes give no command
    output_flags: tuple[str, ...] = ()  # flags naming what it writes besides its output (collected by the kit)
    work_copy: WorkCopy | None = None
    # the kit's own files under scripts/ its commands run besides the launcher (drivers, patches, their helpers):
    # staged to every host that may run it (kit.run.command.SCRIPT_FILES)
    scripts: tuple[str, ...] = ()

    def recipe(self, job: RefJob, cluster: Cluster, data_dir: str | None,
               scripts_dir: str) -> tuple[list[str], dict[str, str]]:
        """(argv, env) as its publisher ran the job on this host; argv empty where nothing starts here."""
        raise NotImplementedError

    def methods(self, job: RefJob) -> tuple[Method | None, Method]:
        """(the publisher's reduction where one is published, the kit's): the kit's drops the same warm-up and takes
        the harmonic mean of per-step throughputs (samples / time, as the harness does), in global samples/s."""
        raise NotImplementedError

    def on_cpu(self, argv: list[str], env: dict[str, str], job: RefJob) -> tuple[list[str], dict[str, str]]:
        """(argv, env) of the published command switched to the CPU (launcher-side only: its files stay at the pin);
        unchanged where the kit has no CPU recipe for it (its stand-ins run on CPUs as they are)."""
        return argv, env

    def synthetic(self, argv: list[str]) -> list[str]:
        """The published argv switched to its own synthetic-data mode (Impl.synthetic)."""
        raise ReferenceError(f"{self.impl.title} has no synthetic-data mode")

    def check(self, job: RefJob) -> None:
        """ReferenceError for a job its publisher never ran, beyond what every program refuses."""

    def ran_as(self, job: RefJob) -> RanAs:
        return RanAs(None, None, f"{self.impl.title}: its own defaults or config set its layout and mode (not its "
                                 "command), which the kit does not read")

    def in_scratch(self, argv: list[str], nodes: int) -> bool:
        """Whether it may run in a scratch folder of its host (RefCommand.scratch): not one mpirun over several
        hosts, whose ranks there start in rank 0's working directory (Open MPI passes it on)."""
        return self.work_copy is None and not (nodes > 1 and argv[:1] in MPI_LAUNCHERS)


def devices(n: int) -> str:
    return ",".join(str(i) for i in range(n))


def paddle_launch(gpus_per_node: int) -> list[str]:
    return ["python", "-m", "paddle.distributed.launch", "--gpus", devices(gpus_per_node)]
