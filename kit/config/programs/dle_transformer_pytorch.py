"""NVIDIA DeepLearningExamples Transformer-big (fairseq) in PyTorch: PaddlePaddle/Perf's Transformer/ PyTorch rows."""

from __future__ import annotations

from kit.config.programs.base import Cluster, Impl, Program, RefJob
from kit.results.extract import Method


class DLETransformerPyTorch(Program):
    impl = Impl(
        "ngc-pytorch-transformer", "torch", "transformer", "NVIDIA DeepLearningExamples Transformer-big (PyTorch)",
        "dle", "DeepLearningExamples", "PyTorch/Translation/Transformer", "dle-transformer-pytorch",
        "PaddlePaddle/Perf@e7a07c4d Transformer/OtherReports/PyTorch/logs/*_LOG/transformer_pytorch_* (first line, "
        "Namespace)", data_format="wmt14_en_de_joined_dict_pytorch")
    one_node_only = "the 32-GPU Transformer logs record no command"
    output_flags = ("--save-dir",)

    def recipe(self, job: RefJob, cluster: Cluster, data_dir: str | None,
               scripts_dir: str) -> tuple[list[str], dict[str, str]]:
        # The first line of each Transformer/OtherReports/PyTorch/logs/*_LOG/transformer_pytorch_* log; the README's
        # 'FP16' column is --amp (Namespace amp=True, fp16=False). --max-tokens is per GPU (the batch size here).
        flags = [data_dir or "/data/wmt14_en_de_joined_dict_pytorch", "--arch", "transformer_wmt_en_de_big_t2t",
                 "--share-all-embeddings", "--optimizer", "adam", "--adam-betas", "0.9", "0.997", "--adam-eps",
                 "1e-9", "--clip-norm", "0.0", "--lr-scheduler", "inverse_sqrt", "--warmup-init-lr", "0.0",
                 "--warmup-updates", "4000", "--lr", "0.000846", "--min-lr", "0.0", "--dropout", "0.1",
                 "--weight-decay", "0.0", "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
                 "--max-tokens", str(job.batch_size), "--seed", "1", "--max-epoch", "1", "--no-epoch-checkpoints",
                 "--fuse-layer-norm", "--log-interval", "10", "--save-dir", "/workspace/checkpoint",
                 *(["--amp"] if job.precision == "amp" else [])]
        return ["python", "-m", "torch.distributed.run", f"--nproc_per_node={job.gpus}", "train.py", *flags], {}

    def methods(self, job: RefJob) -> tuple[Method | None, Method]:
        # the mean of the last 3000 (1 GPU) / 350 (8 GPUs) records, '%g'
        skip = 149 if job.gpus == 1 else 44 if job.gpus == 8 else None
        return (Method(skip=skip, sig=6) if skip is not None else None), Method(skip=10, reduce="harmonic_mean")


PROGRAM = DLETransformerPyTorch()
