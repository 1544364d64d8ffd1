"""The harness's Paddle backend: device, math mode, layout, the network (eager or paddle.jit.to_static), its Trainer
(paddle_trainer.py: optimizer and step), batches. Layout nhwc builds the layers with data_format NHWC and feeds
[B, H, W, 3] images."""

from __future__ import annotations

import os

import precision
from backend import Backend, Dist, HarnessFailure, cpu_name, cpu_peak_memory, model_options

PADDLE_GPU_MEMORY_FLAG = "FLAGS_fraction_of_gpu_memory_to_use"  # 0: no pre-allocated pool, real peak (seed 003)


class PaddleBackend(Backend):
    name = "paddle"

    def __init__(self, args, dist: Dist, threads: int):
        # read when paddle starts, so set before the import; Paddle's CPU kernels follow OMP_NUM_THREADS
        os.environ["FLAGS_paddle_num_threads"] = str(threads)
        os.environ["OMP_NUM_THREADS"] = str(threads)
        # seed 003: no pre-allocated memory pool, so the peak is the model's own (a value set outside is kept)
        os.environ.setdefault(PADDLE_GPU_MEMORY_FLAG, "0")
        precision.set_environment(args.precision)  # before Paddle loads cuBLAS and cuDNN
        import models_paddle
        import paddle
        import paddle_trainer

        self.paddle = paddle
        self.version = paddle.__version__
        self.model = args.model
        cuda = str(paddle.version.cuda())
        self.cuda_version = None if cuda in ("False", "") else cuda  # the CUDA it was built with
        self.cudnn_version = paddle.device.get_cudnn_version()  # the cuDNN it loaded; None on CPU builds
        paddle.seed(args.seed + dist.rank)
        has_gpu = paddle.device.is_compiled_with_cuda() and paddle.device.cuda.device_count() > 0
        self.device_count = paddle.device.cuda.device_count() if paddle.device.is_compiled_with_cuda() else 0
        use_gpu = args.device == "gpu" or (args.device == "auto" and has_gpu)
        if use_gpu and not has_gpu:
            raise HarnessFailure("bad_input", "--device gpu but this Paddle build sees no CUDA device")
        if use_gpu:
            paddle.set_device(f"gpu:{dist.local_rank}")
            self.device, self.device_name = "gpu", paddle.device.cuda.get_device_name(dist.local_rank)
        else:
            paddle.set_device("cpu")
            self.device_name = cpu_name()
        mode = precision.MODES[args.precision]
        precision.paddle_set(paddle, args.precision)
        self.note = precision.fallback_note(args.precision, self.device, self.name, args.model)
        self.autocast_dtype = None if self.note else mode.autocast
        if self.autocast_dtype == "bfloat16" and not precision.paddle_bf16_supported(paddle):
            raise HarnessFailure("bad_input", f"--precision bf16: {self.device_name} has no BF16 tensor cores")
        self.data_format = "NHWC" if args.layout == "nhwc" else "NCHW"
        self.distributed = dist.world_size > 1
        if self.distributed:
            paddle.distributed.init_parallel_env()
        net = models_paddle.build_model(args.model, num_classes=args.num_classes, data_format=self.data_format,
                                        **model_options(args))
        model = net
        self.params = models_paddle.count_params(net)
        if args.mode == "compiled":  # converts in the first step (a warm-up step)
            self.compiler = "paddle.jit.to_static"
            net = paddle.jit.to_static(net)
        if self.distributed:
            net = paddle.DataParallel(net)
        self.net = net
        self.scaler = (paddle.amp.GradScaler(init_loss_scaling=2.0**15)
                       if mode.loss_scaling and self.autocast_dtype else None)
        self.math = precision.paddle_math(paddle, self.autocast_dtype, self.scaler is not None)
        self._start_trainer(paddle_trainer.Trainer, args, dist, model, "Paddle", self.device)

    def count_params(self) -> int:
        return self.params

    def _layout(self, images):
        return images.transpose(0, 2, 3, 1) if self.data_format == "NHWC" and images.shape[1] == 3 else images

    def to_device(self, arrays):
        return tuple(self.paddle.to_tensor(a) for a in arrays)

    def peak_memory(self) -> dict:
        if self.device == "gpu":
            return {"peak_memory_mb": round(self.paddle.device.cuda.max_memory_allocated() / 2**20, 1),
                    "peak_memory_kind": "paddle.device.cuda.max_memory_allocated",
                    PADDLE_GPU_MEMORY_FLAG: os.environ.get(PADDLE_GPU_MEMORY_FLAG)}
        return cpu_peak_memory()

    def batch_from_numpy(self, images, labels):
        return self.paddle.to_tensor(self._layout(images)), self.paddle.to_tensor(labels)

    def batch_from_loader(self, images, labels):
        return images, labels  # already in the layers' layout

    def synthetic_batch(self, batch, size, classes, seed):
        import numpy as np

        rng = np.random.default_rng(seed)
        images = rng.standard_normal((batch, 3, size, size), dtype=np.float32)
        labels = rng.integers(0, classes, size=(batch,), dtype=np.int64)
        return self.batch_from_numpy(images, labels)

    def autocast(self):
        return precision.paddle_autocast(self.paddle, self.autocast_dtype)

    def sync(self) -> None:
        if self.device == "gpu":
            self.paddle.device.synchronize()

    def is_oom(self, exc: BaseException) -> bool:
        text = str(exc).lower()
        oom_words = ("out of memory", "resourceexhausted", "cannot allocate memory")
        return isinstance(exc, MemoryError) or any(w in text for w in oom_words)

    def barrier(self) -> None:
        if self.distributed:
            self.paddle.distributed.barrier()
