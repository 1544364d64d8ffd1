"""horovod.tensorflow for one rank, as DLE TensorFlow's utils/hvd_wrapper.py imports it (main.py: hvd.init(True))."""

from horovod import absent, allreduce, broadcast, init, local_rank, local_size, rank, size  # noqa: F401

Sum, Average = "Sum", "Average"  # reduce ops: equal for one rank


def DistributedOptimizer(optimizer, *_args, **_kwargs):  # noqa: N802 (Horovod's name)
    """One rank: the optimizer's own gradients are the averaged ones."""
    return optimizer


# DLE calls it only when size() > 1
BroadcastGlobalVariablesHook = absent("horovod.tensorflow.BroadcastGlobalVariablesHook")
