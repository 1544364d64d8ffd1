"""NVIDIA DeepLearningExamples ResNet50 v1.5 in MXNet: the Perf reports' MXNet rows (one node)."""

from __future__ import annotations

from kit.config.programs.base import Cluster, Impl, Program, ReferenceError, RefJob
from kit.results.extract import Method


class DLEMXNet(Program):
    impl = Impl(
        "ngc-mxnet", "mxnet", "resnet50", "NVIDIA DeepLearningExamples ResNet50 v1.5 (MXNet)", "dle",
        "DeepLearningExamples", "MxNet/Classification/RN50v1.5", "dle-mxnet",
        "PaddlePaddle/Perf ResNet50V1.5/OtherReports/MxNet/scripts/mxnet_test_all.sh",
        data_format="recordio", synthetic="--data-backend synthetic", tagged_output=True,
        # train.py imports dali.py (DALI at load) and horovod.mxnet; log_utils.py calls hvd.rank() whatever the kvstore
        placeholders=("nvidia.dali", "horovod.mxnet"))
    output_flags = ("-o",)

    def recipe(self, job: RefJob, cluster: Cluster, data_dir: str | None,
               scripts_dir: str) -> tuple[list[str], dict[str, str]]:
        dtype, report = ("float16", "fp16") if job.precision == "amp" else ("float32", "fp32")
        argv = ["python", "benchmark.py", "-n", str(job.gpus_per_node), "-b", str(job.batch_size), "--dtype", dtype,
                "-o", f"benchmark_report_{report}.json", "-i", "500", "-e", "3", "-w", "1", "--num-examples",
                "32000", "--mode", "train"]
        return argv + (["--data-root", data_dir] if data_dir else []), {}

    def methods(self, job: RefJob) -> tuple[Method | None, Method]:
        return Method(skip=1, reduce="harmonic_mean", sig=5), Method(skip=1, reduce="harmonic_mean")

    def synthetic(self, argv: list[str]) -> list[str]:
        if "--data-root" in argv:
            at = argv.index("--data-root")
            argv = argv[:at] + argv[at + 2:]
        return [*argv, "--data-backend", "synthetic"]

    def check(self, job: RefJob) -> None:
        if job.nodes > 1:
            raise ReferenceError("NGC MXNet: the publisher ran one node only (benchmark.py -> runner -> horovodrun "
                                 "-np G)")


PROGRAM = DLEMXNet()
