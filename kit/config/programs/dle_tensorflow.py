"""NVIDIA DeepLearningExamples ResNet50 v1.5 in TensorFlow 1 (XLA): the Perf reports' TensorFlow rows."""

from __future__ import annotations

from kit.config.programs.base import XLA, Cluster, Impl, Program, RanAs, RefJob
from kit.results.extract import Method


class DLETensorFlow(Program):
    impl = Impl(
        "ngc-tensorflow", "tensorflow", "resnet50", "NVIDIA DeepLearningExamples ResNet50 v1.5 (TensorFlow 1)", "dle",
        "DeepLearningExamples", "TensorFlow/Classification/ConvNets", "dle-tf1",
        "PaddlePaddle/Perf ResNet50V1.5/OtherReports/TensorFlow/scripts/{tf_test_all.sh,tf_test_dist_all.sh}",
        data_format="tfrecord", synthetic="no --data_dir", tagged_output=True,
        # utils/dali_utils.py imports DALI at load (main.py -> utils); main.py's hvd.init(True) imports Horovod
        placeholders=("nvidia.dali", "horovod.tensorflow"))
    output_flags = ("--results_dir",)

    def recipe(self, job: RefJob, cluster: Cluster, data_dir: str | None,
               scripts_dir: str) -> tuple[list[str], dict[str, str]]:
        prec = "amp" if job.precision == "amp" else "fp32"
        flags = ["--mode=training_benchmark", "--use_xla", "--warmup_steps", "200", "--num_iter", "500",
                 "--iter_unit", "batch", "--batch_size", str(job.batch_size),
                 f"--data_dir={data_dir or './data/tfrecords/train'}",  # as logged; tf_test_all.sh: ./data/tfrecords/
                 f"--results_dir=/tmp/result/gpu{job.gpus}_{prec}_bs{job.batch_size}"]
        if job.precision == "amp":
            flags += ["--use_tf_amp", "--use_static_loss_scaling", "--loss_scale=128"]
            if job.nodes > 1:
                flags.insert(-1, "--lr_init=0.01")  # tf_test_dist_all.sh, FP16 run
        if job.gpus == 1:
            return ["python", "./main.py", *flags], {}
        if job.nodes == 1:
            return ["mpiexec", "--allow-run-as-root", "--bind-to", "socket", "-np", str(job.gpus), "python3",
                    "main.py", *flags], {}
        if cluster.rank != 0:
            return [], {}
        hosts = ",".join(f"{h}:{job.gpus_per_node}" for h in cluster.hosts)
        exports = ["-x", "PATH", "-x", "LD_LIBRARY_PATH"] + (["-x", "NCCL_SOCKET_IFNAME"] if cluster.nic else [])
        return ["mpirun", "--allow-run-as-root", "-tag-output", "--bind-to", "none", "-timestamp-output",
                "-np", str(job.gpus), "-H", hosts, *exports, "python", "main.py", *flags], {}

    def methods(self, job: RefJob) -> tuple[Method | None, Method]:
        pub = Method(reduce="last_summary") if job.nodes > 1 else Method(skip=5)
        return pub, Method(skip=5, reduce="harmonic_mean")

    def synthetic(self, argv: list[str]) -> list[str]:
        return [a for a in argv if not a.startswith("--data_dir=")]  # DLE TF: no --data_dir means synthetic input

    def ran_as(self, job: RefJob) -> RanAs:
        return RanAs(None, XLA, "DLE TensorFlow runs a graph compiled by XLA (--use_xla), which no harness mode is; "
                                "its --data_format is the program's own default, which the kit does not read")


PROGRAM = DLETensorFlow()
