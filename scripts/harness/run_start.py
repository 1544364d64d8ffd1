"""What a run's ``run_start`` line says: the run's settings, what the framework reports of itself (version, math
read back, device, CUDA, cuDNN), the data path, the optimizer settings and where it ran, in the log's field order
(README.md beside this file). Standard library only."""

from __future__ import annotations

import platform
import socket

import contract
from backend import NLP, SEED003, UNIT, Backend, Dist
from catalogue import MODELS
from feed import Feed


def notes(backend: Backend, feed: Feed | None) -> list[str]:
    """Why the run differs from what was asked (an FP32 fallback, the gpu loader's CPU twin): run_start's note,
    and a warning on stderr each."""
    return [n for n in (backend.note, feed and feed.note) if n]


def fields(args, dist: Dist, backend: Backend, feed: Feed | None, threads: int, said: list[str]) -> dict:
    """run_start's fields, in order (FEED None: an NLP corpus, made later; SAID: notes()), then any field of the
    contract (contract.py) that applies to the model and is not stated above, as the command line gave it."""
    note = {"note": "; ".join(said)} if said else {}
    loader = {"loader": feed.loader if feed else "synthetic", "decode_device": feed and feed.decode_device,
              "decoder": feed and feed.decoder, "loader_only": args.loader_only}
    settings = backend.trainer.settings  # the optimizer's (model_specs.optimizer_settings), tuples as JSON lists
    optimizer = {key: list(value) if isinstance(value, tuple) else value for key, value in settings.items()}
    shape = {"image_size": args.image_size} if args.model not in NLP else {
        "seq_len": args.seq_len, "corpus_size": args.corpus_size, "measure_epochs": args.measure_epochs}
    seed003 = {"size": args.size, "unit": UNIT.get(args.model, "images/s")} if args.model in SEED003 else {}
    stated = dict(
        framework=args.framework,
        framework_version=backend.version,
        model=args.model,
        params=backend.count_params(),
        num_classes=args.num_classes,
        precision=args.precision,
        math=backend.math,
        amp_effective=backend.amp_effective,
        **note,
        layout=args.layout,
        mode=args.mode,
        compiler=backend.compiler,
        device=backend.device,
        device_name=backend.device_name,
        device_count=backend.device_count,
        cuda_version=backend.cuda_version,
        cudnn_version=backend.cudnn_version,
        ranks=dist.world_size,
        local_batch=args.batch_size,
        global_batch=args.batch_size * dist.world_size,
        **shape,
        **seed003,
        data=args.data,
        allow_outside_root=args.allow_outside_root,
        outside_root=feed and feed.outside_root,  # entries read from outside the data root
        **loader,
        workers=args.workers if feed and feed.decoder else None,
        channels_last=args.channels_last,
        threads=threads,
        warmup_steps=args.warmup_steps,
        measure_steps=args.measure_steps,
        **optimizer,
        seed=args.seed,
        host=socket.gethostname(),
        python=platform.python_version(),
    )
    model = MODELS[args.model]
    return stated | {st.start: getattr(args, st.key) for st in contract.SETTINGS
                     if st.applies(model) and st.start not in stated}
