"""PURE: the published programs a suite may name (`impl: reference`): which exist, and which jobs each accepts.

    implementation("torch", "resnet50")                  # Impl; ReferenceError names the combinations that exist
    check(RefJob("paddle", "arcface", "amp", 128, 8, 1))  # ReferenceError: DLPerf published FP32 runs only

How each program is launched is kit.config.reference (the recipes); this catalog is what the suites are checked
against when they load, so a case no published program covers is an error at file:line:key.
"""

from __future__ import annotations

from dataclasses import dataclass

CODE_ROOT = "/opt/models"  # kit.images.spec clones docker/pins.yaml model_code here (checked by a test)
CODE_DIRS = {"paddleclas": "PaddleClas", "plsc": "PLSC", "fleetx": "FleetX", "dle": "DeepLearningExamples"}
# Published programs whose code docker/pins.yaml does not pin yet: their recipes are kept (checked against the
# recorded commands: tests/test_reference.py) and their logs re-derived (kit/claims/perf-models.yaml), but no image
# checks them out, so the kit refuses to run them (check()) until a pin is added.
UNPINNED_CODE_DIRS = {"paddlenlp": "PaddleNLP", "paddleseg": "PaddleSeg"}
SCRIPTS_DIR = "/opt/kit/scripts"  # the kit's scripts/ inside a container (mounted by kit bench)
PLSC_PATCH = "plsc/exit_at_batch_150.patch"  # relative to scripts/
PRECISIONS = ("fp32", "amp")  # every program; Impl.modes adds a program's own (FleetX: auto)
FLUID_REMOVED = (2, 6)  # paddle.fluid is gone from Paddle 2.6 on (scripts/fleetx/vgg16_benchmark.py says the same)


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


# DeepLearningExamples@4a15e914 PyTorch/Classification/ConvNets/requirements.txt (what DLE's Dockerfile pip-installs):
# git+https://github.com/NVIDIA/dllogger@v1.0.0#egg=dllogger; v1.0.0 is this commit (read in NVIDIA/dllogger)
DLLOGGER = Package("dllogger", "https://github.com/NVIDIA/dllogger", "0540a43971f4a8a16693a9de9de73c1072020769",
                   "DeepLearningExamples PyTorch/Classification/ConvNets/requirements.txt: "
                   "git+https://github.com/NVIDIA/dllogger@v1.0.0#egg=dllogger")


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
    needs_fluid: bool = False  # it imports paddle.fluid, which Paddle >= FLUID_REMOVED no longer has (kit.run.plan)
    modes: tuple[str, ...] = ()  # precisions beyond fp32/amp that name a mode of this program
    needs_dali: tuple[str, ...] = ()  # the precisions (modes) in which it reads its data with DALI
    packages: tuple[Package, ...] = ()  # checked out beside its code, on its PYTHONPATH (kit.config.reference)
    # modules it imports when it loads but never calls in the kit's modes: where its host lacks one, an import
    # placeholder stands in, recorded (scripts/reference/placeholders)
    placeholders: tuple[str, ...] = ()
    # what it saves where it runs besides the outputs the kit collects (its checkpoints): in its scratch folder these
    # names are never links into the checkout, so an earlier run's leftover there is not written through
    saves: tuple[str, ...] = ()

    @property
    def short(self) -> str:
        """Its name in one word, for messages: PLSC, FleetX, PaddleClas, NVIDIA ..."""
        return self.title.split()[0].rstrip(",")


IMPLS: dict[tuple[str, str], Impl] = {(i.framework, i.model): i for i in (
    Impl("paddleclas", "paddle", "resnet50", "PaddleClas ResNet50 (static graph)", "paddleclas", "", "paddleclas",
         "PaddlePaddle/Perf@e7a07c4d ResNet50V1.5 logs (launch Configuration); PaddlePaddle/benchmark PaddleClas",
         # ppcls/static/train.py: save_model into Global.output_dir (./output/) at every save_interval epoch, 0 included
         data_format="paddle", saves=("output",)),
    Impl("fleetx", "paddle", "vgg16", "FleetX VGG16 (fleet collective)", "fleetx", "python", "fleetx-vgg",
         "PaddlePaddle/FleetX benchmark/paddle/vgg_benchmark.py (strategy), scripts/fleetx/vgg16_benchmark.py",
         # auto: seed 000's auto-parallel table (DistributedStrategy.auto = True alone, DALI reading the data)
         data_format="paddle", modes=("auto",), needs_dali=("auto",)),
    Impl("plsc", "paddle", "arcface", "PLSC ArcFace, ResNet50 backbone (DLPerf)", "plsc", "", "plsc",
         "Oneflow-Inc/DLPerf PaddlePaddle/PLSC/{README.md,scripts/runner.sh,scripts/train.py}",
         synthetic="random 3x112x112 samples: DLPerf's train.py reads no dataset",
         # plsc/entry.py: `import paddle.fluid as fluid` (read at PaddlePaddle/PLSC@01995771; 9bba9c90 is as old)
         needs_fluid=True),
    Impl("ngc-pytorch", "torch", "resnet50", "NVIDIA DeepLearningExamples ResNet50 v1.5 (PyTorch)", "dle",
         "PyTorch/Classification/ConvNets", "dle-pytorch",
         "PaddlePaddle/Perf ResNet50V1.5/OtherReports/PyTorch/{scripts/pytorch_test_all.sh,README.md}",
         data_format="folder", synthetic="--data-backend syntetic", packages=(DLLOGGER,),
         # image_classification/dataloaders.py: `class HybridTrainPipe(Pipeline)` at import, DALI or not
         placeholders=("nvidia.dali",),
         # image_classification/utils.py save_checkpoint: --checkpoint-filename in --workspace (./), and the best's copy
         saves=("checkpoint.pth.tar", "model_best.pth.tar")),
    Impl("ngc-tensorflow", "tensorflow", "resnet50", "NVIDIA DeepLearningExamples ResNet50 v1.5 (TensorFlow 1)",
         "dle", "TensorFlow/Classification/ConvNets", "dle-tf1",
         "PaddlePaddle/Perf ResNet50V1.5/OtherReports/TensorFlow/scripts/{tf_test_all.sh,tf_test_dist_all.sh}",
         data_format="tfrecord", synthetic="no --data_dir", tagged_output=True),
    Impl("ngc-mxnet", "mxnet", "resnet50", "NVIDIA DeepLearningExamples ResNet50 v1.5 (MXNet)", "dle",
         "MxNet/Classification/RN50v1.5", "dle-mxnet",
         "PaddlePaddle/Perf ResNet50V1.5/OtherReports/MxNet/scripts/mxnet_test_all.sh",
         data_format="recordio", synthetic="--data-backend synthetic", tagged_output=True),
    # PaddlePaddle/Perf's other models (Bert/, HRNetW18/, Transformer/): the commands their logs record; PaddleNLP's
    # Transformer sets batch and precision by editing its YAML (not in its command), NGC TF1 BERT and mmsegmentation
    # record no command: no recipes for those
    Impl("paddlenlp-bert", "paddle", "bert", "PaddleNLP BERT-base pre-training (static graph, seq len 128)",
         "paddlenlp", "", "paddlenlp-bert",
         "PaddlePaddle/Perf@e7a07c4d Bert/logs/*_LOG/PaddleNLP_bert_base_seqlen128_* (the command each log ends with)",
         data_format="wikicorpus_en_seqlen128"),
    Impl("paddleseg-hrnetw18", "paddle", "hrnetw18", "PaddleSeg FCN-HRNetW18, Cityscapes 1024x512 (test_tipc)",
         "paddleseg", "", "paddleseg",
         "PaddlePaddle/Perf@e7a07c4d HRNetW18/logs/paddle/PaddleSeg_fcn_hrnetw18_* (the command each log records)",
         data_format="cityscapes"),
    Impl("ngc-pytorch-bert", "torch", "bert", "NVIDIA DeepLearningExamples BERT-base pre-training, phase 1 (PyTorch)",
         "dle", "PyTorch/LanguageModeling/BERT", "dle-bert-pytorch",
         "PaddlePaddle/Perf@e7a07c4d Bert/OtherReports/PyTorch/logs/*_LOG/*.log ('+ python3 -m "
         "torch.distributed.launch' trace, DLLogger 'PARAMETER Config')", data_format="bert-parquet"),
    Impl("ngc-pytorch-transformer", "torch", "transformer", "NVIDIA DeepLearningExamples Transformer-big (PyTorch)",
         "dle", "PyTorch/Translation/Transformer", "dle-transformer-pytorch",
         "PaddlePaddle/Perf@e7a07c4d Transformer/OtherReports/PyTorch/logs/*_LOG/transformer_pytorch_* (first line, "
         "Namespace)", data_format="wmt14_en_de_joined_dict_pytorch"),
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


STATIC = "static"  # a static graph built and run by the framework's executor (Paddle's static mode, fluid)
XLA = "xla"  # TensorFlow 1's graph, compiled by XLA


def ran_as(job: RefJob) -> RanAs:
    """What each published program's job trains in (see RanAs), read from its recipe and seed reports:
    - DLE PyTorch: eager (main.py without --jit); NHWC in its own synthetic benchmark under AMP (configs.yml at the
      pin: memory_format nhwc in every resnet50 AMP row, data_backend syntetic in its benchmark_training_short mode),
      else main.py's default NCHW (the Perf logs' PARAMETER lines say nchw);
    - PaddleClas: a static graph (ppcls/static/train.py); its layout is Arch.data_format of the YAML config the
      recipe names (ResNet50.yaml, ResNet50_amp_O2_ultra.yaml), read in the checkout at run time, not by the kit;
    - FleetX: a static graph (scripts/fleetx/vgg16_benchmark.py: paddle.enable_static, fleet collective); FleetX's
      VGG16 application builds the layout, which the kit does not read;
    - PLSC: a static graph (DLPerf's train.py on paddle.fluid); PLSC's ResNet50 backbone builds the layout, not read;
    - DLE TensorFlow: a graph compiled by XLA (--use_xla, as seed 001 ran every framework that has XLA); its
      --data_format is the program's default, not in its command, not read;
    - DLE MXNet and the programs of the other models: their own defaults or configs decide both, not read."""
    name = implementation(job.framework, job.model).name
    if name == "ngc-pytorch":
        layout = "nhwc" if job.data == "synthetic" and job.precision == "amp" else "nchw"
        why = ("DLE's synthetic AMP benchmark: --memory-format nhwc (configs.yml)" if layout == "nhwc"
               else "main.py's default memory format (nchw)")
        return RanAs(layout, "eager", f"DLE PyTorch main.py runs eager (no --jit); {why}")
    if name == "paddleclas":
        config = "ResNet50_amp_O2_ultra.yaml" if job.precision == "amp" else "ResNet50.yaml"
        return RanAs(None, STATIC, f"PaddleClas trains a static graph (ppcls/static/train.py), which no harness mode "
                                   f"is; its layout is {config}'s Arch.data_format at the pinned checkout, which the "
                                   "kit does not read")
    if name == "fleetx":
        return RanAs(None, STATIC, "FleetX trains a static graph (scripts/fleetx/vgg16_benchmark.py: "
                                   "paddle.enable_static), which no harness mode is; its VGG16 application at the "
                                   "pinned checkout sets the layout, which the kit does not read")
    if name == "plsc":
        return RanAs(None, STATIC, "PLSC trains a static graph (DLPerf's train.py on paddle.fluid), which no harness "
                                   "mode is; its ResNet50 backbone at the pinned checkout sets the layout, which the "
                                   "kit does not read")
    if name == "ngc-tensorflow":
        return RanAs(None, XLA, "DLE TensorFlow runs a graph compiled by XLA (--use_xla), which no harness mode is; "
                                "its --data_format is the program's own default, which the kit does not read")
    return RanAs(None, None, f"{implementation(job.framework, job.model).title}: its own defaults or config set "
                             "its layout and mode (not its command), which the kit does not read")


def layout_and_mode(job: RefJob) -> tuple[str, str] | None:
    """(layout, mode) the job's program trains in where the kit knows both (ran_as); None where its own config or
    code decides one of them."""
    ran = ran_as(job)
    return (ran.layout, ran.mode) if ran.known else None


# the runs whose commands the logs record: one node (the 32-GPU logs of these programs record none)
ONE_NODE_ONLY = {"paddlenlp-bert": "the 32-GPU BERT log (2021) records no launch command",
                 "ngc-pytorch-bert": "the 32-GPU BERT log's mpirun command is not recorded",
                 "ngc-pytorch-transformer": "the 32-GPU Transformer logs record no command",
                 "paddleseg-hrnetw18": "the 32-GPU HRNetW18 logs (2021) record no launch command"}


def check(job: RefJob, recipe_only: bool = False) -> None:
    """ReferenceError when no published program covers the job (its placement aside). recipe_only: the command
    is wanted, not a run (a program whose code no image checks out has a recipe all the same)."""
    impl = implementation(job.framework, job.model)
    if impl.code in UNPINNED_CODE_DIRS and not recipe_only:
        raise ReferenceError(f"{impl.title}: {UNPINNED_CODE_DIRS[impl.code]} is not pinned in docker/pins.yaml "
                             "(model_code), so no image checks it out and the kit cannot run it yet; its recipe and "
                             "its publisher's method are kept (kit.config.reference, kit/claims/perf-models.yaml)")
    if impl.name in ONE_NODE_ONLY and job.nodes > 1:
        raise ReferenceError(f"{impl.title}: one node only ({ONE_NODE_ONLY[impl.name]})")
    if job.precision not in PRECISIONS + impl.modes:
        raise ReferenceError(f"precision {job.precision!r}: {impl.short} runs {', '.join(PRECISIONS + impl.modes)}")
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
