"""Where a run's batches come from: one fixed synthetic batch made once on the device, a JPEG loader's batches
(loader_cpu.py, loader_gpu.py, loader_dali.py over data.py), or seed 003's NLP corpus (synthetic.py), and what
run_start says of them. Standard library (+ numpy through synthetic.py); the loaders are imported when used."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import repeat

from backend import SEED003, Backend, Dist, HarnessFailure
from model_specs import seed003_config

GPU_TWIN_NOTE = ("loader gpu decodes with nvJPEG on a GPU: on a CPU its twin runs (Pillow decodes; crop, resize "
                 "and normalisation are tensor ops on the CPU)")


@dataclass
class Feed:
    """Where a run's batches come from, and what run_start says of it."""

    loader: str  # synthetic | cpu | gpu | dali
    batches: Iterator  # endless device batches
    decode_device: str | None = None  # where JPEGs are decoded: cpu | gpu
    decoder: str | None = None  # what decodes them
    note: str | None = None  # the pipeline ran elsewhere than its name says
    outside_root: int | None = None  # list entries read from outside the data root (--allow-outside-root)
    stats: Callable[[], dict] = dict  # the loader's counters for run_stop (the gpu loader's decode calls)


def open_feed(args, backend: Backend, dist: Dist) -> Feed:
    """The batches: one fixed random batch made once on the device (synthetic), or a JPEG loader's."""
    if args.model in SEED003:  # numpy-made, so both frameworks train on the same batch
        import synthetic

        arrays = synthetic.vision_batch(args.model, args.batch_size, args.image_size, args.num_classes or 0,
                                        args.seed + dist.rank)
        return Feed("synthetic", repeat(backend.to_device(arrays)))
    if args.data == "synthetic":
        fixed = backend.synthetic_batch(args.batch_size, args.image_size, args.num_classes, args.seed + dist.rank)
        return Feed("synthetic", repeat(fixed))
    import data

    name = args.loader or ("gpu" if backend.device == "gpu" else "cpu")
    gpu = dist.local_rank if backend.device == "gpu" else None
    shard = {"rank": dist.rank, "world_size": dist.world_size, "seed": args.seed, "workers": args.workers}
    try:
        entries = data.load_list(args.data, args.data_root, args.num_classes, args.allow_outside_root)
        if name == "cpu":
            import loader_cpu

            loader = loader_cpu.ImageListLoader(entries, args.batch_size, args.image_size, **shard)
            handoff = backend.batch_from_numpy
        else:
            import loader_dali
            import loader_gpu

            extra = {"decoder": args.decoder or "torchvision"} if name == "gpu" else {}
            kind = loader_gpu.DeviceImageLoader if name == "gpu" else loader_dali.DaliLoader
            loader = kind(entries, args.batch_size, args.image_size, framework=args.framework, gpu=gpu,
                          channels_last=args.layout == "nhwc", **shard, **extra)
            handoff = backend.batch_from_loader
    except (data.DataError, data.LoaderUnavailable) as exc:
        raise HarnessFailure("bad_input", str(exc)) from None
    note = GPU_TWIN_NOTE if name == "gpu" and gpu is None else None
    stats = getattr(loader, "stats", dict)
    return Feed(name, loader_batches(loader, handoff), loader.decode_device, loader.decoder, note, entries.outside,
                stats)


def loader_batches(loader, handoff) -> Iterator:
    import data

    with loader:
        try:
            for images, labels in loader:
                yield handoff(images, labels)
        except data.DataError as exc:
            raise HarnessFailure("bad_input", str(exc)) from None


def batches(args, backend: Backend, dist: Dist) -> Iterator:
    """An endless stream of device batches (open_feed's)."""
    return open_feed(args, backend, dist).batches


def nlp_corpus(args, dist: Dist) -> list:
    """The epoch's batches (synthetic.Batch, numpy) for this rank: the same corpus on every rank, rows split."""
    import synthetic

    vocab = seed003_config(args.model, args.size)["vocab"]  # the configuration's vocabulary
    if args.model == "bert":
        return synthetic.bert_corpus(args.corpus_size, args.batch_size, args.seq_len, vocab, args.seed,
                                     dist.rank, dist.world_size)
    return synthetic.transformer_corpus(args.corpus_size, args.batch_size, args.seq_len, vocab, args.seed,
                                        dist.rank, dist.world_size)
