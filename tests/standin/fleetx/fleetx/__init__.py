"""STAND-IN for FleetX's `fleetx` package (tests only; FleetX/python/fleetx at the pinned commit), what
scripts/fleetx/vgg16_benchmark.py uses of it: `applications.VGG16()` (a static program with `loss`, and
`get_train_dataloader`) and `MultiGPUTrainer().fit()`, which prints FleetX's per-step lines with known speeds.

The kit's driver imports this package from the cwd the recipe runs in (FleetX/python, PYTHONPATH=.), before it
builds its static program. Here the worker joins the real collective group of its rank: FleetX's program does
it when its startup program runs c_gen_nccl_id/c_comm_init, which Paddle's CPU build does not have (fleet's
CollectiveHelper raises "comm_id must be generated in paddlepaddle-xpu or paddlepaddle-gpu"); so on a CPU build
the stand-in joins over gloo with paddle.distributed (the launcher's PADDLE_MASTER and trainer endpoints, over
the test hosts' network) and makes that one CollectiveHelper step a no-op. Everything else the driver does —
fleet.init, its DistributedStrategy, the distributed Momentum optimizer and minimize — is Paddle's own."""

import os

import paddle
import paddle.distributed as dist

CPU_BUILD = not (paddle.is_compiled_with_cuda() or paddle.is_compiled_with_xpu())
if CPU_BUILD:
    os.environ.setdefault("PADDLE_DISTRI_BACKEND", "gloo")
    os.environ.setdefault("GLOO_SOCKET_IFNAME", os.environ.get("NCCL_SOCKET_IFNAME", "lo"))
dist.init_parallel_env()
_ranks = paddle.to_tensor([dist.get_rank()])
if dist.get_world_size() > 1:  # one GPU: no launcher, no group
    dist.all_reduce(_ranks)  # every rank's number, summed over the group: 0 + 1 + ... + world-1
GROUP = {"rank": dist.get_rank(), "world": dist.get_world_size(), "rank_sum": int(_ranks.numpy()[0])}

if CPU_BUILD:
    from paddle.distributed.fleet.meta_optimizers.common import CollectiveHelper

    def _joined(self, *args, **kwargs):  # the group is joined above (gloo); no NCCL/BKCL id ops on a CPU build
        return None

    CollectiveHelper._init_communicator = _joined

from fleetx import applications  # noqa: E402
from fleetx.applications import MultiGPUTrainer  # noqa: E402

__all__ = ["GROUP", "MultiGPUTrainer", "applications"]
