"""PURE: the published programs a suite may name (`impl: reference`): which exist, and which jobs each accepts.

    implementation("torch", "resnet50")                  # Impl; ReferenceError names the combinations that exist
    check(RefJob("paddle", "arcface", "amp", 128, 8, 1))  # ReferenceError: DLPerf published FP32 runs only

How each program is launched is kit.run.reference (the recipes); this catalog is what the suites are checked
against when they load, so a case no published program covers is an error at file:line:key.
"""

from __future__ import annotations

from dataclasses import dataclass

CODE_ROOT = "/opt/models"  # kit.images.spec clones docker/pins.yaml model_code here (checked by a test)
CODE_DIRS = {"paddleclas": "PaddleClas", "plsc": "PLSC", "fleetx": "FleetX", "dle": "DeepLearningExamples"}
SCRIPTS_DIR = "/opt/kit/scripts"  # the kit's scripts/ inside a container (mounted by kit bench)
PLSC_PATCH = "plsc/exit_at_batch_150.patch"  # relative to scripts/
PRECISIONS = ("fp32", "amp")


class ReferenceError(ValueError):
    """A case no published program covers (unknown combination, precision or placement)."""


@dataclass(frozen=True)
class Impl:
    name: str  # the framework folder of its logs: logs/<name>/<model>/bz<B>/<N>n<G>g/
    framework: str  # the suite's framework (its image)
    model: str
    title: str
    code: str  # docker/pins.yaml model_code key
    subdir: str  # inside the checkout
    log_format: str  # kit.results.parsers format name
    source: str  # where the recipe was read
    data_format: str | None = None  # the format it reads (data_prep/convert.py --to), under <data_dir>/<format>/
    synthetic: str | None = None  # its own synthetic-data mode, as the program spells it; None: it has none
    tagged_output: bool = False  # its ranks' output goes through Open MPI's tagging (mpirun, horovodrun)


IMPLS: dict[tuple[str, str], Impl] = {(i.framework, i.model): i for i in (
    Impl("paddleclas", "paddle", "resnet50", "PaddleClas ResNet50 (static graph)", "paddleclas", "", "paddleclas",
         "PaddlePaddle/Perf@e7a07c4d ResNet50V1.5 logs (launch Configuration); PaddlePaddle/benchmark PaddleClas",
         data_format="paddle"),
    Impl("fleetx", "paddle", "vgg16", "FleetX VGG16 (fleet collective)", "fleetx", "python", "fleetx-vgg",
         "PaddlePaddle/FleetX benchmark/paddle/vgg_benchmark.py (strategy), scripts/fleetx/vgg16_benchmark.py",
         data_format="paddle"),
    Impl("plsc", "paddle", "arcface", "PLSC ArcFace, ResNet50 backbone (DLPerf)", "plsc", "", "plsc",
         "Oneflow-Inc/DLPerf PaddlePaddle/PLSC/{README.md,scripts/runner.sh,scripts/train.py}",
         synthetic="random 3x112x112 samples: DLPerf's train.py reads no dataset"),
    Impl("ngc-pytorch", "torch", "resnet50", "NVIDIA DeepLearningExamples ResNet50 v1.5 (PyTorch)", "dle",
         "PyTorch/Classification/ConvNets", "dle-pytorch",
         "PaddlePaddle/Perf ResNet50V1.5/OtherReports/PyTorch/{scripts/pytorch_test_all.sh,README.md}",
         data_format="folder", synthetic="--data-backend syntetic"),
    Impl("ngc-tensorflow", "tensorflow", "resnet50", "NVIDIA DeepLearningExamples ResNet50 v1.5 (TensorFlow 1)",
         "dle", "TensorFlow/Classification/ConvNets", "dle-tf1",
         "PaddlePaddle/Perf ResNet50V1.5/OtherReports/TensorFlow/scripts/{tf_test_all.sh,tf_test_dist_all.sh}",
         data_format="tfrecord", synthetic="no --data_dir", tagged_output=True),
    Impl("ngc-mxnet", "mxnet", "resnet50", "NVIDIA DeepLearningExamples ResNet50 v1.5 (MXNet)", "dle",
         "MxNet/Classification/RN50v1.5", "dle-mxnet",
         "PaddlePaddle/Perf ResNet50V1.5/OtherReports/MxNet/scripts/mxnet_test_all.sh",
         data_format="recordio", synthetic="--data-backend synthetic", tagged_output=True),
)}


BY_NAME: dict[str, Impl] = {i.name: i for i in IMPLS.values()}  # by the framework folder of its logs


def combinations() -> list[str]:
    return [f"{fw}/{model} ({impl.name})" for (fw, model), impl in IMPLS.items()]


def implementation(framework: str, model: str) -> Impl:
    impl = IMPLS.get((framework, model))
    if impl is None:
        raise ReferenceError(f"no reference implementation for {framework}/{model}; there are: "
                             + ", ".join(combinations()))
    return impl


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

    def __post_init__(self) -> None:
        if self.data is None:
            object.__setattr__(self, "data", default_data(self.framework, self.model))

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


def check(job: RefJob) -> None:
    """ReferenceError when no published program covers the job (its placement aside)."""
    impl = implementation(job.framework, job.model)
    if job.precision not in PRECISIONS:
        raise ReferenceError(f"precision {job.precision!r}: one of {', '.join(PRECISIONS)}")
    if job.batch_size < 1 or job.gpus_per_node < 1 or job.nodes < 1:
        raise ReferenceError(f"batch, GPUs per node and nodes must be >= 1 ({job})")
    if impl.name == "plsc" and job.precision != "fp32":
        raise ReferenceError("PLSC ArcFace: DLPerf published FP32 runs only (PaddlePaddle/PLSC/README.md)")
    if job.data == "imagenet" and impl.data_format is None:
        raise ReferenceError(f"{impl.title} reads no dataset ({impl.synthetic}): data: synthetic")
    if job.data == "synthetic" and impl.synthetic is None:
        raise ReferenceError(f"{impl.title} has no synthetic-data mode (data: imagenet reads "
                             f"<data_dir>/{impl.data_format or '...'}/); programs with one: "
                             + ", ".join(i.name for i in IMPLS.values() if i.synthetic))
    if impl.name == "ngc-mxnet" and job.nodes > 1:
        raise ReferenceError("NGC MXNet: the publisher ran one node only (benchmark.py -> runner -> horovodrun -np G)")
