"""The GPU input pipeline: files read by worker processes into one shared buffer a batch, JPEGs decoded by one
batched call on the device, the crop, resize and flip done as tensor ops there, all in a decode process beside the
trainer, which uploads the resized uint8 batch and normalises it; with `gpu=None`, its CPU twin: the same code on
the CPU, Pillow standing in for the device's decoder.

    with DeviceImageLoader(entries, 64, 224, framework="torch", gpu=0, rank=r, world_size=n) as loader:
        images, labels = next(loader)   # device tensors: float32 [B,3,S,S] ([B,S,S,3] with channels_last), int64 [B]

Per batch, not per image, in the trainer: the size table (image_sizes.py, read once from the headers and cached
beside the list; made before the decoder starts, as its pool forks, unsafe once CUDA has started) gives every
image's decoded size, file bytes and decoder, so a batch's file offsets are numpy over the batch; one message sends
the batch to a reader process (file_readers.py), which reads its files into a shared buffer (pinned on a GPU; a
buffer CUDA will not pin is an error naming it), makes the batch's crop plan (crop_plan.py: boxes, flips, each
axis's window, start and scale, a few numbers an image; numpy work that would otherwise hold the decode process's
GIL) and answers once. The decode process then makes exactly one decode call for the batch's JPEGs (`decode_calls`
counts them): PyTorch `torchvision.io.decode_jpeg(list, device="cuda")` (nvJPEG) or, with decoder="nvimgcodec",
nvImageCodec's batched Decoder (EXIF orientation not applied: the table's shape, as nvJPEG and Pillow decode);
Paddle has no batched decode, so its one call decodes image by image (`paddle.vision.ops.decode_jpeg`). Pillow
decodes on the host what the table marks so (CMYK, not a JPEG, over data.MAX_DECODED_PIXELS: decoded reduced, as
loader_cpu does), planned ahead, never as a fallback. A batch the decoder refuses is counted (`refused_batches`) and
raises DataError naming the batch's list lines: the run stops rather than decode image by image at a fraction of the
speed. The twin's decoder (Pillow) knows which image failed and names it alone.

Crop and resize: the decoded images are flattened into one buffer (one call), each crop window's rows are gathered
from it as rows of an unfolded view (one gather per run of images), then Pillow's bilinear filter runs as two
matrix products per run (width, then height): output pixel i of an axis averages the input pixels within `support`
of its centre `start + (i + 0.5) * scale` with triangle weights (support = max(scale, 1), so downscaling is
antialiased), each row normalised to 1 -- the weights Pillow's resize(box=...) computes, in float32 rather than
Pillow's 8-bit fixed point, so the twin and loader_cpu differ by at most one grey level
(tests/test_harness_loaders.py). The centres are computed with the weights, as tensor ops; a flip counts a
column's output pixels from its other end. A run is as many consecutive images as fit
`pixel_budget` padded window pixels (halved until they do), and its first product goes in chunks of rows within
the budget, so memory is bounded by the budget, not by the images; the trainer's Python work per batch grows with
the runs and with host-decoded images, not with the batch. With TF32 on (--precision tf32/amp/bf16) the products
run in TF32 on a GPU, in the decode process too (it runs with the trainer's float32 math): a relative error of
~5e-4, under 0.13 grey levels.

Overlap (decode_process.py): a child process runs this pipeline inline and decodes, crops and resizes batch i+1
(up to `decode_ahead` batches, 2 by default) while the consumer trains on batch i; it waits for each batch's device
work (torchvision's decoder writes on a stream of its own that does not wait for ours, so memory the previous batch
freed must be idle), copies the uint8 batch into a pinned shared slot and hands the batches over in order; an error
takes its batch's place, so next() raises it at that batch. The trainer's next() uploads the slot on its current
stream and normalises: a few calls a batch, and none of the decode's Python beside the training step, so the
decode never holds the trainer's GIL (a decode thread in the trainer did: bench/decode_overlap.py stage 3). The same
for Paddle (its own process on the same GPU). `decode_ahead=0` decodes in the consumer instead (the tests'
reference order, and the decode process's own loader). close() stops the process at once. stats() has the decoding
process's seconds per phase (read, decode, crop_resize, copy_back, slot_wait) and its wall time: run_stop's.

The framework's side -- tensor ops, pinned buffers, the decoders -- is device_ops.py. Standard library + numpy +
Pillow + the framework (+ torchvision or nvImageCodec for PyTorch on a GPU); never imports the kit.
"""

from __future__ import annotations

from collections import deque

import numpy as np
from crop_plan import Plan, axis_plans, joined
from data import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    BatchLoader,
    DataError,
    LoaderUnavailable,
    fit_decode,
    pillow,
)
from decode_process import DecodeProcess, Phases
from device_ops import OPS, NvImageCodecDecoder, PaddleOps, PillowDecoder, Refused, TorchOps, TorchvisionDecoder
from file_readers import FileReaders
from image_sizes import image_sizes

GPU_PIXEL_BUDGET = 1 << 26  # padded window pixels per resize step on a GPU: x 3 channels x (1 + 4 bytes) = 1 GiB
CPU_PIXEL_BUDGET = 1 << 22  # on the CPU twin: 60 MiB, so its memory stays near loader_cpu's
DECODE_AHEAD = 2  # batches the decode process may hold ready for the consumer
DECODERS = ("torchvision", "nvimgcodec")  # PyTorch's device decoders
SHOW_LINES = 12  # list lines a refused batch's error names before "..."
# the device side (device_ops.py) and the crops' plans (crop_plan.py) as the tests and bench use them
__all__ = ["DeviceImageLoader", "NvImageCodecDecoder", "PaddleOps", "PillowDecoder", "TorchOps", "TorchvisionDecoder",
           "Plan", "axis_plans", "resample_weights", "runs"]


def resample_weights(ops, plan: Plan, pixels: int):
    """[G, PIXELS, S] triangle-filter weights of PLAN's G axes, as tensor ops: column i weighs window pixel p by
    max(0, 1 - |p + 0.5 - centre_i| / support), centre_i = start + (i + 0.5) * scale (i counted from the end where
    flipped; in float64, as numpy made them, then float32); pixels past the window (padding) weigh 0; columns sum
    to 1."""
    size, count = plan.size, len(plan.start)
    at = ops.tensor(np.arange(size, dtype=np.float64).reshape(1, size) + 0.5)  # i + 0.5
    flip = ops.tensor(plan.flip.astype(np.float64).reshape(count, 1))
    at = at + flip * (size - 2 * at)  # flipped: (size - 1 - i) + 0.5, exactly
    centers = ops.to_float(ops.tensor(plan.start.reshape(count, 1)) + at * ops.tensor(plan.scale.reshape(count, 1)))
    inverse = ops.to_float(1 / ops.tensor(plan.support.reshape(count, 1, 1)))
    scaled = centers.reshape([count, 1, size]) * inverse  # centres / support
    pixel = ops.tensor(np.arange(pixels, dtype=np.float32).reshape(1, pixels, 1))
    inside = ops.to_float(pixel < ops.tensor(plan.length.astype(np.float32).reshape(count, 1, 1)))
    w = (1 - ((pixel + 0.5) * inverse - scaled).abs()).clip(min=0) * inside
    return w / w.sum(1, keepdim=True)


def runs(heights: np.ndarray, widths: np.ndarray, budget: int) -> list[tuple[int, int]]:
    """[lo, hi) ranges of consecutive images whose windows, padded to the range's largest, fit BUDGET pixels
    (halved until they do; one image may exceed it alone)."""
    out, todo = [], [(0, len(heights))]
    while todo:
        lo, hi = todo.pop()
        if hi - lo > 1 and (hi - lo) * int(heights[lo:hi].max()) * int(widths[lo:hi].max()) > budget:
            mid = (lo + hi) // 2
            todo += [(mid, hi), (lo, mid)]
        else:
            out.append((lo, hi))
    return out


class DeviceImageLoader(BatchLoader):
    """data.BatchLoader of (images, labels) device tensors of FRAMEWORK ('torch' or 'paddle') on GPU `gpu` (its
    local index), or on the CPU with `gpu=None` (the twin); `channels_last`: images [B,S,S,3]. `workers` reader
    processes (0: the decoding process reads); a decode process, started here, holds up to `decode_ahead` batches
    ready (0: none, the consumer decodes). DECODER: PyTorch's device decoder on a GPU, or "module:Class", a
    decoder of the caller's (the bench's and tests' stand-ins), made with the loader's device ops."""

    def __init__(self, entries, batch_size: int, image_size: int, *, framework: str, gpu: int | None,
                 rank: int = 0, world_size: int = 1, seed: int = 0, workers: int = 2, channels_last: bool = False,
                 prefetch: int = 4, decode_ahead: int = DECODE_AHEAD, decoder: str = "torchvision") -> None:
        if not isinstance(decode_ahead, int) or decode_ahead < 0:
            raise ValueError(f"decode_ahead must be an integer >= 0, got {decode_ahead!r}")
        if decoder not in DECODERS and ":" not in decoder:
            raise ValueError(f"decoder must be one of {', '.join(DECODERS)}, got {decoder!r}")
        if decoder == "nvimgcodec" and (framework != "torch" or gpu is None):
            raise LoaderUnavailable(f"loader gpu: decoder {decoder} decodes for PyTorch on a GPU only")
        if not isinstance(workers, int) or workers < 0:
            raise ValueError(f"workers must be an integer >= 0, got {workers!r}")
        self._Image = pillow()
        if not decode_ahead:  # the size table before the decoder starts CUDA: its pool forks
            self.sizes = image_sizes(entries, workers)
        self.ops = OPS[framework](gpu, None if decode_ahead else decoder)
        super().__init__(entries, batch_size, image_size, rank, world_size, seed, 0, prefetch)
        self.workers = workers
        self.decode_ahead = decode_ahead
        self.channels_last = bool(channels_last)
        self.decode_device = "cpu" if gpu is None else "gpu"
        self.pixel_budget = CPU_PIXEL_BUDGET if gpu is None else GPU_PIXEL_BUDGET
        self.decode_calls = 0  # batched decode calls: one a batch that holds device-decoded JPEGs
        self.refused_batches = 0  # batches the decoder refused (each stops the run)
        self.decoded_batches = 0
        self.phases = Phases()  # seconds per phase of the decoding process's batches
        shape = (3,) if channels_last else (3, 1, 1)
        self._mean = self.ops.tensor(np.asarray(IMAGENET_MEAN, dtype=np.float32).reshape(shape) * 255)
        self._inv_std = self.ops.tensor(1 / (np.asarray(IMAGENET_STD, dtype=np.float32).reshape(shape) * 255))
        self._process: DecodeProcess | None = None
        self._readers: FileReaders | None = None
        if decode_ahead:
            s = image_size
            pixels = (batch_size, s, s, 3) if channels_last else (batch_size, 3, s, s)
            loader = {"entries": entries, "batch_size": batch_size, "image_size": image_size, "framework": framework,
                      "gpu": gpu, "rank": rank, "world_size": world_size, "seed": seed, "workers": workers,
                      "channels_last": channels_last, "prefetch": prefetch, "decode_ahead": 0, "decoder": decoder}
            self._process = DecodeProcess(loader, decode_ahead, pixels, batch_size, self.ops)
            return
        self._path_array = np.array(self._paths, dtype=object)
        slots = max(prefetch, workers)
        self._free = deque(range(slots))
        self._queued: deque = deque()  # (number, slot, indices) of batches sent to the readers
        self._readers = FileReaders(workers, slots, self._epoch_bytes(0), release=self.ops.unpin)

    @property
    def decoder(self) -> str:
        """What decodes the batch's JPEGs (run_start's `decoder`)."""
        return self._process.decoder if self._process is not None else self.ops.decoder.name

    def _epoch_bytes(self, epoch: int) -> int:
        """The largest batch's file bytes in EPOCH: what a reader buffer is made to hold."""
        order = self.epoch_indices(epoch)[: self.steps_per_epoch * self.batch_size]
        return int(self.sizes.nbytes[order].reshape(self.steps_per_epoch, -1).sum(1).max())

    # -- reading ---------------------------------------------------------------------------------
    def _submit(self) -> None:
        number = self._next_submit
        self._next_submit += 1
        epoch, step = divmod(number, self.steps_per_epoch)
        indices = self.epoch_indices(epoch)[step * self.batch_size : (step + 1) * self.batch_size]
        nbytes = self.sizes.nbytes[indices]
        offsets = np.cumsum(nbytes) - nbytes
        slot = self._free.popleft()
        self._readers.reserve(slot, int(nbytes.sum()))
        plan = ("crop_plan", "batch_plan", (self.seed, epoch, indices, self.sizes.width[indices],
                                            self.sizes.height[indices], self.image_size))
        self._readers.submit(number, slot, self._path_array[indices].tolist(), offsets.tolist(), nbytes.tolist(),
                             plan)
        self._queued.append((number, slot, indices))

    def _next_batch(self) -> tuple:
        """The next batch, decoded, cropped and resized (the consumer's with decode_ahead=0, else the decode
        process's): uint8 device pixels and numpy labels. Its reader buffer is free again once the batch's device
        work is done."""
        self.phases.begin()
        with self.phases("read"):
            while self._free:
                self._submit()
            number, slot, indices = self._queued.popleft()
            try:
                errors, plan = self._readers.take(number)
            except BaseException:
                self._free.append(slot)
                raise
        try:
            if errors:
                position, why = errors[0]
                if why.startswith("the file changed") and self.sizes.cache:
                    why += f" (delete {self.sizes.cache} to read the sizes again)"
                raise self.unreadable(int(indices[position]), why)
            buffer = self._readers.buffer(slot)
            self.ops.pin(buffer, f"reader buffer {slot}")
            return self._collate(buffer, indices, plan)  # its device work done (ops.finish)
        finally:
            self._free.append(slot)

    def stats(self) -> dict:
        """run_stop's loader counters: batched decode calls against batches decoded, and refusals; the decoding
        process's seconds per phase ("phases_s": read, decode, crop_resize, copy_back, slot_wait) and the wall
        time they were counted over ("process_s": the decode process's since it began serving; with
        decode_ahead=0, the consumer's since its first batch, its training included)."""
        if self._process is not None:
            return dict(self._process.stats)
        return {"decode_calls": self.decode_calls, "decoded_batches": self.decoded_batches,
                "refused_batches": self.refused_batches, **self.phases.stats()}

    # -- the consumer ----------------------------------------------------------------------------
    def __next__(self) -> tuple:
        if self._closed:
            raise RuntimeError(f"{type(self).__name__} is closed")
        if self._process is None:
            pixels, labels = self._next_batch()
            labels = self.ops.tensor(labels)
        else:
            pixels, labels = self._process.take()
        return (self.ops.to_float(pixels) - self._mean) * self._inv_std, labels

    def close(self) -> None:
        """Stop the decode process, or the reader processes, at once (idempotent)."""
        if self._process is not None:
            self._process.close()
        if self._readers is not None:
            self._readers.close()
        super().close()

    # -- a batch ---------------------------------------------------------------------------------
    def _collate(self, buffer, indices: np.ndarray, plan) -> tuple:
        """The batch from its files in BUFFER: decoded, cropped, resized, flipped, normalised by PLAN (crop_plan's,
        made with the files); and its labels."""
        self.decoded_batches += 1  # before its decode call: read at any time, calls <= batches
        sizes = self.sizes
        widths, heights, host = sizes.width[indices], sizes.height[indices], sizes.host[indices]
        with self.phases("decode"):  # on a GPU its device work too (finish), and the crop's
            files = self.ops.files(buffer, sizes.nbytes[indices].tolist())
            device = np.flatnonzero(~host)
            decoded = self._decode([files[i] for i in device] if host.any() else files, indices[device],
                                   np.stack([heights[device], widths[device]], 1))
            hosted = [self._host_decode(int(indices[i])) for i in np.flatnonzero(host)]
            del files
            self.ops.finish()
        with self.phases("crop_resize"):
            order = np.concatenate([device, np.flatnonzero(host)])  # the images' order in the flat buffer
            images = self._crop_resize(decoded + hosted, indices, order, widths, heights, plan)
            self.ops.finish()
        return images, self._labels[indices].copy()

    def _decode(self, files: list, indices: np.ndarray, sizes: np.ndarray) -> list:
        """One decode call for the batch's device-decoded JPEGs (SIZES: their [height, width] by the size table); a
        refusal is counted and stops the run."""
        if not files:
            return []
        self.decode_calls += 1
        try:
            return list(self.ops.decoder.decode(files, sizes))
        except Refused as exc:
            self.refused_batches += 1
            if exc.positions is not None and len(exc.positions) == 1:
                raise self.unreadable(int(indices[exc.positions[0]]), exc) from None
            named = indices if exc.positions is None else indices[exc.positions]
            lines = ", ".join(str(int(i) + 1) for i in named[:SHOW_LINES]) + (", ..." if len(named) > SHOW_LINES
                                                                              else "")
            where = f"list {self._source} lines" if self._source else "entries (0-based + 1)"
            raise DataError(f"loader gpu: {self.decoder} refused a batch of {len(files)} JPEGs ({where} "
                            f"{lines}): {exc}; the run stops rather than decode image by image "
                            "(data_prep/verify_list.py finds an unreadable file)") from None

    def _host_decode(self, index: int):
        """Pillow on the host, as loader_cpu decodes (reduced when large, its errors in the same words: from the
        file, not the buffer): [3, H, W] uint8 on the device."""
        try:
            with self._Image.open(self._paths[index]) as img:
                return self.ops.from_hwc(np.array(fit_decode(img).convert("RGB")))
        except Exception as exc:  # PIL raises OSError, SyntaxError, ValueError, DecompressionBombError...
            raise self.unreadable(index, exc) from exc

    def _crop_resize(self, images: list, indices, order, widths, heights, plan):
        """The batch, each image's crop box resampled to S x S (flipped where drawn) as PLAN says, rounded to uint8
        (as Pillow's resize is).
        IMAGES: [3, H, W] uint8, in ORDER's order (positions in the batch)."""
        ops, rows, cols = self.ops, plan.rows, plan.cols
        pixels = 3 * heights * widths
        base = np.empty(len(indices), np.int64)
        base[order] = np.cumsum(pixels[order]) - pixels[order]
        flat = ops.flatten(images, int(cols.length.max()))
        expected = int(pixels.sum()) + int(cols.length.max())
        if int(flat.shape[0]) != expected:
            self._wrong_shape(images, indices, order, widths, heights)
        del images
        outputs = []
        for lo, hi in runs(rows.length, cols.length, self.pixel_budget):
            height, width = int(rows.length[lo:hi].max()), int(cols.length[lo:hi].max())
            y = np.minimum(np.arange(height)[None, :], rows.length[lo:hi, None] - 1)  # past a window: its last row
            starts = (base[lo:hi, None, None] + np.arange(3)[None, :, None] * (heights * widths)[lo:hi, None, None]
                      + ((rows.offset[lo:hi, None] + y) * widths[lo:hi, None])[:, None, :]
                      + cols.offset[lo:hi, None, None])  # [G, 3, height]
            # both axes' weights in one set of tensor ops: [G columns then G rows, max(width, height), S]
            both = resample_weights(ops, joined(cols.part(lo, hi), rows.part(lo, hi)), max(width, height))
            by_cols, by_rows = both[: hi - lo, :width], both[hi - lo :, :height]
            chunk = max(1, self.pixel_budget // ((hi - lo) * width))
            half = ops.concat([ops.einsum("gchw,gwj->gchj", ops.to_float(ops.rows(flat, starts[:, :, r:r + chunk],
                                                                                    width)), by_cols)
                               for r in range(0, height, chunk)], 2)
            outputs.append(ops.einsum("gchj,ghi->gijc" if self.channels_last else "gchj,ghi->gcij", half, by_rows))
        return ops.to_uint8(outputs[0] if len(outputs) == 1 else ops.concat(outputs))

    def _wrong_shape(self, images: list, indices, order, widths, heights) -> None:
        """DataError naming the first image whose decoded shape is not the size table's (a file changed since)."""
        for image, position in zip(images, order, strict=True):
            want = (3, int(heights[position]), int(widths[position]))
            if tuple(image.shape) != want:
                cache = f"; delete {self.sizes.cache} if the file changed" if self.sizes.cache else ""
                raise self.unreadable(int(indices[position]), f"decoded to shape {list(image.shape)}, its header "
                                      f"said {want[0]} x {want[1]} x {want[2]}{cache}")
        raise DataError(f"loader gpu: a batch decoded to {sum(int(np.prod(i.shape)) for i in images)} pixels, not "
                        "the size table's")
