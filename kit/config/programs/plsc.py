"""PLSC ArcFace with a ResNet50 backbone, as DLPerf ran it (seed 002): run from a patched copy of its checkout."""

from __future__ import annotations

from kit.config.programs.base import (
    STATIC,
    Cluster,
    Impl,
    Program,
    RanAs,
    ReferenceError,
    RefJob,
    WorkCopy,
    devices,
)
from kit.results.extract import Method

PLSC_PATCH = "plsc/exit_at_batch_150.patch"  # relative to scripts/


class PLSC(Program):
    impl = Impl(
        "plsc", "paddle", "arcface", "PLSC ArcFace, ResNet50 backbone (DLPerf)", "plsc", "PLSC", "", "plsc",
        "Oneflow-Inc/DLPerf PaddlePaddle/PLSC/{README.md,scripts/runner.sh,scripts/train.py}",
        synthetic="random 3x112x112 samples: DLPerf's train.py reads no dataset",
        # plsc/entry.py at the pin imports paddle.fluid.incubate.fleet (collective, role_maker) and
        # paddle.fluid.transpiler: Paddle 2.5 retired 1116 paddle.fluid APIs (its release note), those among them
        needs_fluid=True, fluid_gone=(2, 5))
    # its patched work copy is the run's evidence, checkpoint-free: the patch ends it before its pass saves
    work_copy = WorkCopy("plsc-patched", PLSC_PATCH, ("plsc/train.py",))
    scripts = (PLSC_PATCH, "plsc/train.py")

    def recipe(self, job: RefJob, cluster: Cluster, data_dir: str | None,
               scripts_dir: str) -> tuple[list[str], dict[str, str]]:
        # DLPerf runner.sh: `python3 train.py` on one GPU (loss arcface), else paddle.distributed.launch with
        # --cluster_node_ips/--node_ip/--selected_gpus (loss dist_arcface); batch and loss are flags here, not sed.
        loss = "arcface" if job.gpus == 1 else "dist_arcface"
        train = ["train.py", "--loss-type", loss, "--batch-size", str(job.batch_size)]
        if job.gpus == 1:
            return ["python3", *train], {}
        ips = cluster.here if job.nodes == 1 else ",".join(cluster.hosts)
        argv = ["python3", "-m", "paddle.distributed.launch", f"--cluster_node_ips={ips}", f"--node_ip={cluster.here}",
                f"--selected_gpus={devices(job.gpus_per_node)}", *train]
        if job.nodes == 1:
            return argv, {}
        # Paddle >= 2 reads these legacy flags in a compatibility mode that drops --cluster_node_ips/--node_ip (each
        # node would be a job of its own); the same cluster in the launcher's PaddleCloud variables keeps DLPerf's job
        return argv, {"PADDLE_TRAINERS": ",".join(cluster.hosts), "POD_IP": cluster.here,
                      "PADDLE_TRAINER_ID": str(cluster.rank), "PADDLE_PORT": str(cluster.port),
                      "TRAINER_PORTS_NUM": str(job.gpus_per_node), "PADDLE_TRAINERS_NUM": str(job.nodes)}

    def methods(self, job: RefJob) -> tuple[Method | None, Method]:
        # DLPerf extract_paddle_logs.py: np.mean(records[50//10*n : 150//10*n]), 2 decimals; a numpy slice keeps
        # what is there, and the patch ends every trainer at batch 150 (15 records), so: all after 5n
        n = job.nodes
        return Method(skip=5 * n, round=2), Method(skip=5 * n, reduce="harmonic_mean")

    def synthetic(self, argv: list[str]) -> list[str]:
        return argv  # DLPerf's train.py: random samples, always

    def check(self, job: RefJob) -> None:
        if job.precision != "fp32":
            raise ReferenceError("PLSC ArcFace: DLPerf published FP32 runs only (PaddlePaddle/PLSC/README.md)")

    def ran_as(self, job: RefJob) -> RanAs:
        return RanAs(None, STATIC, "PLSC trains a static graph (DLPerf's train.py on paddle.fluid), which no harness "
                                   "mode is; its ResNet50 backbone at the pinned checkout sets the layout, which the "
                                   "kit does not read")


PROGRAM = PLSC()
