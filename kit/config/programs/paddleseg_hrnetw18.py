"""PaddleSeg FCN-HRNetW18 on Cityscapes 1024x512 (test_tipc): PaddlePaddle/Perf's HRNetW18/ Paddle rows."""

from __future__ import annotations

from kit.config.programs.base import Cluster, Impl, Program, RefJob, devices
from kit.results.extract import Method


class PaddleSegHRNetW18(Program):
    impl = Impl(
        "paddleseg-hrnetw18", "paddle", "hrnetw18", "PaddleSeg FCN-HRNetW18, Cityscapes 1024x512 (test_tipc)",
        "paddleseg", "PaddleSeg", "", "paddleseg",
        "PaddlePaddle/Perf@e7a07c4d HRNetW18/logs/paddle/PaddleSeg_fcn_hrnetw18_* (the command each log records)",
        data_format="cityscapes")
    one_node_only = "the 32-GPU HRNetW18 logs (2021) record no launch command"
    output_flags = ("--save_dir",)

    def recipe(self, job: RefJob, cluster: Cluster, data_dir: str | None,
               scripts_dir: str) -> tuple[list[str], dict[str, str]]:
        # The command of each HRNetW18/logs/paddle/PaddleSeg_fcn_hrnetw18_* log (PaddleSeg's test_tipc benchmark);
        # the README's AMP is --precision=fp16 --amp_level=O2. Cityscapes is read where the config says.
        amp = job.precision == "amp"
        gpus = devices(job.gpus)
        train = ["tools/train.py", "--config", "test_tipc/configs/fcn_hrnetw18/fcn_hrnetw18_1024x512_cityscapes.yml",
                 "--device", "gpu", "--save_interval", "500", "--seed", "100", "--num_workers", "8", "--device=gpu",
                 f"--save_dir=./test_tipc/output/fcn_hrnetw18/benchmark_train/norm_train_gpus_{gpus}_autocast_"
                 f"{'fp16' if amp else 'fp32'}", "--iters=400", f"--precision={'fp16' if amp else 'fp32'}",
                 f"--batch_size={job.batch_size}", *(["--amp_level=O2"] if amp else []), "--log_iters", "15",
                 "--repeats", "500"]
        if job.gpus == 1:
            return ["python", *train], {}
        return ["python", "-m", "paddle.distributed.launch", f"--devices={gpus}", *train], {}

    def methods(self, job: RefJob) -> tuple[Method | None, Method]:
        # as PaddleNLP's: skip 2 (30 iterations), trim 5, x cards, 3 decimals (claims)
        return Method(skip=2, trim=5, scale=job.gpus, round=3), Method(skip=2, reduce="harmonic_mean", scale=job.gpus)


PROGRAM = PaddleSegHRNetW18()
