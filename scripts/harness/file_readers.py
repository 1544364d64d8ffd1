"""Worker processes that read a batch's files into one shared buffer: the trainer sends one task a batch (its
paths and where each file goes) and gets one answer back, so its Python work per batch does not grow with the batch.
A task may name a PLAN, (module, function, arguments) of the harness: the worker also calls it and sends its result
back with the answer (the batch's numpy work, done in the worker's interpreter rather than beside training).

    readers = FileReaders(workers=8, slots=8)
    readers.submit(number, slot, paths, offsets, nbytes, plan)  # into readers.buffer(slot)
    errors, planned = readers.take(number)  # [(position in the batch, why)] of the files it could not read; PLAN's
    readers.close()

Each slot is an anonymous shared memory file (memfd) mapped by the trainer and every worker, handed to the workers
over their pipes; a slot grows (a new memfd) when a batch needs more. Nothing is left in /dev/shm or on disk,
however the processes end. The workers ignore SIGINT (the trainer stops them), and exit when the trainer closes
their pipe or dies: close() closes the trainer's ends at once (a worker holds no state; one blocked sending an
answer nobody will read gets EPIPE, an idle one EOF) and kills any left past REAP_S. With workers=0 the trainer
reads the files itself (take() reads the oldest task).
Standard library only (a plan's module brings its own imports); never imports the kit.
"""

from __future__ import annotations

import importlib
import mmap
import os
import signal
import socket
import subprocess
import sys
import time
from collections import deque
from multiprocessing.connection import Connection
from multiprocessing.reduction import recv_handle, send_handle

HERE = os.path.dirname(os.path.abspath(__file__))

POLL_S = 1.0  # how often a waiting worker checks that the trainer lives
REAP_S = 0.5  # how long close() waits for the workers to end before it kills them


def read_into(buffer, paths: list[str], offsets: list[int], nbytes: list[int]) -> list[tuple[int, str]]:
    """Read each of PATHS into BUFFER at its offset; [(position, why)] for those that could not be read whole."""
    errors = []
    view = memoryview(buffer)
    for k, path in enumerate(paths):
        start, size = offsets[k], nbytes[k]
        try:
            with open(path, "rb", buffering=0) as fh:
                got = fh.readinto(view[start : start + size])
                more = fh.read(1)
            if got != size or more:
                errors.append((k, f"the file changed after its size was cached: {got}{'+' if more else ''} bytes, "
                                  f"the size table says {size}"))
        except OSError as exc:
            errors.append((k, exc.strerror or str(exc)))
    view.release()
    return errors


def run_plan(plan: tuple | None):
    """PLAN's result (None without one); an exception it raised is the result, raised again where it is taken."""
    if plan is None:
        return None
    module, function, args = plan
    try:
        return getattr(importlib.import_module(module), function)(*args)
    except Exception as exc:
        return exc


def reader_main(conn: Connection, parent: int) -> None:
    """A worker: tasks (number, slot, size, new handle follows, paths, offsets, nbytes, plan) until the pipe
    closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    maps: dict[int, mmap.mmap] = {}
    try:
        while True:
            while not conn.poll(POLL_S):
                if os.getppid() != parent:
                    return
            task = conn.recv()
            if task is None:
                return
            number, slot, size, handle, paths, offsets, nbytes, plan = task
            if handle:
                fd = recv_handle(conn)
                old = maps.pop(slot, None)
                if old is not None:
                    old.close()
                maps[slot] = mmap.mmap(fd, size)
                os.close(fd)
            conn.send((number, read_into(maps[slot], paths, offsets, nbytes), run_plan(plan)))
    except (EOFError, OSError, KeyboardInterrupt):
        return
    finally:
        for m in maps.values():
            m.close()


def child() -> None:
    """A worker's entry point (python -c ...): argv holds its socket's fd and the trainer's pid."""
    fd, parent = int(sys.argv[1]), int(sys.argv[2])
    reader_main(Connection(fd), parent)


def start_child(code: str) -> tuple[subprocess.Popen, Connection]:
    """A plain Python process running CODE (python -c; a spawned multiprocessing child would import the trainer),
    and the trainer's end of its socket; the child's argv holds its socket's fd and the trainer's pid."""
    mine, theirs = socket.socketpair()
    try:
        proc = subprocess.Popen([sys.executable, "-c", code, str(theirs.fileno()), str(os.getpid())],
                                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
    except BaseException:
        mine.close()
        raise
    finally:
        theirs.close()
    return proc, Connection(mine.detach())


class Slot:
    """One shared buffer: its memfd (the trainer's copy), its mapping, and which workers have this generation."""

    def __init__(self, size: int) -> None:
        self.size = max(size, mmap.PAGESIZE)
        self.fd = os.memfd_create("kit-batch", os.MFD_CLOEXEC)
        os.ftruncate(self.fd, self.size)
        self.map = mmap.mmap(self.fd, self.size)
        self.sent: set[int] = set()

    def close(self, release=None) -> None:
        if release is not None:
            release(self.map)
        try:
            self.map.close()
        except BufferError:  # a view of it is still alive (an exception's frame): freed with the last one
            pass
        os.close(self.fd)


class FileReaders:
    """WORKERS processes reading batches into SLOTS shared buffers (workers=0: the caller reads)."""

    def __init__(self, workers: int, slots: int, slot_bytes: int = 0, release=None) -> None:
        self.workers = workers
        self._release = release  # called with a buffer before it is unmapped (to unpin it)
        self._slots = [Slot(slot_bytes) for _ in range(slots)]
        self._conns: list[Connection] = []
        self._procs = []
        self._inline: deque = deque()
        self._busy: dict[int, int] = {}  # batch number: worker
        self._next_worker = 0
        code = f"import sys; sys.path.insert(0, {HERE!r}); import file_readers; file_readers.child()"
        try:
            for _ in range(workers):
                proc, conn = start_child(code)
                self._conns.append(conn)
                self._procs.append(proc)
        except BaseException:
            self.close()
            raise

    def buffer(self, slot: int) -> mmap.mmap:
        return self._slots[slot].map

    def reserve(self, slot: int, size: int) -> None:
        """Make SLOT hold at least SIZE bytes (a new, larger buffer; call only while the slot is free)."""
        if size > self._slots[slot].size:
            old = self._slots[slot]
            old.close(self._release)
            self._slots[slot] = Slot(max(size, old.size * 5 // 4))

    def submit(self, number: int, slot: int, paths: list[str], offsets: list[int], nbytes: list[int],
               plan: tuple | None = None) -> None:
        if not self._conns:
            self._inline.append((number, slot, paths, offsets, nbytes, plan))
            return
        worker = self._next_worker
        self._next_worker = (worker + 1) % len(self._conns)
        buf = self._slots[slot]
        fresh = worker not in buf.sent
        conn = self._conns[worker]
        try:
            conn.send((number, slot, buf.size, fresh, paths, offsets, nbytes, plan))
            if fresh:
                send_handle(conn, buf.fd, self._procs[worker].pid)
        except OSError:
            raise self._ended(worker, number) from None
        buf.sent.add(worker)
        self._busy[number] = worker

    def _ended(self, worker: int, number: int) -> RuntimeError:
        proc = self._procs[worker]
        try:
            code = proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            code = None
        return RuntimeError(f"loader: file reader process {proc.pid} ended (exit code {code}) at batch {number}")

    def take(self, number: int) -> tuple[list[tuple[int, str]], object]:
        """Wait for batch NUMBER's files: the errors of its files, and its plan's result (what the plan raised is
        raised here). RuntimeError if its worker died."""
        if not self._conns:
            task = self._inline.popleft()
            assert task[0] == number, (task[0], number)
            errors, planned = read_into(self._slots[task[1]].map, *task[2:5]), run_plan(task[5])
        else:
            worker = self._busy.pop(number)
            try:
                got, errors, planned = self._conns[worker].recv()
            except (EOFError, OSError):
                raise self._ended(worker, number) from None
            assert got == number, (got, number)
        if isinstance(planned, BaseException):
            raise planned
        return errors, planned

    def close(self) -> None:
        """End the workers at once, answers in flight dropped: an answer larger than the socket's buffer (a big
        batch's) blocks its worker in send until read, so no stop message would reach it; closing the trainer's
        ends wakes every worker (EPIPE or EOF). Then reap them, killing any left past REAP_S; free the slots."""
        for conn in self._conns:
            conn.close()
        deadline = time.monotonic() + REAP_S
        for proc in self._procs:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._conns, self._procs = [], []
        for slot in self._slots:
            slot.close(self._release)
        self._slots = []
