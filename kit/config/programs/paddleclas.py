"""PaddleClas ResNet50 v1.5, static graph: the Paddle rows of the PaddlePaddle ResNet50 reports (seeds 001 and 004)."""

from __future__ import annotations

from kit.config.programs.base import STATIC, Cluster, Impl, Program, RanAs, ReferenceError, RefJob, paddle_launch
from kit.results.extract import Method


class PaddleClas(Program):
    impl = Impl(
        "paddleclas", "paddle", "resnet50", "PaddleClas ResNet50 (static graph)", "paddleclas", "PaddleClas", "",
        "paddleclas",
        "PaddlePaddle/Perf@e7a07c4d ResNet50V1.5 logs (launch Configuration); PaddlePaddle/benchmark PaddleClas",
        # ppcls/static/train.py: save_model into Global.output_dir (./output/) at every save_interval epoch, 0 included
        data_format="paddle", saves=("output",), placeholders=("visualdl",))

    def recipe(self, job: RefJob, cluster: Cluster, data_dir: str | None,
               scripts_dir: str) -> tuple[list[str], dict[str, str]]:
        # Single node: the July 2023 runs (Global.seed, 4 loader workers for pure FP16); 4 nodes: the June 2022
        # runs (no seed, 8 workers), launched with --gpus and the cluster in the environment as their platform set it.
        amp = job.precision == "amp"
        config = "ResNet50_amp_O2_ultra.yaml" if amp else "ResNet50.yaml"
        overrides = [f"DataLoader.Train.sampler.batch_size={job.batch_size}"]
        if job.nodes == 1:
            overrides.append("Global.seed=1234")
        overrides += [f"Global.epochs={job.gpus}",  # the publisher's rule: epochs = GPUs (1, 8, 32)
                      f"DataLoader.Train.loader.num_workers={4 if amp and job.nodes == 1 else 8}",
                      "Global.eval_during_train=False", "fuse_elewise_add_act_ops=True", "enable_addto=True"]
        if data_dir:
            overrides += [f"DataLoader.Train.dataset.image_root={data_dir.rstrip('/')}/",
                          f"DataLoader.Train.dataset.cls_label_path={data_dir.rstrip('/')}/train_list.txt"]
        train = ["ppcls/static/train.py", "-c", f"ppcls/configs/ImageNet/ResNet/{config}"]
        train += [a for o in overrides for a in ("-o", o)]
        if job.gpus == 1:
            return ["python", *train], {}
        argv = [*paddle_launch(job.gpus_per_node), *train]
        if job.nodes == 1:
            return argv, {}
        return argv, {
            "PADDLE_TRAINER_ENDPOINTS": ",".join(f"{h}:{cluster.port}" for h in cluster.hosts),
            "PADDLE_TRAINERS": ",".join(cluster.hosts), "PADDLE_TRAINER_ID": str(cluster.rank),
            "POD_IP": cluster.here, "PADDLE_PORT": str(cluster.port), "TRAINER_PORTS_NUM": str(job.gpus_per_node),
        }

    def check(self, job: RefJob) -> None:
        if job.device == "cpu" and job.precision != "fp32":
            raise ReferenceError(f"PaddleClas on a CPU trains fp32 only ({job.precision}: "
                                 "ResNet50_amp_O2_ultra.yaml's pure FP16 needs a GPU)")

    def on_cpu(self, argv: list[str], env: dict[str, str], job: RefJob) -> tuple[list[str], dict[str, str]]:
        # -o keys the pinned code reads (tests/test_program_contracts.py): the device; a log line every step
        # (ppcls/static/program.py reads a top-level print_interval, not Global.print_batch_step); the image side in
        # the program's input shape and its crop. Paddle 3's PIR programs break fleet's minimize in the pinned
        # trainer (clone() TypeError), so the CPU Paddle builds the old program IR, as the Paddle 2.x it was run on.
        size = job.image_size or 224
        cpu = ["Global.device=cpu", "print_interval=1", f"Global.image_shape=[3,{size},{size}]",
               f"DataLoader.Train.dataset.transform_ops.1.RandCropImage.size={size}"]
        return [*argv, *(a for o in cpu for a in ("-o", o))], {**env, "FLAGS_enable_pir_api": "0"}

    def methods(self, job: RefJob) -> tuple[Method | None, Method]:
        # per-card ips: scaled by the GPUs
        return Method(skip=10, scale=job.gpus), Method(skip=10, reduce="harmonic_mean", scale=job.gpus)

    def ran_as(self, job: RefJob) -> RanAs:
        """A static graph; its layout is its config's Arch.data_format at the pin: ResNet50_amp_O2_ultra.yaml says
        NHWC, ResNet50.yaml none, so ResNet's default NCHW (ppcls/arch/backbone/legendary_models/resnet.py)."""
        if job.precision == "amp":
            return RanAs("nhwc", STATIC, "PaddleClas trains a static graph (ppcls/static/train.py); "
                                         "ResNet50_amp_O2_ultra.yaml's Arch.data_format is NHWC")
        return RanAs("nchw", STATIC, "PaddleClas trains a static graph (ppcls/static/train.py); ResNet50.yaml sets "
                                     "no Arch.data_format, so ResNet's default NCHW (legendary_models/resnet.py)")

PROGRAM = PaddleClas()
