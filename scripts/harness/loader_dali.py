"""The DALI input pipeline: NVIDIA DALI reads the list's files, decodes them with nvJPEG ("mixed": Huffman on the
CPU, the rest on the GPU) fused with the random crop, resizes, flips and normalises on the GPU.

    with DaliLoader(entries, 64, 224, framework="torch", gpu=0, rank=r, world_size=n) as loader:
        images, labels = next(loader)   # device tensors: float32 [B,3,S,S] ([B,S,S,3] with channels_last), int64 [B]

The same augmentation as loader_cpu/loader_gpu (area 0.08-1, aspect 3/4-4/3, 10 tries, bilinear antialiased
resize, flip p=0.5, ImageNet mean/std), drawn by DALI's own generators: the distributions agree, not the
crop of a given image. DALI's reader shards the list itself (shard_id = rank, num_shards = ranks, shards moving
every epoch) and shuffles within a read-ahead buffer; the partial last batch of a shard is dropped. nvidia.dali
is imported when a loader is built; without it the loader refuses with what to install. `pipeline_params` is
the whole mapping from the harness's settings to DALI's arguments (pure, tested without DALI).
"""

from __future__ import annotations

import importlib

from data import CROP_RATIO, CROP_SCALE, IMAGENET_MEAN, IMAGENET_STD, LoaderUnavailable, shard_size

ENUM_ARGS = ("output_type", "interp_type", "dtype")  # values named here, looked up in nvidia.dali.types
DECODER = "nvidia.dali.fn.decoders.image_random_crop(device='mixed')"


def import_dali():
    """nvidia.dali, or LoaderUnavailable saying what to install."""
    try:
        import nvidia.dali as dali
    except ImportError:
        raise LoaderUnavailable("loader dali: NVIDIA DALI is not installed (pip install nvidia-dali-cuda120, or "
                                "nvidia-dali-cuda130 for CUDA 13; see DALI's installation guide)") from None
    except Exception as exc:  # an install that fails to load its libraries
        raise LoaderUnavailable(f"loader dali: NVIDIA DALI cannot be loaded: {type(exc).__name__}: {exc}") from None
    return dali


def pipeline_params(entries, batch_size: int, image_size: int, *, gpu: int, rank: int, world_size: int, seed: int,
                    workers: int, channels_last: bool, prefetch: int) -> dict:
    """The arguments of the pipeline and of each operator, enum values by name (ENUM_ARGS)."""
    return {
        "pipeline": {"batch_size": batch_size, "num_threads": workers, "device_id": gpu, "seed": seed,
                     "prefetch_queue_depth": prefetch},
        "reader": {"files": [path for path, _ in entries], "labels": [label for _, label in entries],
                   "shard_id": rank, "num_shards": world_size, "random_shuffle": True, "name": "reader"},
        "decoder": {"device": "mixed", "output_type": "RGB", "random_area": list(CROP_SCALE),
                    "random_aspect_ratio": list(CROP_RATIO), "num_attempts": 10},
        "resize": {"resize_x": image_size, "resize_y": image_size, "interp_type": "INTERP_LINEAR",
                   "antialias": True},
        "normalize": {"dtype": "FLOAT", "output_layout": "HWC" if channels_last else "CHW",
                      "mean": [m * 255 for m in IMAGENET_MEAN], "std": [s * 255 for s in IMAGENET_STD]},
        "flip_probability": 0.5,
    }


class DaliLoader:
    """Infinite iterator of (images, labels) FRAMEWORK tensors on GPU `gpu` from a DALI pipeline; close() ends it."""

    decode_device = "gpu"
    decoder = DECODER

    def __init__(self, entries, batch_size: int, image_size: int, *, framework: str, gpu: int | None, rank: int = 0,
                 world_size: int = 1, seed: int = 0, workers: int = 2, channels_last: bool = False,
                 prefetch: int = 2) -> None:
        dali = import_dali()
        if gpu is None:
            raise LoaderUnavailable("loader dali decodes on a GPU, and this run's device is the CPU "
                                    "(use --loader cpu or gpu)")
        self.steps_per_epoch = shard_size(entries, batch_size, world_size) // batch_size
        params = pipeline_params(entries, batch_size, image_size, gpu=gpu, rank=rank, world_size=world_size,
                                 seed=seed, workers=workers, channels_last=channels_last, prefetch=prefetch)
        self._iterator = self._build(dali, params, framework)
        if framework == "torch":
            self._convert = lambda images, labels: (images, labels.reshape(-1).long())
        else:  # older DALIs hand Paddle LoDTensors, newer ones Tensors: to_tensor takes both (and copies)
            import paddle

            self._convert = lambda images, labels: (paddle.to_tensor(images),
                                                    paddle.to_tensor(labels).reshape([-1]).astype("int64"))

    @staticmethod
    def _build(dali, params: dict, framework: str):
        from nvidia.dali import fn, types
        from nvidia.dali.plugin.base_iterator import LastBatchPolicy

        plugin = "pytorch" if framework == "torch" else "paddle"
        try:
            DALIGenericIterator = importlib.import_module(f"nvidia.dali.plugin.{plugin}").DALIGenericIterator
        except Exception as exc:  # e.g. an older DALI's Paddle plugin importing paddle.fluid, which Paddle 3 lacks
            raise LoaderUnavailable(f"loader dali: DALI's {plugin} plugin cannot be loaded: "
                                    f"{type(exc).__name__}: {exc}") from None

        def enums(args: dict) -> dict:
            return {k: getattr(types, v) if k in ENUM_ARGS else v for k, v in args.items()}

        pipe = dali.Pipeline(**params["pipeline"])
        with pipe:
            jpegs, labels = fn.readers.file(**params["reader"])
            images = fn.decoders.image_random_crop(jpegs, **enums(params["decoder"]))
            images = fn.resize(images, **enums(params["resize"]))
            flip = fn.random.coin_flip(probability=params["flip_probability"])
            images = fn.crop_mirror_normalize(images, mirror=flip, **enums(params["normalize"]))
            pipe.set_outputs(images, labels.gpu())
        pipe.build()
        return DALIGenericIterator([pipe], ["images", "labels"], reader_name="reader",
                                   last_batch_policy=LastBatchPolicy.DROP, auto_reset=True)

    def __iter__(self) -> DaliLoader:
        return self

    def __next__(self) -> tuple:
        try:
            out = next(self._iterator)
        except StopIteration:  # the end of an epoch; auto_reset has started the next
            out = next(self._iterator)
        return self._convert(out[0]["images"], out[0]["labels"])

    def close(self) -> None:
        self._iterator = None

    def __enter__(self) -> DaliLoader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
