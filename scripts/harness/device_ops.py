"""The gpu loader's device side, one class per framework: its tensor operations (on a GPU or, for the twin, the
CPU), the reader buffers it pins, and its batched decoders -- torchvision's nvJPEG call, nvImageCodec's Decoder,
Paddle's decode_jpeg (image by image: Paddle has no batched decode) and, on the CPU twin, Pillow standing in.
A decoder's decode(files, sizes) takes the batch's files and their [height, width] by the size table and makes one
call for the batch; a refusal is Refused (loader_gpu.py counts it and stops the run).

Standard library + numpy + Pillow + the framework (+ torchvision or nvImageCodec for PyTorch on a GPU); never
imports the kit.
"""

from __future__ import annotations

import importlib
import io

import numpy as np
from data import LoaderUnavailable, pillow


class Refused(Exception):
    """The decoder refused a batch; POSITIONS: the images it names (None: it does not say which)."""

    def __init__(self, why: str, positions: list[int] | None = None) -> None:
        super().__init__(why)
        self.positions = positions


def out_of_memory(exc: BaseException) -> bool:
    return isinstance(exc, MemoryError) or "out of memory" in str(exc).lower()


def own_decoder(ops, name: str):
    """The decoder NAME ("module:Class") names, made with OPS: a caller's own (the bench's and tests' stand-ins),
    importable where the loader runs, its decode process included."""
    module, _, attribute = name.partition(":")
    return getattr(importlib.import_module(module), attribute)(ops)


class PillowDecoder:
    """The twin's stand-in for the device's batched decoder: Pillow, image by image, [3, H, W] uint8 tensors.
    A decoder's decode(files, sizes) gets the batch's files and their [height, width] by the size table."""

    name = "pillow"

    def __init__(self, ops) -> None:
        self.ops, self._Image = ops, pillow()

    def decode(self, files: list, sizes: np.ndarray) -> list:
        out = []
        for k, f in enumerate(files):
            try:
                with self._Image.open(io.BytesIO(self.ops.host_array(f))) as img:
                    out.append(self.ops.from_hwc(np.array(img.convert("RGB"))))
            except Exception as exc:  # PIL raises OSError, SyntaxError, ValueError...
                raise Refused(str(exc), [k]) from exc
        return out


class TorchOps:
    """The pipeline's tensor operations in PyTorch, on CUDA device `gpu` or the CPU; its device decoder."""

    def __init__(self, gpu: int | None, decoder: str | None = "torchvision", cudart=None) -> None:
        import torch

        self.torch, self.einsum = torch, torch.einsum
        self.device = torch.device("cpu") if gpu is None else torch.device("cuda", gpu)
        self.gpu = gpu
        # CUDA's runtime bindings pin() registers buffers with: torch.cuda.cudart() on a GPU; a stand-in given here
        # is used even on the CPU (the tests' failure path)
        self.cudart = cudart
        self._pinned: dict[int, object] = {}
        self._upload_stream = None
        if decoder is None:  # the trainer's side of a decode process: uploads and normalises only
            self.decoder = None
        elif ":" in decoder:
            self.decoder = own_decoder(self, decoder)
        elif gpu is None:
            self.decoder = PillowDecoder(self)
        elif decoder == "nvimgcodec":
            self.decoder = NvImageCodecDecoder(self)
        else:
            self.decoder = TorchvisionDecoder(self)

    def enter_decode_process(self) -> None:
        """Make the decode process's device the current one."""
        if self.gpu is not None:
            self.torch.cuda.set_device(self.device)

    def math(self) -> dict:
        """The float32 math this process runs with: TF32 for matmuls and cuDNN, the matmul precision (the trainer's
        settings, which its decode process applies with set_math)."""
        torch = self.torch
        try:
            precision = torch.get_float32_matmul_precision()
        except RuntimeError:  # torch 2.9+ will not say after a mix of its old and new TF32 APIs: the flags then
            precision = None
        return {"matmul_tf32": torch.backends.cuda.matmul.allow_tf32, "cudnn_tf32": torch.backends.cudnn.allow_tf32,
                "matmul_precision": precision}

    def set_math(self, math: dict) -> None:
        """Run with MATH (the trainer's math()): the decode process's resize products as the trainer's."""
        torch = self.torch
        if math["matmul_precision"] is not None:
            torch.set_float32_matmul_precision(math["matmul_precision"])
        if torch.backends.cuda.matmul.allow_tf32 != math["matmul_tf32"]:  # the precision sets it (torch 2.9+
            torch.backends.cuda.matmul.allow_tf32 = math["matmul_tf32"]  # refuses a needless mix of the two APIs)
        torch.backends.cudnn.allow_tf32 = math["cudnn_tf32"]

    def finish(self) -> None:
        """After a batch's device work: wait for it, so that the next decode may reuse the memory and the file
        buffer this batch used (torchvision's decoder writes on its own stream, which does not wait for ours:
        pytorch/vision#9606)."""
        if self.gpu is not None:
            self.torch.cuda.synchronize(self.device)

    def to_host(self, tensor, out: np.ndarray) -> None:
        """Copy TENSOR into the host array OUT (a decode process's shared slot), waiting for the copy."""
        self.torch.from_numpy(out).copy_(tensor)

    def upload(self, *arrays: np.ndarray) -> tuple:
        """Tensors on the device holding copies of ARRAYS, and the event after the copies (None on the CPU): the
        arrays may be reused once it has passed. On a GPU the copies (from pinned slots) go on a stream of their
        own, so they overlap the training step queued before them."""
        torch = self.torch
        if self.gpu is None:
            return (*(torch.from_numpy(a).clone() for a in arrays), None)
        if self._upload_stream is None:
            self._upload_stream = torch.cuda.Stream(self.device)
        with torch.cuda.stream(self._upload_stream):
            out = tuple(torch.from_numpy(a).to(self.device, non_blocking=True) for a in arrays)
        event = torch.cuda.Event()
        event.record(self._upload_stream)
        return (*out, event)

    def hand_over(self, event, *tensors) -> None:
        """The consumer's stream waits for EVENT (the TENSORS' upload), and the allocator keeps their memory for
        that stream."""
        if event is not None:
            stream = self.torch.cuda.current_stream(self.device)
            stream.wait_event(event)
            for tensor in tensors:
                tensor.record_stream(stream)

    def pin(self, buffer, name: str) -> None:
        """Page-lock a shared buffer (NAME: a reader's, a decode process's slot), so that copies between it and the
        device are direct (GPU only). A failure is PinError naming the buffer, its size and CUDA's words, CUDA's
        last error cleared (left set, a later check would blame an unrelated kernel for it): the run stops rather
        than copy from pageable memory unseen."""
        if (self.gpu is None and self.cudart is None) or id(buffer) in self._pinned:
            return
        import ctypes

        cudart = self._cudart()
        view = (ctypes.c_char * len(buffer)).from_buffer(buffer)
        code = cudart.cudaHostRegister(ctypes.addressof(view), len(buffer), 0)
        if int(code) != 0:
            del view
            raise PinError(f"loader gpu: cudaHostRegister could not pin {name} ({len(buffer)} bytes): CUDA error "
                           f"{int(code)} ({_error_string(cudart, code)}){_clear_last_error(cudart)}")
        self._pinned[id(buffer)] = view

    def unpin(self, buffer) -> None:
        view = self._pinned.pop(id(buffer), None)
        if view is not None:
            import ctypes

            self._cudart().cudaHostUnregister(ctypes.addressof(view))
            del view

    def _cudart(self):
        if self.cudart is None:
            self.cudart = self.torch.cuda.cudart()
        return self.cudart

    def files(self, buffer, nbytes: list[int]) -> list:
        """The batch's files as CPU uint8 tensors over BUFFER (no copy)."""
        return list(self.torch.frombuffer(buffer, dtype=self.torch.uint8, count=sum(nbytes)).split(nbytes))

    def host_array(self, file) -> np.ndarray:
        return file.numpy()

    def from_hwc(self, pixels: np.ndarray):
        """[3, H, W] uint8 on the device from host pixels [H, W, 3]."""
        return self.torch.from_numpy(pixels).to(self.device).permute(2, 0, 1)

    def flatten(self, images: list, pad: int):
        """IMAGES ([3, H, W] uint8 each) one after another in one 1-D tensor, then PAD zeros."""
        from torch._utils import _flatten_dense_tensors

        return _flatten_dense_tensors([*images, self.torch.zeros(pad, dtype=self.torch.uint8, device=self.device)])

    def rows(self, flat, starts: np.ndarray, width: int):
        """[*starts.shape, WIDTH]: WIDTH elements of FLAT from each start (one gather of an unfolded view)."""
        return flat.unfold(0, width, 1)[self.torch.from_numpy(starts).to(self.device)]

    def tensor(self, array: np.ndarray):
        return self.torch.from_numpy(array).to(self.device)

    def to_float(self, t):
        return t.float()

    def to_uint8(self, t):
        """T's values rounded to the nearest of 0..255, as uint8 (Pillow's resize output)."""
        return t.round().clamp(0, 255).to(self.torch.uint8)

    def concat(self, tensors: list, axis: int = 0):
        return self.torch.cat(tensors, axis)


class PinError(RuntimeError):
    """cudaHostRegister refused a buffer."""


def _error_string(cudart, code) -> str:
    """CUDA's words for CODE, where the bindings have cudaGetErrorString."""
    try:
        return str(cudart.cudaGetErrorString(code))
    except Exception as exc:  # no such binding, or one that takes another type
        return f"cudaGetErrorString unavailable: {type(exc).__name__}"


def _clear_last_error(cudart) -> str:
    """Reset CUDA's last error with cudaGetLastError (torch's bindings lack it: then libcudart's own, as this
    process loaded it); '' once done, else why not, for the error's message."""
    try:
        clear = getattr(cudart, "cudaGetLastError", None) or _loaded_libcudart().cudaGetLastError
        clear()
        return ""
    except Exception as exc:
        return f"; CUDA's last error not cleared ({type(exc).__name__}: {exc})"


def _loaded_libcudart():
    """libcudart as this process mapped it (torch loads it), through ctypes."""
    import ctypes

    with open("/proc/self/maps") as fh:
        paths = {line.split()[-1] for line in fh if "/libcudart.so" in line}
    if not paths:
        raise OSError("no libcudart.so mapped in this process")
    return ctypes.CDLL(sorted(paths)[0])


class TorchvisionDecoder:
    """nvJPEG through torchvision: one call for the batch, [3, H, W] uint8 tensors on the GPU."""

    name = "torchvision.io.decode_jpeg"

    def __init__(self, ops: TorchOps) -> None:
        try:
            from torchvision.io import ImageReadMode, decode_jpeg
        except Exception as exc:  # ImportError, or a torchvision built for another torch failing to load
            raise LoaderUnavailable(
                "loader gpu: PyTorch decodes JPEGs on the GPU with torchvision.io.decode_jpeg, and torchvision "
                f"cannot be imported ({type(exc).__name__}: {exc}); install the torchvision built for torch "
                f"{ops.torch.__version__}, or use --loader cpu") from None
        self._decode, self._rgb, self._device = decode_jpeg, ImageReadMode.RGB, ops.device

    def decode(self, files: list, sizes: np.ndarray) -> list:
        try:
            return self._decode(files, mode=self._rgb, device=self._device)
        except Exception as exc:
            if out_of_memory(exc):
                raise
            raise Refused(f"{type(exc).__name__}: {str(exc)[:300]}") from exc


class NvImageCodecDecoder:
    """nvImageCodec's batched Decoder (nvJPEG behind it): one call for the batch on the current stream;
    each decoded image ([H, W, 3], CUDA array interface) becomes a [3, H, W] view (a call an image: its Python API
    returns one object an image). EXIF orientation is not applied: the size table, like Pillow and nvJPEG, has the
    stored shape. On the CPU twin (ops.gpu None, the tests' "device_ops:NvImageCodecDecoder") nvImageCodec's CPU
    backend (libjpeg-turbo) decodes, through the same calls."""

    name = "nvidia.nvimgcodec.Decoder"

    def __init__(self, ops: TorchOps) -> None:
        try:
            from nvidia import nvimgcodec
        except Exception as exc:
            raise LoaderUnavailable(
                f"loader gpu: --decoder nvimgcodec needs nvImageCodec for CUDA 13 ({type(exc).__name__}: {exc}); "
                "install nvidia-nvimgcodec-cu13 and nvidia-nvjpeg-cu13 (make gpu-prep puts them in .whl/), or use "
                "--decoder torchvision") from None
        self.ops = ops
        self.params = nvimgcodec.DecodeParams(apply_exif_orientation=False)
        if ops.gpu is None:
            self._decoder = nvimgcodec.Decoder(device_id=nvimgcodec.NVIMGCODEC_DEVICE_CPU_ONLY,
                                               backends=[nvimgcodec.Backend(nvimgcodec.CPU_ONLY)])
        else:
            self._decoder = nvimgcodec.Decoder(device_id=ops.gpu)

    def decode(self, files: list, sizes: np.ndarray) -> list:
        torch = self.ops.torch
        stream = 0 if self.ops.gpu is None else torch.cuda.current_stream(self.ops.device).cuda_stream
        try:
            images = self._decoder.decode([f.numpy() for f in files], params=self.params, cuda_stream=stream)
        except Exception as exc:
            if out_of_memory(exc):
                raise
            raise Refused(f"{type(exc).__name__}: {str(exc)[:300]}") from exc
        missing = [k for k, image in enumerate(images) if image is None]
        if missing:
            raise Refused(f"nvImageCodec decoded {len(images) - len(missing)} of {len(images)} images", missing)
        if self.ops.gpu is None:  # host images (array interface)
            return [torch.from_numpy(np.asarray(image)).permute(2, 0, 1) for image in images]
        return [torch.as_tensor(image, device=self.ops.device).permute(2, 0, 1) for image in images]


class PaddleOps:
    """The same in Paddle, on GPU `gpu` (nvJPEG via paddle.vision.ops.decode_jpeg, image by image: Paddle has no
    batched decode) or the CPU."""

    def __init__(self, gpu: int | None, decoder: str | None = "torchvision") -> None:
        import paddle

        self.paddle, self.einsum = paddle, paddle.einsum
        self.place = paddle.CPUPlace() if gpu is None else paddle.CUDAPlace(gpu)
        self.gpu = gpu
        if decoder is None:
            self.decoder = None
        elif ":" in decoder:
            self.decoder = own_decoder(self, decoder)
        else:
            self.decoder = PillowDecoder(self) if gpu is None else PaddleDecoder(self)

    def enter_decode_process(self) -> None:
        """Set the decode process's GPU (decode_jpeg runs on the current one)."""
        if self.gpu is not None:
            self.paddle.device.set_device(f"gpu:{self.gpu}")

    def finish(self) -> None:
        if self.gpu is not None:  # the file buffer is reused once the batch's work is done
            self.paddle.device.synchronize()

    def to_host(self, tensor, out: np.ndarray) -> None:
        out[...] = tensor.numpy()

    def upload(self, *arrays: np.ndarray) -> tuple:
        return (*(self.paddle.to_tensor(a, place=self.place) for a in arrays), None)  # copies, synchronously

    def hand_over(self, event: None, *tensors) -> None:
        pass

    def math(self) -> dict:
        """Paddle's process-wide TF32 switches (cuBLAS, cuDNN), where the build has them (a CPU build: none)."""
        core = self._core()
        return {name: getattr(core, f"get_{name}")() for name in ("cublas_switch", "cudnn_switch")
                if hasattr(core, f"get_{name}")}

    def set_math(self, math: dict) -> None:
        core = self._core()
        for name, on in math.items():
            getattr(core, f"set_{name}")(on)

    def _core(self):
        try:  # paddle.base since 2.6, paddle.fluid before
            from paddle.base import core
        except ImportError:
            from paddle.fluid import core
        return core

    def pin(self, buffer, name: str) -> None:
        pass  # Paddle copies a numpy array to the device through its own staging buffer

    def unpin(self, buffer) -> None:
        pass

    def files(self, buffer, nbytes: list[int]) -> list:
        whole = np.frombuffer(buffer, np.uint8, count=sum(nbytes))
        return np.split(whole, np.cumsum(nbytes)[:-1])

    def host_array(self, file) -> np.ndarray:
        return file

    def from_hwc(self, pixels: np.ndarray):
        return self.paddle.to_tensor(pixels, place=self.place).transpose([2, 0, 1])

    def flatten(self, images: list, pad: int):
        return self.paddle.concat([*(image.flatten() for image in images), self.paddle.zeros([pad], dtype="uint8")
                                   .to(self.place)])

    def rows(self, flat, starts: np.ndarray, width: int):
        index = self.tensor((starts[..., None] + np.arange(width)).reshape(-1))  # Paddle: no unfolded view
        return self.paddle.gather(flat, index).reshape([*starts.shape, width])

    def tensor(self, array: np.ndarray):
        return self.paddle.to_tensor(array, place=self.place)

    def to_float(self, t):
        return t.astype("float32")

    def to_uint8(self, t):
        return self.paddle.clip(self.paddle.round(t), 0, 255).astype("uint8")

    def concat(self, tensors: list, axis: int = 0):
        return self.paddle.concat(tensors, axis)


class PaddleDecoder:
    """nvJPEG through Paddle, image by image, on the current GPU: [3, H, W] uint8 tensors."""

    name = "paddle.vision.ops.decode_jpeg"

    def __init__(self, ops: PaddleOps) -> None:
        self.ops = ops

    def decode(self, files: list, sizes: np.ndarray) -> list:
        paddle, cpu = self.ops.paddle, self.ops.paddle.CPUPlace()
        out = []
        for k, f in enumerate(files):
            try:
                out.append(paddle.vision.ops.decode_jpeg(paddle.to_tensor(f, place=cpu), mode="rgb"))
            except Exception as exc:
                if out_of_memory(exc):
                    raise
                raise Refused(f"{type(exc).__name__}: {str(exc)[:300]}", [k]) from exc
        return out


OPS = {"torch": TorchOps, "paddle": PaddleOps}
