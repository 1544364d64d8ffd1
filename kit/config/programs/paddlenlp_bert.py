"""PaddleNLP BERT-base pre-training, static graph, sequence length 128: PaddlePaddle/Perf's Bert/ Paddle rows."""

from __future__ import annotations

from kit.config.programs.base import Cluster, Impl, Program, RefJob, devices
from kit.results.extract import Method


class PaddleNLPBert(Program):
    impl = Impl(
        "paddlenlp-bert", "paddle", "bert", "PaddleNLP BERT-base pre-training (static graph, seq len 128)",
        "paddlenlp", "PaddleNLP", "", "paddlenlp-bert",
        "PaddlePaddle/Perf@e7a07c4d Bert/logs/*_LOG/PaddleNLP_bert_base_seqlen128_* (the command each log ends with)",
        data_format="wikicorpus_en_seqlen128")
    one_node_only = "the 32-GPU BERT log (2021) records no launch command"
    output_flags = ("--output_dir",)

    def recipe(self, job: RefJob, cluster: Cluster, data_dir: str | None,
               scripts_dir: str) -> tuple[list[str], dict[str, str]]:
        # The command each Bert/logs/*_LOG/PaddleNLP_* log ends with. The publisher ran it from a folder one level
        # below the checkout ('../examples/language_model/bert/static//run_pretrain.py'); from the checkout, the same.
        script = "examples/language_model/bert/static/run_pretrain.py"
        flags = ["--max_predictions_per_seq", "80", "--learning_rate", "5e-5", "--weight_decay", "0.0",
                 "--adam_epsilon", "1e-8", "--warmup_steps", "0", "--output_dir", "./tmp2/", "--logging_steps", "10",
                 "--save_steps", "20000", "--max_steps", "500", "--input_dir",
                 data_dir or "./data/wikicorpus_en_seqlen128", "--model_type", "bert", "--model_name_or_path",
                 "bert-base-uncased", "--batch_size", str(job.batch_size),
                 "--use_amp", "True" if job.precision == "amp" else "False", "--gradient_merge_steps", "88",
                 "--fuse_transformer", "true"]
        if job.gpus == 1:
            return ["python", "-u", script, *flags], {}
        return ["python", "-m", "paddle.distributed.launch", "--log_dir=./mylog", f"--gpus={devices(job.gpus)}",
                script, *flags], {}

    def methods(self, job: RefJob) -> tuple[Method | None, Method]:
        # PaddlePaddle/benchmark analysis: sort, drop the 5 lowest and highest (claims)
        return Method(skip=10, trim=5, scale=job.gpus, round=3), Method(skip=10, reduce="harmonic_mean",
                                                                       scale=job.gpus)


PROGRAM = PaddleNLPBert()
