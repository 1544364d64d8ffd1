"""The kit's one-rank placeholder for Horovod (scripts/reference/placeholders/README.md): a run of one process is
Horovod's world of size 1, so init, rank, size, allreduce and broadcast are exact; whatever needs more ranks (or
Horovod's own runtime) stops with a clear error."""

HINT = ("the kit's one-rank Horovod placeholder (scripts/reference/placeholders) runs one process only; more ranks "
        "need Horovod itself (HOROVOD_WITH_TENSORFLOW=1 or HOROVOD_WITH_MXNET=1 pip install horovod)")


class HorovodAbsent(RuntimeError):
    pass


def init(*_args, **_kwargs) -> None:
    """One rank: nothing to set up."""


def size() -> int:
    return 1


def local_size() -> int:
    return 1


def rank() -> int:
    return 0


def local_rank() -> int:
    return 0


def allreduce(tensor, *_args, **_kwargs):
    """The sum or average over one rank is the tensor itself."""
    return tensor


def broadcast(tensor, *_args, **_kwargs):
    return tensor


def absent(name: str):
    def refuse(*_args, **_kwargs):
        raise HorovodAbsent(f"{name}: {HINT}")

    return refuse
