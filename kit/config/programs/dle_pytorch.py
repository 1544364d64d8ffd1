"""NVIDIA DeepLearningExamples ResNet50 v1.5 in PyTorch: the Perf reports' PyTorch rows and DLE's own benchmark."""

from __future__ import annotations

from kit.config.programs.base import Cluster, Impl, Package, Program, RanAs, RefJob
from kit.results.extract import Method

# DeepLearningExamples@4a15e914 PyTorch/Classification/ConvNets/requirements.txt (what DLE's Dockerfile pip-installs):
# git+https://github.com/NVIDIA/dllogger@v1.0.0#egg=dllogger; v1.0.0 is this commit (read in NVIDIA/dllogger)
DLLOGGER = Package("dllogger", "https://github.com/NVIDIA/dllogger", "0540a43971f4a8a16693a9de9de73c1072020769",
                   "DeepLearningExamples PyTorch/Classification/ConvNets/requirements.txt: "
                   "git+https://github.com/NVIDIA/dllogger@v1.0.0#egg=dllogger")


class DLEPyTorch(Program):
    impl = Impl(
        "ngc-pytorch", "torch", "resnet50", "NVIDIA DeepLearningExamples ResNet50 v1.5 (PyTorch)", "dle",
        "DeepLearningExamples", "PyTorch/Classification/ConvNets", "dle-pytorch",
        "PaddlePaddle/Perf ResNet50V1.5/OtherReports/PyTorch/{scripts/pytorch_test_all.sh,README.md}",
        data_format="folder", synthetic="--data-backend syntetic", packages=(DLLOGGER,),
        # image_classification/dataloaders.py: `class HybridTrainPipe(Pipeline)` at import, DALI or not
        placeholders=("nvidia.dali",),
        # image_classification/utils.py save_checkpoint: --checkpoint-filename in --workspace (./), and the best's copy
        saves=("checkpoint.pth.tar", "model_best.pth.tar"))
    output_flags = ("--raport-file",)

    def recipe(self, job: RefJob, cluster: Cluster, data_dir: str | None,
               scripts_dir: str) -> tuple[list[str], dict[str, str]]:
        amp = ["--amp", "--static-loss-scale", "256"] if job.precision == "amp" else []
        b = ["-b", str(job.batch_size)]
        # the Perf runs' layout is main.py's default (nchw); DLE's own synthetic AMP benchmark is NHWC (ran_as)
        nhwc = ["--memory-format", "nhwc"] if self.ran_as(job).layout == "nhwc" else []
        if job.nodes > 1:  # README's run_benchmark.sh under mpirun, one per node: ${precision} unquoted, no loss scale
            main = ["--arch", "resnet50", *amp[:1], *b, "--training-only", "-p", "1", "--raport-file",
                    "benchmark.json", "--epochs", "1", "--prof", "100", *nhwc, data_dir or "./data/imagenet"]
            return ["python", "./multiproc.py", "--master_addr", cluster.hosts[0], "--master_port", str(cluster.port),
                    "--nnodes", str(job.nodes), "--nproc_per_node", str(job.gpus_per_node), "--node_rank",
                    str(cluster.rank), "./main.py", *main], {}
        head = ["--arch", "resnet50", *b, "--training-only", "-p", "1", "--raport-file", "benchmark.json"]
        if job.gpus == 1:  # pytorch_test_all.sh: the flags in the script's order
            return ["python", "./main.py", *head, "--epochs", "1", "--prof", "100", *amp, *nhwc,
                    data_dir or "/imagenet"], {}
        main = [*head, *amp, "--epochs", "1", "--prof", "100", *nhwc, data_dir or "/imagenet"]
        return ["python", "./multiproc.py", "--nproc_per_node", str(job.gpus_per_node), "./main.py", *main], {}

    def methods(self, job: RefJob) -> tuple[Method | None, Method]:
        skip = 9 if job.gpus == 1 else 8
        pub = Method(reduce="last_summary") if job.nodes > 1 else Method(skip=skip)
        return pub, Method(skip=skip, reduce="harmonic_mean")

    def synthetic(self, argv: list[str]) -> list[str]:
        return [*argv[:-1], "--data-backend", "syntetic", argv[-1]]  # the data path stays (main.py requires it)

    def ran_as(self, job: RefJob) -> RanAs:
        """eager (main.py without --jit); NHWC in its own synthetic benchmark under AMP (configs.yml at the pin:
        memory_format nhwc in every resnet50 AMP row, data_backend syntetic in its benchmark_training_short mode),
        else main.py's default NCHW (the Perf logs' PARAMETER lines say nchw)."""
        layout = "nhwc" if job.data == "synthetic" and job.precision == "amp" else "nchw"
        why = ("DLE's synthetic AMP benchmark: --memory-format nhwc (configs.yml)" if layout == "nhwc"
               else "main.py's default memory format (nchw)")
        return RanAs(layout, "eager", f"DLE PyTorch main.py runs eager (no --jit); {why}")


PROGRAM = DLEPyTorch()
