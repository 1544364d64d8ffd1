"""The gpu loader's decode process: a child process that runs the loader's pipeline inline (its own reader
processes, one batched decode call a batch, crop and resize on the device) and hands each batch over as resized
uint8 pixels and labels in a shared slot. The trainer's interpreter does per batch one receive, one upload and the
normalisation; none of the decode's Python runs beside the training step, so it never holds the trainer's GIL
(bench/decode_overlap.py stage 3 measures a training thread's loss: a decode thread in the trainer cost it 14%).
The upload of batch i+1 starts when batch i is taken, on a stream of its own, so that it overlaps step i.

    proc = DecodeProcess(loader_kwargs, ahead, pixels_shape, batch_size, ops)  # waits until the child is ready
    pixels, labels = proc.take()   # device tensors: uint8 PIXELS_SHAPE, int64 [B]
    proc.close()

One socketpair carries pickled messages. Trainer to child: the loader's keyword arguments, the trainer's sys.path,
threads and float32 math (TF32; ops.math(), applied in the child: its resize products as the trainer's) once, then
the slots' memfds, then a slot number whenever the trainer is done with that slot, None to stop. Child to trainer:
("ready", decoder name, its math) or ("failed", exception) once; then, in batch order, ("batch", slot, stats) or
("error", exception, stats): a batch's error takes its place and take() raises it there. There are AHEAD + 1
slots: the child fills at most AHEAD while the trainer holds the one on its way to the device (until its upload
has passed). The stats are the loader's counters and the child's seconds per phase (Phases: waiting for the
readers, decode, crop and resize, the copy back into the slot, waiting for a free slot) over its wall time since
it began serving; on a GPU the child synchronises between phases, so the split is the device's too.
The child ignores SIGINT (the trainer stops it), and exits when the trainer closes the pipe or dies; close() sends
SIGTERM, on which the child stops at once, wherever it is (mid-batch too: nothing it holds is worth finishing),
closes its readers and exits; a child not ended within CLOSE_S (stopped, hung) is killed.
Standard library + numpy; never imports the kit.
"""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import time
from collections import deque
from contextlib import contextmanager
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle, send_handle

import numpy as np
from file_readers import POLL_S, Slot, start_child

HERE = os.path.dirname(os.path.abspath(__file__))
CLOSE_S = 5.0  # how long close() waits for the child to end on SIGTERM before it kills it
PHASES = ("read", "decode", "crop_resize", "copy_back", "slot_wait")  # Phases' keys, in a batch's order


class Phases:
    """Seconds per phase of the decode process's work (PHASES), and the wall time since it began: the phases
    should cover it (what they leave out is the loop's own Python)."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.began: float | None = None

    def begin(self) -> None:
        """Start the wall clock (once)."""
        if self.began is None:
            self.began = time.perf_counter()

    @contextmanager
    def __call__(self, phase: str):
        """Count the block's seconds as PHASE's."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[phase] += time.perf_counter() - t0

    def stats(self) -> dict:
        """run_stop's: {"phases_s": {phase: seconds}, "process_s": seconds since begin()}."""
        wall = 0.0 if self.began is None else time.perf_counter() - self.began
        return {"phases_s": {k: round(v, 6) for k, v in self.seconds.items()}, "process_s": round(wall, 6)}


class Stopped(BaseException):
    """The trainer's SIGTERM (close()): the child stops where it is. Not an Exception, so that no batch's error
    handling takes it for the batch's."""


def _stop(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # once: the readers then close undisturbed
    raise Stopped


def _labels_at(pixels: tuple) -> int:
    """Where a slot's int64 labels start: after its uint8 PIXELS, 8-byte aligned."""
    return -(-int(np.prod(pixels)) // 8) * 8


def _views(buffer, pixels: tuple, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """A slot's uint8 pixels and int64 labels, over BUFFER."""
    return (np.frombuffer(buffer, np.uint8, count=int(np.prod(pixels))).reshape(pixels),
            np.frombuffer(buffer, np.int64, count=batch, offset=_labels_at(pixels)))


def slot_bytes(pixels: tuple, batch: int) -> int:
    return _labels_at(pixels) + 8 * batch


def portable(exc: BaseException) -> BaseException:
    """EXC, or a RuntimeError in its words where it does not pickle."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class DecodeProcess:
    """The trainer's side: the child, its slots, and the batch on its way to the device."""

    def __init__(self, loader: dict, ahead: int, pixels: tuple, batch: int, ops) -> None:
        self.ops, self._pixels = ops, tuple(pixels)
        self.stats = {"decode_calls": 0, "decoded_batches": 0, "refused_batches": 0, **Phases().stats()}
        self._slots = [Slot(slot_bytes(pixels, batch)) for _ in range(ahead + 1)]
        self._views = [_views(slot.map, self._pixels, batch) for slot in self._slots]
        self._withheld: int | None = ahead  # the slot the child starts without: it fills AHEAD at first
        self._uploading: tuple | None = None  # (slot, pixels, labels, event) of the next batch, on its way
        self._inbox: deque = deque()  # messages received but not yet taken (ready())
        self._conn: Connection | None = None
        self._proc: subprocess.Popen | None = None
        code = (f"import sys; sys.path.insert(0, {HERE!r}); import decode_process, loader_gpu; "
                "decode_process.child(loader_gpu.DeviceImageLoader)")
        try:
            for k, slot in enumerate(self._slots):
                ops.pin(slot.map, f"decode process slot {k} (the trainer's mapping)")
            self._proc, self._conn = start_child(code)
            self._send({"loader": loader, "path": sys.path, "slots": len(self._slots), "pixels": self._pixels,
                        "batch": batch, "threads": _threads(ops), "math": ops.math()})
            for slot in self._slots:
                send_handle(self._conn, slot.fd, self._proc.pid)
            kind, *what = self._receive()
            if kind == "failed":
                raise what[0]
            self.decoder, self.math = what  # the child's decoder, and the math it runs with (the trainer's)
        except BaseException:
            self.close()
            raise

    @property
    def pid(self) -> int:
        return self._proc.pid

    def take(self) -> tuple:
        """The next batch on the device (uint8 pixels, int64 labels); its error, raised here at its place. The
        batch after it, when the child has handed it over, starts its upload before this one is returned, so that
        its copy overlaps this batch's training step."""
        if self._withheld is not None:
            self._send(self._withheld)
            self._withheld = None
        if self._uploading is None:
            self._uploading = self._upload(self._inbox.popleft() if self._inbox else self._receive())
        slot, pixels, labels, event = self._uploading
        self._uploading = None
        self.ops.hand_over(event, pixels, labels)
        if event is not None:
            event.synchronize()  # the copy was queued a step ago: passed, as a rule
        self._send(slot)
        if self.ready() and self._inbox[0][0] == "batch":
            self._uploading = self._upload(self._inbox.popleft())
        return pixels, labels

    def _upload(self, message) -> tuple:
        """(slot, pixels, labels, the event after their copies) of a batch's MESSAGE; raises an error's."""
        self.stats = message[-1]
        if message[0] == "error":
            raise message[1]
        slot = message[1]
        return (slot, *self.ops.upload(*self._views[slot]))

    def ready(self) -> int:
        """Batches (or their errors) the child has handed over and take() has not taken yet."""
        while self._conn.poll(0):
            self._inbox.append(self._receive())
        return len(self._inbox)

    def _send(self, message) -> None:
        try:
            self._conn.send(message)
        except OSError:
            raise self._ended() from None

    def _receive(self):
        try:
            while not self._conn.poll(POLL_S):
                if self._proc.poll() is not None:
                    raise self._ended()
            return self._conn.recv()
        except (EOFError, OSError):
            raise self._ended() from None

    def _ended(self) -> RuntimeError:
        try:
            code = self._proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            code = None
        return RuntimeError(f"loader gpu: the decode process {self._proc.pid} ended (exit code {code})")

    def close(self) -> None:
        """Stop the child at once (SIGTERM; killed past CLOSE_S), then free the slots once no copy reads them
        (idempotent)."""
        if self._uploading is not None and self._uploading[-1] is not None:
            self._uploading[-1].synchronize()
        self._uploading = None
        if self._proc is not None:
            try:
                self._conn.send(None)
            except OSError:
                pass
            if self._proc.poll() is None:
                self._proc.terminate()
            try:
                self._proc.wait(timeout=CLOSE_S)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        self._views = []
        for slot in self._slots:
            slot.close(self.ops.unpin)
        self._slots = []


def _threads(ops) -> int | None:
    torch = getattr(ops, "torch", None)
    return torch.get_num_threads() if torch is not None else None


def child(make_loader) -> None:
    """The child's entry point (python -c ...): argv holds its socket's fd and the trainer's pid; MAKE_LOADER is
    the gpu loader's class, run here inline."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop)
    try:
        _child(Connection(int(sys.argv[1])), int(sys.argv[2]), make_loader)
    except Stopped:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # nothing left to tear down: skip the interpreter's (torch's, ~0.5 s)


def _child(conn: Connection, parent: int, make_loader) -> None:
    try:
        config = conn.recv()
        fds = [recv_handle(conn) for _ in range(config["slots"])]
    except (EOFError, OSError):
        return
    sys.path[:0] = [p for p in config["path"] if p not in sys.path]
    import mmap

    maps = [mmap.mmap(fd, slot_bytes(config["pixels"], config["batch"])) for fd in fds]
    for fd in fds:
        os.close(fd)
    loader = None
    try:
        try:
            loader = make_loader(**config["loader"])  # the size table first, then the decoder (CUDA)
            loader.ops.enter_decode_process()
            if config["threads"]:
                loader.ops.torch.set_num_threads(config["threads"])
            if config["math"]:
                loader.ops.set_math(config["math"])
            for k, m in enumerate(maps):
                loader.ops.pin(m, f"decode process slot {k}")
        except Exception as exc:
            conn.send(("failed", portable(exc)))
            return
        conn.send(("ready", loader.decoder, loader.ops.math()))
        serve(conn, parent, loader, [_views(m, config["pixels"], config["batch"]) for m in maps],
              deque(range(config["slots"] - 1)))
    except (EOFError, OSError):
        return
    finally:
        if loader is not None:
            loader.close()  # its readers, at once
            for m in maps:
                loader.ops.unpin(m)


def serve(conn: Connection, parent: int, loader, views: list, free: deque) -> None:
    """Fill the FREE slots batch after batch, each as soon as the trainer gives it back, until told to stop; the
    waits and the copies counted in the loader's phases (its own count the rest)."""
    timed = loader.phases
    timed.begin()
    while True:
        with timed("slot_wait"):
            while not free or conn.poll(0):
                while not free and not conn.poll(POLL_S):
                    if os.getppid() != parent:
                        return
                message = conn.recv()
                if message is None:
                    return
                free.append(message)
        slot = free.popleft()
        try:
            pixels, labels = loader._next_batch()
            with timed("copy_back"):
                loader.ops.to_host(pixels, views[slot][0])
                views[slot][1][:] = labels
                del pixels
            conn.send(("batch", slot, loader.stats()))
        except Exception as exc:  # DataError, out of memory, a reader that died: take() raises it at this batch
            free.appendleft(slot)
            conn.send(("error", portable(exc), loader.stats()))
