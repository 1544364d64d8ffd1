"""PURE: the seeds' own benchmark programs, launched as published: (case, place in the cluster) -> argv + env + cwd.

    impl = implementation("torch", "resnet50")             # ReferenceError names the combinations that exist
    cmd = build(RefJob("torch", "resnet50", "amp", 256, 8, 1), Cluster(rank=0, hosts=("10.0.0.1",)))
    cmd.argv, cmd.env, cmd.cwd                              # what the publisher ran, from where
    cmd.publisher_method, cmd.kit_method                    # their reduction (their figure) and the kit's

Each recipe is the publisher's script with its flags, read where the comments say; where the recorded
logs (tests/test_reference.py checks them) and a script disagree, the log wins. Model code is never
vendored: it is checked out at the pinned commits (docker/pins.yaml) under CODE_ROOT in the images, or
under a host's `model_code` root, beside the small packages a program imports (Impl.packages: DLE PyTorch's
dllogger), which are put before the PYTHONPATH it inherits on its host. Where it is safe (RefCommand.scratch) a
program runs in a scratch folder outside the run's folder that mirrors its checkout folder, so what it saves where
it runs (checkpoints) never lands in the checkout or the run (scripts/reference/launch.py). No process starts here.

Beside the catalog (kit.config.programs) because two layers read the recipes: the run's command builder
(kit.run.command) launches each program from here, and `kit verify` rebuilds each recorded command from here
(kit.audit.rules.programs), which imports nothing of kit.run.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from kit.config.programs import (  # noqa: F401  (the catalog, also read through this module)
    BY_NAME,
    CODE_DIRS,
    CODE_ROOT,
    PLSC_PATCH,
    SCRIPTS_DIR,
    UNPINNED_CODE_DIRS,
    Impl,
    ReferenceError,
    RefJob,
    check,
    combinations,
    implementation,
    layout_and_mode,
)
from kit.core.layout import RunLog
from kit.core.secrets import redact
from kit.results.extract import Method


@dataclass(frozen=True)
class Cluster:
    """Where this host sits: its rank and every node's address in rank order (rank 0 is the master)."""

    rank: int = 0
    hosts: tuple[str, ...] = ("127.0.0.1",)
    port: int = 29500
    nic: str | None = None

    @property
    def here(self) -> str:
        return self.hosts[self.rank]


@dataclass(frozen=True)
class RefCommand:
    impl: Impl
    argv: list[str]  # empty: nothing starts on this host (rank 0's mpirun reaches it over ssh)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str = ""
    publisher_method: Method | None = None
    kit_method: Method = Method()
    work_copy: str | None = None  # run from a patched copy of cwd (PLSC), see scripts/reference/launch.py
    patch: str | None = None  # relative to scripts/
    add: tuple[str, ...] = ()  # files (relative to scripts/) copied into the work copy
    note: str = ""
    outputs: tuple[str, ...] = ()  # files the program writes besides its output (where it runs, or absolute)
    data_dir: str | None = None  # what it reads; None: its publisher's default path, or its synthetic mode
    code_root: str = CODE_ROOT  # where it found the checkouts, and the kit's scripts (for the record)
    scripts_dir: str = SCRIPTS_DIR
    pythonpath: tuple[str, ...] = ()  # put before the PYTHONPATH the program inherits on its host (Impl.packages)
    scratch: bool = False  # run in a scratch mirror of cwd outside the run's folder, removed after the run
    checkout: str = ""  # the top folder of cwd's git checkout (git's safe.directory names it)

    def shell(self) -> str:
        """One line to paste into a shell: cd, environment, command (every argument quoted)."""
        if not self.argv:
            return f"# {self.note}"
        env = [f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items())]
        if self.pythonpath:
            env.append(f"PYTHONPATH={shlex.quote(':'.join(self.pythonpath))}${{PYTHONPATH:+:$PYTHONPATH}}")
        where = f"cd {shlex.quote(self.work_copy or self.cwd)} && " if self.cwd else ""
        return where + "".join(f"{e} " for e in env) + shlex.join(self.argv)


def checkout_dir(root: str, impl: Impl) -> str:
    """The top folder of the program's git checkout under a model-code root (its code is `impl.subdir` inside)."""
    folder = CODE_DIRS.get(impl.code) or UNPINNED_CODE_DIRS[impl.code]
    return "/".join(p for p in (root.rstrip("/"), folder) if p)


def runs_in_scratch(impl: Impl, argv: list[str], nodes: int) -> bool:
    """Whether the program may run in a scratch folder of its host (RefCommand.scratch): not PLSC, which runs in
    its patched work copy (the run's evidence, checkpoint-free: the patch ends it before its pass saves), nor one
    mpirun over several hosts, whose ranks there start in rank 0's working directory (Open MPI passes it on)."""
    return impl.name != "plsc" and not (nodes > 1 and argv[:1] in (["mpirun"], ["mpiexec"]))


def _devices(n: int) -> str:
    return ",".join(str(i) for i in range(n))


def _paddleclas(job: RefJob, cl: Cluster, data_dir: str | None) -> tuple[list[str], dict[str, str]]:
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
    argv = ["python", "-m", "paddle.distributed.launch", "--gpus", _devices(job.gpus_per_node), *train]
    if job.nodes == 1:
        return argv, {}
    return argv, {
        "PADDLE_TRAINER_ENDPOINTS": ",".join(f"{h}:{cl.port}" for h in cl.hosts),
        "PADDLE_TRAINERS": ",".join(cl.hosts), "PADDLE_TRAINER_ID": str(cl.rank), "POD_IP": cl.here,
        "PADDLE_PORT": str(cl.port), "TRAINER_PORTS_NUM": str(job.gpus_per_node),
    }


def _fleetx(job: RefJob, cl: Cluster, data_dir: str | None, scripts: str) -> tuple[list[str], dict[str, str]]:
    train = [f"{scripts}/fleetx/vgg16_benchmark.py", "--batch-size", str(job.batch_size)]
    train += {"amp": ["--amp"], "auto": ["--auto"]}.get(job.precision, [])
    train += ["--data-dir", data_dir] if data_dir else []
    env = {"PYTHONPATH": "."}  # cwd is FleetX/python: the fleetx package of the pinned checkout
    if job.gpus == 1:
        return ["python", *train], env
    launch = ["python", "-m", "paddle.distributed.launch", "--gpus", _devices(job.gpus_per_node)]
    if job.nodes > 1:
        launch += ["--master", f"{cl.hosts[0]}:{cl.port}", "--nnodes", str(job.nodes), "--rank", str(cl.rank)]
        # the launcher takes this node's address from POD_IP (else gethostbyname(hostname): 127.0.x.1 or nothing
        # on many hosts, and then rank 0 never serves --master); as PaddleClas's platform set it, argv unchanged
        env["POD_IP"] = cl.here
    return [*launch, *train], env


def _plsc(job: RefJob, cl: Cluster) -> tuple[list[str], dict[str, str]]:
    # DLPerf runner.sh: `python3 train.py` on one GPU (loss arcface), else paddle.distributed.launch with
    # --cluster_node_ips/--node_ip/--selected_gpus (loss dist_arcface); batch and loss are flags here, not sed.
    loss = "arcface" if job.gpus == 1 else "dist_arcface"
    train = ["train.py", "--loss-type", loss, "--batch-size", str(job.batch_size)]
    if job.gpus == 1:
        return ["python3", *train], {}
    ips = cl.here if job.nodes == 1 else ",".join(cl.hosts)
    argv = ["python3", "-m", "paddle.distributed.launch", f"--cluster_node_ips={ips}", f"--node_ip={cl.here}",
            f"--selected_gpus={_devices(job.gpus_per_node)}", *train]
    if job.nodes == 1:
        return argv, {}
    # Paddle >= 2 reads these legacy flags in a compatibility mode that drops --cluster_node_ips/--node_ip (each
    # node would be a job of its own); the same cluster in the launcher's PaddleCloud variables keeps DLPerf's job
    return argv, {"PADDLE_TRAINERS": ",".join(cl.hosts), "POD_IP": cl.here, "PADDLE_TRAINER_ID": str(cl.rank),
                  "PADDLE_PORT": str(cl.port), "TRAINER_PORTS_NUM": str(job.gpus_per_node),
                  "PADDLE_TRAINERS_NUM": str(job.nodes)}


def _ngc_pytorch(job: RefJob, cl: Cluster, data_dir: str | None) -> tuple[list[str], dict[str, str]]:
    amp = ["--amp", "--static-loss-scale", "256"] if job.precision == "amp" else []
    b = ["-b", str(job.batch_size)]
    # the Perf runs' layout is main.py's default (nchw); DLE's own synthetic AMP benchmark is NHWC (layout_and_mode)
    nhwc = ["--memory-format", "nhwc"] if layout_and_mode(job) == ("nhwc", "eager") else []
    if job.nodes > 1:  # README's run_benchmark.sh under mpirun, one per node: ${precision} unquoted, no loss scale
        main = ["--arch", "resnet50", *amp[:1], *b, "--training-only", "-p", "1", "--raport-file", "benchmark.json",
                "--epochs", "1", "--prof", "100", *nhwc, data_dir or "./data/imagenet"]
        return ["python", "./multiproc.py", "--master_addr", cl.hosts[0], "--master_port", str(cl.port),
                "--nnodes", str(job.nodes), "--nproc_per_node", str(job.gpus_per_node), "--node_rank",
                str(cl.rank), "./main.py", *main], {}
    head = ["--arch", "resnet50", *b, "--training-only", "-p", "1", "--raport-file", "benchmark.json"]
    if job.gpus == 1:  # pytorch_test_all.sh: the flags in the script's order
        return ["python", "./main.py", *head, "--epochs", "1", "--prof", "100", *amp, *nhwc,
                data_dir or "/imagenet"], {}
    main = [*head, *amp, "--epochs", "1", "--prof", "100", *nhwc, data_dir or "/imagenet"]
    return ["python", "./multiproc.py", "--nproc_per_node", str(job.gpus_per_node), "./main.py", *main], {}


def _ngc_tensorflow(job: RefJob, cl: Cluster, data_dir: str | None) -> tuple[list[str], dict[str, str]]:
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
        return ["mpiexec", "--allow-run-as-root", "--bind-to", "socket", "-np", str(job.gpus), "python3", "main.py",
                *flags], {}
    if cl.rank != 0:
        return [], {}
    hosts = ",".join(f"{h}:{job.gpus_per_node}" for h in cl.hosts)
    exports = ["-x", "PATH", "-x", "LD_LIBRARY_PATH"] + (["-x", "NCCL_SOCKET_IFNAME"] if cl.nic else [])
    return ["mpirun", "--allow-run-as-root", "-tag-output", "--bind-to", "none", "-timestamp-output",
            "-np", str(job.gpus), "-H", hosts, *exports, "python", "main.py", *flags], {}


def _ngc_mxnet(job: RefJob, data_dir: str | None) -> tuple[list[str], dict[str, str]]:
    dtype, report = ("float16", "fp16") if job.precision == "amp" else ("float32", "fp32")
    argv = ["python", "benchmark.py", "-n", str(job.gpus_per_node), "-b", str(job.batch_size), "--dtype", dtype,
            "-o", f"benchmark_report_{report}.json", "-i", "500", "-e", "3", "-w", "1", "--num-examples", "32000",
            "--mode", "train"]
    return argv + (["--data-root", data_dir] if data_dir else []), {}


# ---- PaddlePaddle/Perf's other models: the commands their logs record (tests/test_reference.py checks them) ----

def _paddlenlp_bert(job: RefJob, data_dir: str | None) -> tuple[list[str], dict[str, str]]:
    # The command each Bert/logs/*_LOG/PaddleNLP_* log ends with. The publisher ran it from a folder one level
    # below the checkout ('../examples/language_model/bert/static//run_pretrain.py'); from the checkout, the same file.
    script = "examples/language_model/bert/static/run_pretrain.py"
    flags = ["--max_predictions_per_seq", "80", "--learning_rate", "5e-5", "--weight_decay", "0.0",
             "--adam_epsilon", "1e-8", "--warmup_steps", "0", "--output_dir", "./tmp2/", "--logging_steps", "10",
             "--save_steps", "20000", "--max_steps", "500", "--input_dir", data_dir or "./data/wikicorpus_en_seqlen128",
             "--model_type", "bert", "--model_name_or_path", "bert-base-uncased", "--batch_size", str(job.batch_size),
             "--use_amp", "True" if job.precision == "amp" else "False", "--gradient_merge_steps", "88",
             "--fuse_transformer", "true"]
    if job.gpus == 1:
        return ["python", "-u", script, *flags], {}
    return ["python", "-m", "paddle.distributed.launch", "--log_dir=./mylog", f"--gpus={_devices(job.gpus)}", script,
            *flags], {}


def _paddleseg_hrnetw18(job: RefJob) -> tuple[list[str], dict[str, str]]:
    # The command of each HRNetW18/logs/paddle/PaddleSeg_fcn_hrnetw18_* log (PaddleSeg's test_tipc benchmark);
    # the README's AMP is --precision=fp16 --amp_level=O2. Cityscapes is read where the config says (data/cityscapes).
    amp = job.precision == "amp"
    devices = _devices(job.gpus)
    train = ["tools/train.py", "--config", "test_tipc/configs/fcn_hrnetw18/fcn_hrnetw18_1024x512_cityscapes.yml",
             "--device", "gpu", "--save_interval", "500", "--seed", "100", "--num_workers", "8", "--device=gpu",
             f"--save_dir=./test_tipc/output/fcn_hrnetw18/benchmark_train/norm_train_gpus_{devices}_autocast_"
             f"{'fp16' if amp else 'fp32'}", "--iters=400", f"--precision={'fp16' if amp else 'fp32'}",
             f"--batch_size={job.batch_size}", *(["--amp_level=O2"] if amp else []), "--log_iters", "15",
             "--repeats", "500"]
    if job.gpus == 1:
        return ["python", *train], {}
    return ["python", "-m", "paddle.distributed.launch", f"--devices={devices}", *train], {}


BERT_SEQUENCES_PER_STEP = 67584  # DLE's phase-1 global batch: train_batch_size x GPUs = 67584 in every log


def _ngc_pytorch_bert(job: RefJob, data_dir: str | None) -> tuple[list[str], dict[str, str]]:
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
             "--max_seq_length=128", "--max_predictions_per_seq=20", "--max_steps=20", "--warmup_proportion=0.2843",
             "--num_steps_per_checkpoint=200", "--learning_rate=6e-3", "--seed=12439",
             *(["--fp16"] if job.precision == "amp" else []), f"--gradient_accumulation_steps={accumulation}",
             "--allreduce_post_accumulation", "--allreduce_post_accumulation_fp16", "--do_train",
             "--json-summary", "/workspace/bert/results/dllogger.json", "--disable_progress_bar", "--num_workers=4"]
    return ["python3", "-m", "torch.distributed.launch", f"--nproc_per_node={job.gpus}", "run_pretraining.py",
            *flags], {}


def _ngc_pytorch_transformer(job: RefJob, data_dir: str | None) -> tuple[list[str], dict[str, str]]:
    # The first line of each Transformer/OtherReports/PyTorch/logs/*_LOG/transformer_pytorch_* log; the README's
    # 'FP16' column is --amp (Namespace amp=True, fp16=False). --max-tokens is per GPU (the batch size here).
    flags = [data_dir or "/data/wmt14_en_de_joined_dict_pytorch", "--arch", "transformer_wmt_en_de_big_t2t",
             "--share-all-embeddings", "--optimizer", "adam", "--adam-betas", "0.9", "0.997", "--adam-eps", "1e-9",
             "--clip-norm", "0.0", "--lr-scheduler", "inverse_sqrt", "--warmup-init-lr", "0.0", "--warmup-updates",
             "4000", "--lr", "0.000846", "--min-lr", "0.0", "--dropout", "0.1", "--weight-decay", "0.0",
             "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1", "--max-tokens",
             str(job.batch_size), "--seed", "1", "--max-epoch", "1", "--no-epoch-checkpoints", "--fuse-layer-norm",
             "--log-interval", "10", "--save-dir", "/workspace/checkpoint",
             *(["--amp"] if job.precision == "amp" else [])]
    return ["python", "-m", "torch.distributed.run", f"--nproc_per_node={job.gpus}", "train.py", *flags], {}


def methods(impl: Impl, job: RefJob) -> tuple[Method | None, Method]:
    """(the publisher's reduction, the kit's): expected.yaml's rules per log; the kit's drops the same warm-up
    and takes the harmonic mean of per-step throughputs (samples / time, as the harness does), in global samples/s."""
    name, n = impl.name, job.nodes
    if name == "ngc-pytorch":
        skip = 9 if job.gpus == 1 else 8
        pub = Method(reduce="last_summary") if n > 1 else Method(skip=skip)
        return pub, Method(skip=skip, reduce="harmonic_mean")
    if name == "ngc-tensorflow":
        return (Method(reduce="last_summary") if n > 1 else Method(skip=5)), Method(skip=5, reduce="harmonic_mean")
    if name == "ngc-mxnet":
        return Method(skip=1, reduce="harmonic_mean", sig=5), Method(skip=1, reduce="harmonic_mean")
    if name == "paddleclas":  # per-card ips: scaled by the GPUs
        return Method(skip=10, scale=job.gpus), Method(skip=10, reduce="harmonic_mean", scale=job.gpus)
    if name == "paddlenlp-bert":  # PaddlePaddle/benchmark analysis: sort, drop the 5 lowest and highest (claims)
        return Method(skip=10, trim=5, scale=job.gpus, round=3), Method(skip=10, reduce="harmonic_mean", scale=job.gpus)
    if name == "paddleseg-hrnetw18":  # as PaddleNLP's: skip 2 (30 iterations), trim 5, x cards, 3 decimals (claims)
        return Method(skip=2, trim=5, scale=job.gpus, round=3), Method(skip=2, reduce="harmonic_mean", scale=job.gpus)
    if name == "ngc-pytorch-bert":  # the end-of-run training_sequences_per_second (the whole job's)
        return Method(reduce="last_summary"), Method(reduce="last_summary")
    if name == "ngc-pytorch-transformer":  # the mean of the last 3000 (1 GPU) / 350 (8 GPUs) records, '%g'
        skip = 149 if job.gpus == 1 else 44 if job.gpus == 8 else None
        kit = Method(skip=10, reduce="harmonic_mean")
        return (Method(skip=skip, sig=6) if skip is not None else None), kit
    if name == "plsc":  # DLPerf extract_paddle_logs.py: np.mean(records[50//10*n : 150//10*n]), 2 decimals; a numpy
        # slice keeps what is there, and the patch ends every trainer at batch 150 (15 records), so: all after 5n
        return Method(skip=5 * n, round=2), Method(skip=5 * n, reduce="harmonic_mean")
    # fleetx: 'speed' is steps/s. Seed 000 (FleetX VGG16 baseline): skip the first 20 steps, the mean throughput of
    # the next 100 (the median of 7 runs: the suite's repeats); the kit's: the same steps, samples / time
    scale = job.batch_size * job.gpus
    return Method(skip=20, count=100, scale=scale), Method(skip=20, reduce="harmonic_mean", scale=scale)


def log_reduction(log: RunLog) -> tuple[Method, str] | None:
    """A published program's log (logs/<impl>/<model>/bz<B>/<N>n<G>g/...): (the reduction its figure takes — the
    publisher's where one is published, else the kit's — and its log format). None for any other log.
    Decided by the recipe in this kit, never by anything written beside the log."""
    impl = BY_NAME.get(log.group.framework)
    if impl is None or impl.model != log.group.model:
        return None
    publisher, kit = methods(impl, RefJob(impl.framework, impl.model, log.group.precision, log.group.batch,
                                          log.gpus_per_node, log.nodes))
    return publisher or kit, impl.log_format


def build(job: RefJob, cluster: Cluster = Cluster(), *, code_root: str | None = None, data_dir: str | None = None,
          scripts_dir: str = SCRIPTS_DIR, recipe_only: bool = False) -> RefCommand:
    """recipe_only: the command of a program no image checks out yet (kit.config.programs.UNPINNED_CODE_DIRS)."""
    check(job, recipe_only)
    impl = implementation(job.framework, job.model)
    if len(cluster.hosts) != job.nodes or not 0 <= cluster.rank < job.nodes:
        raise ReferenceError(f"{job.nodes} node(s) need as many host addresses and a rank below that; got rank "
                             f"{cluster.rank} of {len(cluster.hosts)} host(s)")
    root = (code_root or CODE_ROOT).rstrip("/")
    checkout = checkout_dir(root, impl)
    cwd = "/".join(p for p in (checkout, impl.subdir) if p)
    work_copy = patch = None
    add: tuple[str, ...] = ()
    if impl.name == "paddleclas":
        argv, env = _paddleclas(job, cluster, data_dir)
    elif impl.name == "fleetx":
        argv, env = _fleetx(job, cluster, data_dir, scripts_dir)
    elif impl.name == "plsc":
        argv, env = _plsc(job, cluster)
        work_copy, patch, add = "plsc-patched", PLSC_PATCH, ("plsc/train.py",)
    elif impl.name == "ngc-pytorch":
        argv, env = _ngc_pytorch(job, cluster, data_dir)
    elif impl.name == "ngc-tensorflow":
        argv, env = _ngc_tensorflow(job, cluster, data_dir)
    elif impl.name == "paddlenlp-bert":
        argv, env = _paddlenlp_bert(job, data_dir)
    elif impl.name == "paddleseg-hrnetw18":
        argv, env = _paddleseg_hrnetw18(job)
    elif impl.name == "ngc-pytorch-bert":
        argv, env = _ngc_pytorch_bert(job, data_dir)
    elif impl.name == "ngc-pytorch-transformer":
        argv, env = _ngc_pytorch_transformer(job, data_dir)
    else:
        argv, env = _ngc_mxnet(job, data_dir)
    if cluster.nic and argv:
        env = {**env, "NCCL_SOCKET_IFNAME": cluster.nic}
    # its small dependencies from checkouts beside its code (nothing installed), before what its host's Python finds
    pythonpath = tuple(f"{root}/{p.folder}" for p in impl.packages) if argv else ()
    note = "" if argv else f"nothing to start here: rank 0's mpirun starts this host's {job.gpus_per_node} ranks"
    if job.data == "synthetic" and argv:
        argv, data_dir = synthetic(impl, argv), None
    publisher, kit = methods(impl, job)
    return RefCommand(impl, argv, env, cwd, publisher, kit, work_copy, patch, add, note, outputs(impl, argv),
                      data_dir, code_root or CODE_ROOT, scripts_dir, pythonpath,
                      bool(argv) and runs_in_scratch(impl, argv, job.nodes), checkout)


def data_path(root: str | None, job: RefJob) -> str | None:
    """Where the job's program reads its data under a host's data root: <root>/<its format>/ (data_prep), or
    None (synthetic, a program whose data the kit does not make, or no root: the publisher's default path)."""
    impl = implementation(job.framework, job.model)
    if not root or job.data != "imagenet" or not impl.data_format:
        return None
    return f"{root.rstrip('/')}/{impl.data_format}"


def synthetic(impl: Impl, argv: list[str]) -> list[str]:
    """The published argv switched to the program's own synthetic-data mode (Impl.synthetic)."""
    if impl.name == "ngc-pytorch":  # the positional data path stays (main.py requires it), unread
        return [*argv[:-1], "--data-backend", "syntetic", argv[-1]]
    if impl.name == "ngc-tensorflow":  # DLE TF: no --data_dir means synthetic input
        return [a for a in argv if not a.startswith("--data_dir=")]
    if impl.name == "plsc":  # DLPerf's train.py: random samples, always
        return argv
    if impl.name == "ngc-mxnet":
        if "--data-root" in argv:
            at = argv.index("--data-root")
            argv = argv[:at] + argv[at + 2:]
        return [*argv, "--data-backend", "synthetic"]
    raise ReferenceError(f"{impl.title} has no synthetic-data mode")


def outputs(impl: Impl, argv: list[str]) -> tuple[str, ...]:
    """The files a program's flags make it write besides its output: DLE's DLLogger raport (PyTorch
    --raport-file, MXNet -o) and results folder (TensorFlow --results_dir). Paddle's launcher logs go to
    PADDLE_LOG_DIR (kit.run.command); PLSC runs in a work copy inside the run's folder."""
    flag = {"ngc-pytorch": "--raport-file", "ngc-mxnet": "-o", "ngc-tensorflow": "--results_dir",
            "paddlenlp-bert": "--output_dir", "ngc-pytorch-bert": "--json-summary", "paddleseg-hrnetw18": "--save_dir",
            "ngc-pytorch-transformer": "--save-dir"}.get(impl.name)
    if flag is None:
        return ()
    found = [value for key, value in zip(argv, argv[1:], strict=False) if key == flag]
    return tuple(found + [a.split("=", 1)[1] for a in argv if a.startswith(flag + "=")])


def record(cmd: RefCommand, job: RefJob, cluster: Cluster) -> dict:
    """The static part of the sidecar <log>.cmd.json (scripts/reference/launch.py adds what it finds at run time)."""
    return {
        "schema_version": 1,
        "impl": cmd.impl.name, "title": cmd.impl.title, "source": cmd.impl.source,
        "framework": job.framework, "model": job.model, "precision": job.precision, "batch_size": job.batch_size,
        "nodes": job.nodes, "gpus_per_node": job.gpus_per_node, "rank": cluster.rank,
        "cwd": cmd.cwd, "argv": cmd.argv, "env": redact(cmd.env), "pythonpath": list(cmd.pythonpath),
        "command": cmd.shell(),
        "log_format": cmd.impl.log_format,
        "publisher_method": cmd.publisher_method.to_dict() if cmd.publisher_method else None,
        "kit_method": cmd.kit_method.to_dict(),
        "model_code": cmd.impl.code, "work_copy": cmd.work_copy, "patch": cmd.patch, "add": list(cmd.add),
        "data": {"mode": job.data, "format": None if job.data == "synthetic" else cmd.impl.data_format,
                 "path": cmd.data_dir, "synthetic": cmd.impl.synthetic if job.data == "synthetic" else None},
        "cluster": {"hosts": list(cluster.hosts), "port": cluster.port, "nic": cluster.nic},
        "code_root": cmd.code_root, "scripts_dir": cmd.scripts_dir,
    }


def rebuild(meta: dict) -> RefCommand:
    """What the recipe builds for the job and placement a sidecar records (kit verify compares the two);
    ReferenceError/KeyError/TypeError/ValueError when the record does not name a job this kit knows."""
    data = meta.get("data") or {}
    job = RefJob(meta["framework"], meta["model"], meta["precision"], int(meta["batch_size"]),
                 int(meta["gpus_per_node"]), int(meta["nodes"]), data.get("mode"))
    place = meta["cluster"]
    cluster = Cluster(int(meta["rank"]), tuple(str(h) for h in place["hosts"]), int(place["port"]), place.get("nic"))
    return build(job, cluster, code_root=str(meta["code_root"]), data_dir=data.get("path"),
                 scripts_dir=str(meta["scripts_dir"]))
