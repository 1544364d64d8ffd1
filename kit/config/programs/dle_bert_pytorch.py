"""NVIDIA DeepLearningExamples BERT-base pre-training, phase 1, in PyTorch: PaddlePaddle/Perf's Bert/ PyTorch rows."""

from __future__ import annotations

from kit.config.programs.base import Cluster, Impl, Program, ReferenceError, RefJob
from kit.results.extract import Method

BERT_SEQUENCES_PER_STEP = 67584  # DLE's phase-1 global batch: train_batch_size x GPUs = 67584 in every log


class DLEBertPyTorch(Program):
    impl = Impl(
        "ngc-pytorch-bert", "torch", "bert", "NVIDIA DeepLearningExamples BERT-base pre-training, phase 1 (PyTorch)",
        "dle", "DeepLearningExamples", "PyTorch/LanguageModeling/BERT", "dle-bert-pytorch",
        "PaddlePaddle/Perf@e7a07c4d Bert/OtherReports/PyTorch/logs/*_LOG/*.log ('+ python3 -m "
        "torch.distributed.launch' trace, DLLogger 'PARAMETER Config')", data_format="bert-parquet")
    one_node_only = "the 32-GPU BERT log's mpirun command is not recorded"
    output_flags = ("--json-summary",)

    def recipe(self, job: RefJob, cluster: Cluster, data_dir: str | None,
               scripts_dir: str) -> tuple[list[str], dict[str, str]]:
        # The '+ python3 -m torch.distributed.launch ...' trace of each Bert/OtherReports/PyTorch log (DLE's
        # scripts/run_pretraining.sh, phase 1): --train_batch_size is per GPU and per optimizer step (batch x
        # accumulation), the accumulation keeps 67584 sequences per step, and run_pretraining.py divides it back.
        per_step = job.batch_size * job.gpus
        if BERT_SEQUENCES_PER_STEP % per_step:
            raise ReferenceError(f"NGC BERT phase 1: {job.batch_size} x {job.gpus} GPU(s) does not divide the "
                                 f"{BERT_SEQUENCES_PER_STEP} sequences of its optimizer step")
        accumulation = BERT_SEQUENCES_PER_STEP // per_step
        flags = [f"--input_dir={data_dir or '/workspace/bert/data/pretrain/phase1/unbinned/parquet/'}",
                 "--output_dir=/workspace/bert/results/checkpoints", "--config_file=bert_config_base.json",
                 "--vocab_file=vocab/vocab", f"--train_batch_size={BERT_SEQUENCES_PER_STEP // job.gpus}",
                 "--max_seq_length=128", "--max_predictions_per_seq=20", "--max_steps=20",
                 "--warmup_proportion=0.2843", "--num_steps_per_checkpoint=200", "--learning_rate=6e-3",
                 "--seed=12439", *(["--fp16"] if job.precision == "amp" else []),
                 f"--gradient_accumulation_steps={accumulation}", "--allreduce_post_accumulation",
                 "--allreduce_post_accumulation_fp16", "--do_train", "--json-summary",
                 "/workspace/bert/results/dllogger.json", "--disable_progress_bar", "--num_workers=4"]
        return ["python3", "-m", "torch.distributed.launch", f"--nproc_per_node={job.gpus}", "run_pretraining.py",
                *flags], {}

    def methods(self, job: RefJob) -> tuple[Method | None, Method]:
        return Method(reduce="last_summary"), Method(reduce="last_summary")  # the job's training_sequences_per_second


PROGRAM = DLEBertPyTorch()
