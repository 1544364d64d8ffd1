"""The harness's PyTorch backend: device, math mode, layout, the network (eager or torch.compile), its Trainer
(torch_trainer.py: optimizer and step), batches.

Layout nhwc is channels_last memory (tensors stay NCHW-shaped, torch_layers.py's docstring says why)."""

from __future__ import annotations

import precision
from backend import Backend, Dist, HarnessFailure, cpu_name, cpu_peak_memory, model_options


class TorchBackend(Backend):
    name = "torch"

    def __init__(self, args, dist: Dist, threads: int):
        precision.set_environment(args.precision)  # before torch loads cuBLAS and cuDNN
        import models_torch
        import torch
        import torch_trainer

        self.torch = torch
        self.version = torch.__version__
        self.model = args.model
        self.cuda_version = torch.version.cuda  # None on CPU builds
        self.cudnn_version = torch.backends.cudnn.version()  # None without cuDNN
        self.device_count = torch.cuda.device_count()
        torch.set_num_threads(threads)
        torch.manual_seed(args.seed + dist.rank)
        use_gpu = args.device == "gpu" or (args.device == "auto" and torch.cuda.is_available())
        if use_gpu and not torch.cuda.is_available():
            raise HarnessFailure("bad_input", "--device gpu but PyTorch sees no CUDA device")
        if use_gpu:
            torch.cuda.set_device(dist.local_rank)
            self.dev = torch.device("cuda", dist.local_rank)
            self.device, self.device_name = "gpu", torch.cuda.get_device_name(self.dev)
            torch.backends.cudnn.benchmark = True
        else:
            self.dev = torch.device("cpu")
            self.device_name = cpu_name()
        mode = precision.MODES[args.precision]
        precision.torch_set(torch, args.precision)
        self.note = precision.fallback_note(args.precision, self.device, self.name, args.model)
        self.autocast_dtype = None if self.note else mode.autocast
        if self.autocast_dtype == "bfloat16" and use_gpu and not precision.torch_bf16_supported(torch):
            raise HarnessFailure("bad_input", f"--precision bf16: {self.device_name} has no BF16 tensor cores")
        self.memory_format = torch.channels_last if args.layout == "nhwc" else torch.contiguous_format
        net = models_torch.build_model(args.model, num_classes=args.num_classes, **model_options(args))
        net = net.to(self.dev, memory_format=self.memory_format)
        model = net
        self.params = models_torch.count_params(net)
        self.distributed = dist.world_size > 1
        if self.distributed:
            torch.distributed.init_process_group(backend="nccl" if use_gpu else "gloo")
            net = torch.nn.parallel.DistributedDataParallel(net, device_ids=[dist.local_rank] if use_gpu else None)
        if args.mode == "compiled":  # compiles in the first step (a warm-up step)
            self.compiler = f"torch.compile(backend={args.compile_backend!r})"
            net = torch.compile(net, backend=args.compile_backend)
        self.net = net
        self.scaler = torch.amp.GradScaler("cuda") if mode.loss_scaling and self.autocast_dtype else None
        self.math = precision.torch_math(torch, self.dev.type, self.autocast_dtype, self.scaler is not None)
        self._start_trainer(torch_trainer.Trainer, args, dist, model, "torch", self.dev.type)

    def count_params(self) -> int:
        return self.params

    def to_device(self, arrays):
        return tuple(self.torch.from_numpy(a).to(self.dev) for a in arrays)

    def peak_memory(self) -> dict:
        if self.device == "gpu":
            return {"peak_memory_mb": round(self.torch.cuda.max_memory_allocated(self.dev) / 2**20, 1),
                    "peak_memory_kind": "torch.cuda.max_memory_allocated"}
        return cpu_peak_memory()

    def batch_from_numpy(self, images, labels):
        torch = self.torch
        x = torch.from_numpy(images).to(self.dev, non_blocking=True).contiguous(memory_format=self.memory_format)
        return x, torch.from_numpy(labels).to(self.dev, non_blocking=True)

    def batch_from_loader(self, images, labels):
        if self.memory_format is self.torch.channels_last:  # [B,S,S,3] viewed as NCHW: channels_last, no copy
            images = images.permute(0, 3, 1, 2)
        return images.contiguous(memory_format=self.memory_format), labels

    def synthetic_batch(self, batch, size, classes, seed):
        torch = self.torch
        gen = torch.Generator().manual_seed(seed)
        x = torch.randn(batch, 3, size, size, generator=gen).to(self.dev).contiguous(memory_format=self.memory_format)
        y = torch.randint(0, classes, (batch,), generator=gen).to(self.dev)
        return x, y

    def autocast(self):
        return precision.torch_autocast(self.torch, self.dev.type, self.autocast_dtype)

    def sync(self) -> None:
        if self.device == "gpu":
            self.torch.cuda.synchronize(self.dev)

    def is_oom(self, exc: BaseException) -> bool:
        text = str(exc).lower()
        oom_words = ("out of memory", "can't allocate memory", "cannot allocate memory")
        return isinstance(exc, MemoryError | self.torch.cuda.OutOfMemoryError) or any(w in text for w in oom_words)

    def barrier(self) -> None:
        if self.distributed:
            self.torch.distributed.barrier()

    def close(self) -> None:
        if self.distributed and self.torch.distributed.is_initialized():
            self.torch.distributed.destroy_process_group()
