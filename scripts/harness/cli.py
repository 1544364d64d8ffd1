"""train.py's command line: the flags, their defaults, and the checks that complete and refuse a combination
(argparse's message, exit 2). Standard library only."""

from __future__ import annotations

import argparse
from pathlib import Path

import contract
from backend import NLP, SEED003, Dist
from catalogue import MODELS, NAMES
from model_specs import IMAGENET_SGD, linear_scaling_lr

FRAMEWORKS = ("paddle", "torch")
# the published shapes (catalogue.py): ImageNet 224, PLSC's 112 and MS1M-V3 identities, Paddle's DeepLabV3+
# Cityscapes crop 769 and 19 classes, CycleGAN's 256; BERT's max_seq_len 512, the Transformer's max sentence 256
DEFAULT_IMAGE_SIZE = {m.name: m.image_size for m in MODELS.values() if m.image_size}
DEFAULT_CLASSES = {m.name: m.num_classes for m in MODELS.values() if m.num_classes}
DEFAULT_SEQ_LEN = {m.name: m.seq_len for m in MODELS.values() if m.seq_len}
DEFAULT_CORPUS = {m.name: m.corpus_size for m in MODELS.values() if m.corpus_size}
# what the contract's flags accept beyond the table's own choices, and whether argparse demands them
CHOICES = {"framework": FRAMEWORKS, "model": NAMES}
REQUIRED = ("framework", "model")
HELP = {
    "batch_size": "per-process batch (not for --count-params): images, sequences (bert), tokens (transformer)",
    "image_size": "square input side (default 224; arcface 112, deeplabv3p 769, cyclegan 256)",
    "num_classes": "classes (default 1000; arcface 93431, deeplabv3p 19)",
    "size": "seed 003's models: the published configuration (full) or a small one for CPU tests",
    "seq_len": "bert: max sequence length (default 512); transformer: max sentence length (default 256)",
    "corpus_size": "bert: sequences (default 4096), transformer: sentence pairs (default 20000) per epoch",
    "measure_epochs": "bert, transformer: whole epochs measured (after --warmup-steps steps)",
    "precision": "fp32 (no TF32 anywhere), tf32, amp (FP16 autocast + loss scaling), bf16 (BF16 autocast)",
    "data": "'synthetic' or the path of an ImageNet train_list.txt",
    "loader": "JPEG pipeline for --data <list>: cpu (Pillow in threads), gpu (nvJPEG and tensor ops on the device; on "
              "a CPU its CPU twin), dali (NVIDIA DALI); default gpu on a CUDA device, else cpu",
    "layout": "nhwc: NHWC layers and input (Paddle) / channels_last memory (PyTorch)",
    "mode": "compiled: torch.compile / paddle.jit.to_static, compiled in the first warm-up step",
}
ZERO_ALLOWED = ("warmup_steps",)  # the int keys that may be 0 (the others count at least 1)
DESCRIPTION = "The kit's training harness: one model, one data path, one timing rule, one log line, any framework."


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def non_negative_int(text: str) -> int:
    value = int(text) if text.lstrip("-").isdigit() else None
    if value is None or value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}")
    return value


def add_contract_flags(p: argparse.ArgumentParser) -> None:
    """One flag per case key of the contract (contract.py), its kind, choices and default from the table."""
    for st in contract.SETTINGS:
        options = {"dest": st.key, "default": st.default, "help": HELP.get(st.key)}
        choices = CHOICES.get(st.key, st.choices)
        if choices:
            options["choices"] = choices
        if st.kind is int:
            options["type"] = non_negative_int if st.key in ZERO_ALLOWED else positive_int
        elif st.kind is not str:
            options["type"] = st.kind
        p.add_argument(st.flag, required=st.key in REQUIRED, **options)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="train.py", description=DESCRIPTION)
    add_contract_flags(p)
    p.add_argument("--data-root", default=None, help="root the list's paths are relative to (default: its folder)")
    p.add_argument("--allow-outside-root", action="store_true",
                   help="read list paths that resolve outside the data root (absolute, '..', symlinks out); "
                        "refused by default; run_start records it")
    p.add_argument("--workers", type=positive_int, default=4,
                   help="threads per process that read (and with --loader cpu decode) JPEGs; dali: its num_threads")
    p.add_argument("--decoder", choices=("torchvision", "nvimgcodec"), default=None,
                   help="--loader gpu with PyTorch on a GPU: the batched JPEG decoder, torchvision's nvJPEG call "
                        "(default) or nvImageCodec's (make gpu-prep brings its wheels); run_start records it")
    p.add_argument("--loader-only", action="store_true",
                   help="time the loader alone for the warm-up + measured steps (no training step): the input rate")
    p.add_argument("--input-probe-steps", type=non_negative_int, default=20,
                   help="real data: before warm-up, time the loader alone over N batches (an input_rate line); 0: no")
    p.add_argument("--channels-last", dest="layout", action="store_const", const="nhwc", default=argparse.SUPPRESS,
                   help="the same as --layout nhwc")
    p.add_argument("--compile-backend", default=None,
                   help="torch: torch.compile's backend (default inductor; aot_eager skips code generation)")
    p.add_argument("--lr", type=float, default=None, help="learning rate (default 0.1 x global batch / 256)")
    p.add_argument("--momentum", type=float, default=IMAGENET_SGD["momentum"])
    p.add_argument("--weight-decay", type=float, default=IMAGENET_SGD["weight_decay"])
    p.add_argument("--threads", type=positive_int, default=None, help="CPU threads per process (default: cores/procs)")
    p.add_argument("--device", choices=("auto", "cpu", "gpu"), default="auto")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--count-params", action="store_true", help="print the model's trainable parameter count and exit")
    return p


def prepare(argv: list[str] | None = None) -> tuple[argparse.Namespace, Dist]:
    """The command line checked and completed (defaults per model, the lr rule) and this process's place in the
    run; a bad argument exits with argparse's message. --count-params is train.main's."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.channels_last = args.layout == "nhwc"  # the older name, for readers of args
    complete(parser, args)
    if args.count_params:
        return args, Dist(0, 1, 0, 1)
    check(parser, args)
    dist = Dist.from_env(args.framework)
    if MODELS[args.model].adversarial and dist.world_size > 1:
        parser.error(f"{args.model} runs in one process (seed 003's single-card CycleGAN); no data-parallel path")
    if args.lr is None and args.model not in SEED003:  # seed 003's models: their publisher's lr (model_specs.py)
        args.lr = linear_scaling_lr(args.batch_size, dist.world_size)  # the linear scaling rule the seeds use
    return args, dist


def complete(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Each model's defaults for the shape flags it takes, and a refusal of those it does not."""
    if args.model in NLP:
        for flag, value in (("--image-size", args.image_size), ("--num-classes", args.num_classes)):
            if value is not None:
                parser.error(f"{flag} does not apply to {args.model}")
        args.seq_len = args.seq_len or DEFAULT_SEQ_LEN[args.model]
        args.corpus_size = args.corpus_size or DEFAULT_CORPUS[args.model]
    elif not MODELS[args.model].num_classes:
        if args.num_classes is not None:
            parser.error(f"--num-classes does not apply to {args.model}")
        args.image_size = args.image_size or DEFAULT_IMAGE_SIZE[args.model]
    else:
        args.image_size = args.image_size or DEFAULT_IMAGE_SIZE[args.model]
        args.num_classes = args.num_classes or DEFAULT_CLASSES[args.model]
    if args.model not in SEED003 and args.size != "full":
        parser.error(f"--size applies to seed 003's models ({', '.join(SEED003)}), not {args.model}")


def check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The combinations a training run refuses (in this order: the first one found is the message)."""
    if args.batch_size is None:
        parser.error("--batch-size is required (per process)")
    if args.data != "synthetic" and not Path(args.data).is_file():
        parser.error(f"--data: no such train list: {args.data} (give 'synthetic' or a train_list.txt)")
    for flag, given in (("--loader", args.loader is not None), ("--loader-only", args.loader_only),
                        ("--allow-outside-root", args.allow_outside_root), ("--decoder", args.decoder is not None)):
        if given and args.data == "synthetic":
            parser.error(f"{flag} applies to --data <train_list.txt>: synthetic data is made on the device")
    if args.decoder is not None and (args.loader not in (None, "gpu") or args.framework != "torch"):
        parser.error("--decoder chooses the decoder of --loader gpu with --framework torch")
    if args.loader_only and args.mode == "compiled":
        parser.error("--loader-only runs no network, so --mode compiled does not apply")
    if args.model in ("arcface", "deeplabv3p") and args.batch_size < 2:
        parser.error(f"--batch-size must be >= 2 for {args.model} (its BatchNorm on pooled features needs two samples)")
    if args.model in SEED003:
        if args.data != "synthetic":
            parser.error(f"--data: {args.model} runs on synthetic data only (no reader for its dataset yet)")
        if args.layout == "nhwc":
            parser.error(f"--layout nhwc (--channels-last): {args.model} is built NCHW only")
    if args.mode == "compiled" and args.warmup_steps == 0:
        parser.error("--mode compiled needs --warmup-steps >= 1: the network compiles in the first step, "
                     "which must not be timed")
    if args.compile_backend is not None and (args.framework != "torch" or args.mode != "compiled"):
        parser.error("--compile-backend applies to --framework torch --mode compiled only")
    if args.framework == "torch" and args.mode == "compiled":
        args.compile_backend = args.compile_backend or "inductor"
    if args.model in NLP and args.measure_steps != parser.get_default("measure_steps"):
        parser.error(f"--measure-steps: {args.model} is timed over whole epochs; give --measure-epochs")
