"""The GPU input pipeline: files read in CPU threads, JPEGs decoded with nvJPEG, and the crop, resize, flip and
normalisation done as tensor ops on the device; with `gpu=None`, its CPU twin: the same code on the CPU.

    with DeviceImageLoader(entries, 64, 224, framework="torch", gpu=0, rank=r, world_size=n) as loader:
        images, labels = next(loader)   # device tensors: float32 [B,3,S,S] ([B,S,S,3] with channels_last), int64 [B]

Worker threads read each image's header (Pillow, no decode) and the file and draw its crop box and flip with
data.augmentation, exactly as loader_cpu does. One decode thread then decodes each batch on the device: PyTorch
in one call (`torchvision.io.decode_jpeg(list, device="cuda")`), Paddle image by image
(`paddle.vision.ops.decode_jpeg` on the GPU). What nvJPEG cannot decode is decoded by Pillow, the CPU loader's
decoder: CMYK and non-JPEG files and JPEGs over data.MAX_DECODED_PIXELS (found in the header, decoded in the worker
threads, a large JPEG at reduced scale as loader_cpu decodes it), and any file nvJPEG
refuses (a failed batch is decoded again image by image to find it); Pillow's own failure is the DataError,
in the CPU loader's words. The CPU twin decodes every image with Pillow in the worker threads.

Overlap: the decode thread decodes, crops, resizes and normalises batch i+1 (up to `decode_ahead` batches, 2
by default) while the consumer trains on batch i, and hands the batches over in order; an error takes its
batch's place, so next() raises it at that batch. PyTorch on a GPU: the thread queues its work on a side CUDA
stream and waits for each batch's event before decoding the next (torchvision's decoder writes on a stream of
its own that does not wait for ours, so memory the previous batch freed must be idle); next() makes the
consumer's current stream wait for that event and record_stream()s the batch, so the caching allocator keeps
its memory until the consumer's stream is done with it. Paddle: a plain thread on the same GPU, whose work
joins the training's stream (Paddle's current stream is per device, not per thread): the host's work (reading,
nvJPEG's Huffman decode on the CPU, launching) overlaps the step, the GPU's runs in stream order. The CPU twin
runs the same thread. `decode_ahead=0` decodes in the consumer instead (the tests' reference order). close()
stops the thread after the batch it is on.

Resize: Pillow's bilinear filter written as two matrix products per batch (height, then width): output pixel i
of an axis averages the input pixels within `support` of its centre `start + (i + 0.5) * scale` with triangle
weights (support = max(scale, 1), so downscaling is antialiased), each row normalised to 1 -- the weights
Pillow's resize(box=...) computes, in float32 rather than Pillow's 8-bit fixed point with a rounding after
each pass, so the twin and loader_cpu differ by at most one grey level (tests/test_harness_loaders.py). The
flip reverses the column weights. The same formulas run in both frameworks, whose own resize ops differ
(Paddle's bilinear has no antialias). Each batch's images are padded to its largest crop window; runs of at
most PIXEL_BUDGET padded pixels bound the memory that a very large image costs. With TF32 on (--precision
tf32/amp/bf16) the products run in TF32 on a GPU: a relative error of ~5e-4, under 0.13 grey levels.

Standard library + numpy + Pillow + the framework (+ torchvision for PyTorch on a GPU); never imports the kit.
"""

from __future__ import annotations

import math
import queue
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np
from data import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    MAX_DECODED_PIXELS,
    BatchLoader,
    LoaderUnavailable,
    augmentation,
    fit_decode,
    pillow,
)

PIXEL_BUDGET = 1 << 26  # padded window pixels per resize run: x 3 channels x (uint8 + float32) = 1 GiB
NVJPEG_MODES = ("RGB", "L")  # JPEGs nvJPEG decodes to RGB (YCbCr and greyscale); CMYK goes to Pillow
DECODE_AHEAD = 2  # batches the decode thread may hold ready for the consumer


@dataclass(slots=True)
class Item:
    """One image of a batch as a worker thread leaves it: the file for the device, or its pixels."""

    index: int
    file: bytearray | None  # the JPEG, for the device decoder
    pixels: np.ndarray | None  # [H, W, 3] uint8, decoded on the host
    width: int
    height: int
    box: tuple[int, int, int, int]
    flip: bool


class Axis(NamedTuple):
    """The resampling of one axis of one image onto `size` output pixels."""

    offset: int  # first input pixel of the window the filter reads
    length: int  # window pixels
    centers: np.ndarray  # [size] output pixel centres, in window coordinates (reversed for a flip)
    support: float  # the filter's half-width in input pixels (>= 1)


def axis_plan(start: int, stop: int, extent: int, size: int, flip: bool = False) -> Axis:
    """Input pixels [start, stop) of an axis of EXTENT pixels resampled onto SIZE, as Pillow's resize(box=...)."""
    scale = (stop - start) / size
    support = max(scale, 1.0)
    margin = math.ceil(support) + 1
    offset, end = max(0, start - margin), min(extent, stop + margin)
    centers = (start - offset + (np.arange(size) + 0.5) * scale).astype(np.float32)
    return Axis(offset, end - offset, centers[::-1].copy() if flip else centers, support)


def resample_weights(ops, axes: list[Axis], pixels: int):
    """[G, PIXELS, S] triangle-filter weights of G axes: column i weighs window pixel p by
    max(0, 1 - |p + 0.5 - centre_i| / support); pixels past the window (padding) weigh 0; columns sum to 1."""
    p = ops.arange(pixels)[None, :, None] + 0.5
    centers = ops.tensor(np.stack([a.centers for a in axes]))[:, None, :]
    support = ops.tensor(np.array([a.support for a in axes], dtype=np.float32))[:, None, None]
    length = ops.tensor(np.array([a.length for a in axes], dtype=np.float32))[:, None, None]
    w = (1 - ((p - centers) / support).abs()).clip(min=0) * (length + 0.5 - p).clip(0, 1)
    return w / w.sum(1, keepdim=True)


def runs(windows: list[tuple[int, int]], budget: int = PIXEL_BUDGET) -> list[list[int]]:
    """Consecutive images whose (height, width) windows, padded to their run's largest, fit in BUDGET pixels;
    an image larger than the budget runs alone."""
    out: list[list[int]] = [[]]
    height = width = 0
    for i, (h, w) in enumerate(windows):
        height, width = max(height, h), max(width, w)
        if out[-1] and (len(out[-1]) + 1) * height * width > budget:
            out.append([])
            height, width = h, w
        out[-1].append(i)
    return out


def out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or "out of memory" in str(exc).lower()


class TorchOps:
    """The pipeline's tensor operations in PyTorch, on CUDA device `gpu` (nvJPEG via torchvision) or the CPU."""

    def __init__(self, gpu: int | None) -> None:
        import torch

        self.torch, self.einsum = torch, torch.einsum
        self.device = torch.device("cpu") if gpu is None else torch.device("cuda", gpu)
        self.decoder = "pillow"
        if gpu is not None:
            try:
                from torchvision.io import ImageReadMode, decode_jpeg
            except Exception as exc:  # ImportError, or a torchvision built for another torch failing to load
                raise LoaderUnavailable(
                    "loader gpu: PyTorch decodes JPEGs on the GPU with torchvision.io.decode_jpeg, and torchvision "
                    f"cannot be imported ({type(exc).__name__}: {exc}); install the torchvision built for torch "
                    f"{torch.__version__}, or use --loader cpu") from None
            self._decode_jpeg, self._rgb = decode_jpeg, ImageReadMode.RGB
            self.decoder = "torchvision.io.decode_jpeg"
        self.stream = None if gpu is None else torch.cuda.Stream(self.device)  # the decode thread's

    def enter_decode_thread(self) -> None:
        """Make the calling thread queue its work on the side stream, after what the device has queued so far
        (the loader's constants)."""
        if self.stream is not None:
            cuda = self.torch.cuda
            cuda.set_device(self.device)
            cuda.synchronize(self.device)
            cuda.set_stream(self.stream)

    def finish(self, batch: tuple) -> tuple:
        """In the decode thread: (BATCH, the event after its work), waited for: the next decode may reuse the
        memory this batch freed, and torchvision's decoder writes it on its own stream, which does not wait for
        ours (pytorch/vision#9606)."""
        if self.stream is None:
            return batch, None
        event = self.torch.cuda.Event()
        event.record(self.stream)
        event.synchronize()
        return batch, event

    def hand_over(self, batch: tuple, event) -> tuple:
        """In the consumer: its stream waits for EVENT, and the allocator keeps BATCH's memory for that stream."""
        if event is not None:
            stream = self.torch.cuda.current_stream(self.device)
            stream.wait_event(event)
            for tensor in batch:
                tensor.record_stream(stream)
        return batch

    def decode(self, files: list[bytearray]) -> list:
        """nvJPEG, one call for the batch: [3, H, W] uint8 tensors on the GPU."""
        torch = self.torch
        data = [torch.frombuffer(f, dtype=torch.uint8) for f in files]
        return self._decode_jpeg(data, mode=self._rgb, device=self.device)

    def upload(self, pixels: np.ndarray):
        return self.torch.from_numpy(pixels).to(self.device).permute(2, 0, 1)

    def tensor(self, array: np.ndarray):
        return self.torch.from_numpy(array).to(self.device)

    def zeros(self, shape: list[int]):
        return self.torch.zeros(shape, dtype=self.torch.uint8, device=self.device)

    def arange(self, n: int):
        return self.torch.arange(n, dtype=self.torch.float32, device=self.device)

    def to_float(self, t):
        return t.float()

    def concat(self, tensors: list):
        return self.torch.cat(tensors)


class PaddleOps:
    """The same in Paddle, on GPU `gpu` (nvJPEG via paddle.vision.ops.decode_jpeg) or the CPU."""

    def __init__(self, gpu: int | None) -> None:
        import paddle

        self.paddle, self.einsum = paddle, paddle.einsum
        self.place = paddle.CPUPlace() if gpu is None else paddle.CUDAPlace(gpu)
        self.decoder = "pillow" if gpu is None else "paddle.vision.ops.decode_jpeg"
        self.gpu = gpu

    def enter_decode_thread(self) -> None:
        """Set the calling thread's GPU (decode_jpeg runs on the current one); its work joins the device's stream."""
        if self.gpu is not None:
            self.paddle.device.set_device(f"gpu:{self.gpu}")

    def finish(self, batch: tuple) -> tuple:
        return batch, None  # one stream: the consumer's work follows the batch's in stream order

    def hand_over(self, batch: tuple, event: None) -> tuple:
        return batch

    def decode(self, files: list[bytearray]) -> list:
        """nvJPEG image by image (Paddle has no batched decode) on the current GPU (the backend's set_device):
        [3, H, W] uint8 tensors. The op reads the file from a CPU tensor, as paddle.vision.ops.read_file makes."""
        paddle, cpu = self.paddle, self.paddle.CPUPlace()
        return [paddle.vision.ops.decode_jpeg(paddle.to_tensor(np.frombuffer(f, np.uint8), place=cpu), mode="rgb")
                for f in files]

    def upload(self, pixels: np.ndarray):
        return self.paddle.to_tensor(pixels, place=self.place).transpose([2, 0, 1])

    def tensor(self, array: np.ndarray):
        return self.paddle.to_tensor(array, place=self.place)

    def zeros(self, shape: list[int]):
        return self.paddle.zeros(shape, dtype="uint8", device=self.place)

    def arange(self, n: int):
        return self.paddle.arange(n, dtype="float32", device=self.place)

    def to_float(self, t):
        return t.astype("float32")

    def concat(self, tensors: list):
        return self.paddle.concat(tensors)


OPS = {"torch": TorchOps, "paddle": PaddleOps}


class DeviceImageLoader(BatchLoader):
    """data.BatchLoader of (images, labels) device tensors of FRAMEWORK ('torch' or 'paddle') on GPU `gpu` (its
    local index), or on the CPU with `gpu=None` (the twin); `channels_last`: images [B,S,S,3]. A decode thread,
    started by the first next(), holds up to `decode_ahead` batches ready (0: none, the consumer decodes)."""

    pixel_budget = PIXEL_BUDGET

    def __init__(self, entries, batch_size: int, image_size: int, *, framework: str, gpu: int | None,
                 rank: int = 0, world_size: int = 1, seed: int = 0, workers: int = 2, channels_last: bool = False,
                 prefetch: int = 4, decode_ahead: int = DECODE_AHEAD) -> None:
        if not isinstance(decode_ahead, int) or decode_ahead < 0:
            raise ValueError(f"decode_ahead must be an integer >= 0, got {decode_ahead!r}")
        self._Image = pillow()
        self.ops = OPS[framework](gpu)
        super().__init__(entries, batch_size, image_size, rank, world_size, seed, workers, prefetch)
        self.decode_ahead = decode_ahead
        self._thread: threading.Thread | None = None
        self._room = threading.Semaphore(decode_ahead)  # batches the thread may decode before the consumer takes one
        self._ready: queue.SimpleQueue = queue.SimpleQueue()  # (batch, event) or the batch's error, in batch order
        self._stopping = False
        self._broken: BaseException | None = None  # what ended the thread, other than close()
        self.channels_last = bool(channels_last)
        self.decode_device = "cpu" if gpu is None else "gpu"
        self.refused_batches = 0  # batches the batched nvJPEG call refused, decoded image by image
        self.decoder = self.ops.decoder
        shape = (3,) if channels_last else (3, 1, 1)
        self._mean = self.ops.tensor(np.asarray(IMAGENET_MEAN, dtype=np.float32).reshape(shape) * 255)
        self._inv_std = self.ops.tensor(1 / (np.asarray(IMAGENET_STD, dtype=np.float32).reshape(shape) * 255))

    # -- worker threads --------------------------------------------------------------------------
    def _load(self, state: None, slot: int, index: int, epoch: int) -> Item:
        path = self._paths[index]
        try:
            with self._Image.open(path) as img:  # the header only, unless the host decodes (as loader_cpu does)
                device = (self.decode_device == "gpu" and img.format == "JPEG" and img.mode in NVJPEG_MODES
                          and img.width * img.height <= MAX_DECODED_PIXELS)  # larger: the host decodes it reduced
                width, height = (img if device else fit_decode(img)).size
                pixels = None if device else np.array(img.convert("RGB"))
            file = bytearray(Path(path).read_bytes()) if device else None
        except Exception as exc:  # PIL raises OSError, SyntaxError, ValueError, DecompressionBombError...
            raise self.unreadable(index, exc) from exc
        box, flip = augmentation(self.seed, epoch, index, width, height)
        return Item(index, file, pixels, width, height, box, flip)

    def _host_decode(self, index: int) -> np.ndarray:
        try:
            with self._Image.open(self._paths[index]) as img:
                return np.array(fit_decode(img).convert("RGB"))
        except Exception as exc:
            raise self.unreadable(index, exc) from exc

    # -- the consumer and the decode thread ------------------------------------------------------
    def __next__(self) -> tuple:
        if not self.decode_ahead:
            return super().__next__()
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")
        if self._thread is None:
            self._thread = threading.Thread(target=self._decode_ahead, name="kit-decode", daemon=True)
            self._thread.start()
        if self._broken is not None and self._ready.empty():
            raise RuntimeError(f"{type(self).__name__}: the decode thread stopped") from self._broken
        item = self._ready.get()
        self._room.release()
        if isinstance(item, BaseException):
            raise item
        return self.ops.hand_over(*item)

    def _decode_ahead(self) -> None:
        """The decode thread: the inline path (BatchLoader.__next__) batch after batch, at most `decode_ahead`
        batches ahead of the consumer, each batch's error in its place, until close()."""
        try:
            self.ops.enter_decode_thread()
            while self._room.acquire() and not self._stopping:
                try:
                    item = self.ops.finish(super().__next__())
                except Exception as exc:  # DataError, out of memory...: next() raises it at this batch
                    item = exc
                self._ready.put(item)
        except BaseException as exc:  # the thread itself failed: next() says so, after the batches before
            self._broken = exc
            self._ready.put(exc)

    def close(self) -> None:
        """Stop the decode thread (after the batch it is on), then the worker threads (idempotent)."""
        if self._thread is not None:
            self._stopping = True
            self._room.release()  # wakes a thread waiting for room
            self._thread.join()
        if self.refused_batches and not self._closed:
            print(f"loader gpu: {self.refused_batches} batch(es) decoded image by image (nvJPEG refused the batch)",
                  file=sys.stderr, flush=True)
        super().close()

    def _collate(self, state: None, items: list[Item], labels: np.ndarray) -> tuple:
        images = self._decode(items)
        return self._crop_resize(images, items), self.ops.tensor(labels)

    def _decode(self, items: list[Item]) -> list:
        """[3, H, W] uint8 device tensors: nvJPEG decodes the batch in one go, Pillow what nvJPEG cannot."""
        ops = self.ops
        todo = [i for i, item in enumerate(items) if item.pixels is None]
        decoded = {}
        if todo:
            try:
                decoded = dict(zip(todo, ops.decode([items[i].file for i in todo]), strict=True))
            except Exception as exc:  # one bad file fails the batch: decode image by image to find it
                if out_of_memory(exc):
                    raise
                self.refused_batches += 1
                if self.refused_batches == 1:  # said once: image by image costs ~9x the batched call on an H200
                    print(f"loader gpu: nvJPEG refused a batch of {len(todo)} ({type(exc).__name__}: "
                          f"{str(exc)[:300]}); decoding it image by image", file=sys.stderr, flush=True)
                decoded = {i: self._decode_one(items[i]) for i in todo}
        images = []
        for i, item in enumerate(items):
            image = decoded[i] if item.pixels is None else ops.upload(item.pixels)
            if tuple(image.shape) != (3, item.height, item.width):
                raise self.unreadable(item.index, f"decoded to shape {list(image.shape)}, its header says "
                                                  f"3 x {item.height} x {item.width}")
            images.append(image)
        return images

    def _decode_one(self, item: Item):
        try:
            return self.ops.decode([item.file])[0]
        except Exception as exc:
            if out_of_memory(exc):
                raise
            return self.ops.upload(self._host_decode(item.index))  # nvJPEG refused it: Pillow decodes it or says why

    def _crop_resize(self, images: list, items: list[Item]):
        """The batch, each image's crop box resampled to S x S (flipped where drawn), normalised."""
        ops, size = self.ops, self.image_size
        plans = [(axis_plan(it.box[1], it.box[3], it.height, size), axis_plan(it.box[0], it.box[2], it.width, size,
                                                                              it.flip)) for it in items]
        outputs = []
        for run in runs([(rows.length, cols.length) for rows, cols in plans], self.pixel_budget):
            height = max(plans[i][0].length for i in run)
            width = max(plans[i][1].length for i in run)
            windows = ops.zeros([len(run), 3, height, width])
            for k, i in enumerate(run):
                rows, cols = plans[i]
                windows[k, :, : rows.length, : cols.length] = images[i][
                    :, rows.offset : rows.offset + rows.length, cols.offset : cols.offset + cols.length]
            by_rows = resample_weights(ops, [plans[i][0] for i in run], height)  # [G, height, S]
            by_cols = resample_weights(ops, [plans[i][1] for i in run], width)  # [G, width, S]
            half = ops.einsum("gchw,gwj->gchj", ops.to_float(windows), by_cols)
            outputs.append(ops.einsum("gchj,ghi->gijc" if self.channels_last else "gchj,ghi->gcij", half, by_rows))
        out = outputs[0] if len(outputs) == 1 else ops.concat(outputs)
        return (out - self._mean) * self._inv_std
