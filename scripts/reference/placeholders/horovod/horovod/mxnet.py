"""horovod.mxnet for one rank, as DLE MXNet's train.py, fit.py, data.py, dali.py and log_utils.py import it."""

from horovod import allreduce, broadcast, init, local_rank, local_size, rank, size  # noqa: F401


def broadcast_parameters(params, root_rank=0):
    """One rank: every parameter is already rank 0's."""


def DistributedTrainer(params, optimizer, optimizer_params=None, *_args, **_kwargs):  # noqa: N802 (Horovod's name)
    """One rank: Horovod's trainer is gluon's without a kvstore (nothing to reduce)."""
    import mxnet as mx

    return mx.gluon.Trainer(params, optimizer, optimizer_params, kvstore=None)
