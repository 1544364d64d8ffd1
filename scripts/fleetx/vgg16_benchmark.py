#!/usr/bin/env python3
"""FleetX VGG16 collective benchmark: FleetX's benchmark/paddle/vgg_benchmark.py with batch and AMP as flags.

The strategy is the published one: ExecutionStrategy num_threads 2, num_iteration_per_drop_scope 100;
BuildStrategy enable_inplace off, fuse_elewise_add_act_ops and fuse_bn_act_ops on; nccl_comm_num 1;
Momentum with L2Decay(1e-4); `fleetx.MultiGPUTrainer().fit(model, loader, epoch=10)`. The published
script fixes batch 32 and FP32 and downloads its data from HDFS; here --batch-size, --amp
(DistributedStrategy.amp, the seed's "amp on") and --data-dir (a local copy) are flags.
FleetX prints steps/s ('speed: ...'); the kit multiplies by the global batch recorded beside the log.
"""

import argparse

import fleetx as X
import paddle
import paddle.distributed.fleet as fleet
import paddle.fluid as fluid


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32, help="per GPU (the published script: 32)")
    parser.add_argument("--amp", action="store_true", help="DistributedStrategy.amp = True")
    parser.add_argument("--data-dir", default=".", help="the VGG16 application's training data")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.00001, help="FleetX parse_train_configs default")
    parser.add_argument("--momentum", type=float, default=0.99, help="FleetX parse_train_configs default")
    args = parser.parse_args()

    paddle.enable_static()
    fleet.init(is_collective=True)
    model = X.applications.VGG16()
    loader = model.get_train_dataloader(args.data_dir, batch_size=args.batch_size)

    exec_strategy = fluid.ExecutionStrategy()
    exec_strategy.num_threads = 2
    exec_strategy.num_iteration_per_drop_scope = 100
    dist_strategy = fleet.DistributedStrategy()
    dist_strategy.execution_strategy = exec_strategy
    build_strategy = fluid.BuildStrategy()
    build_strategy.enable_inplace = False
    build_strategy.fuse_elewise_add_act_ops = True
    build_strategy.fuse_bn_act_ops = True
    dist_strategy.build_strategy = build_strategy
    dist_strategy.nccl_comm_num = 1
    dist_strategy.amp = args.amp

    optimizer = fluid.optimizer.Momentum(learning_rate=args.lr, momentum=args.momentum,
                                         regularization=fluid.regularizer.L2Decay(0.0001))
    optimizer = fleet.distributed_optimizer(optimizer, strategy=dist_strategy)
    optimizer.minimize(model.loss)
    X.MultiGPUTrainer().fit(model, loader, epoch=args.epochs)


if __name__ == "__main__":
    main()
