#!/usr/bin/env python3
"""FleetX VGG16 collective benchmark: FleetX's benchmark/paddle/vgg_benchmark.py with batch and AMP as flags.

The strategy is the published one: ExecutionStrategy num_threads 2, num_iteration_per_drop_scope 100;
BuildStrategy enable_inplace off, fuse_elewise_add_act_ops and fuse_bn_act_ops on; nccl_comm_num 1;
Momentum with L2Decay(1e-4); `fleetx.MultiGPUTrainer().fit(model, loader, epoch=10)`. The published
script fixes batch 32 and FP32 and downloads its data from HDFS; here --batch-size, --amp
(DistributedStrategy.amp, the seed's "amp on") and --data-dir (a local copy) are flags. --auto is seed 000's
third table, the auto-parallel mode: a DistributedStrategy with `auto = True` and nothing else set (Paddle picks
the strategies itself), and DALI reading the data (FleetX's `use_dali=True` loader and fit), as the seed says.
FleetX prints steps/s ('speed: ...'); the kit multiplies by the global batch recorded beside the log.
VGG16() loads its saved program from <site-packages>/fleetx/applications/vgg16_nchw and downloads it from the web
when it is not there; here it is read from a folder staged beforehand (bench/prepare_models.py --saved-program,
checked by sha256), by default <root>/saved-programs beside the checkout the fleetx package comes from. Its files
are re-hashed before FleetX looks, and a program that is not staged stops the run before anything is fetched.
The data is the kit's `fleetx` format (data_prep/convert.py): <data-dir>/train.txt, paths relative to train/.
With --auto it is passed to FleetX relative to the working directory: FleetX's DALI loader (dataset/dali.py build)
finds the list's folder by scanning the path from index 0, so an absolute path gives it '' and it reads ./train.

Written against the Paddle 2.0 API (paddle.static, paddle.optimizer, paddle.regularizer; the published script's
paddle.fluid is gone from Paddle >= 2.6), so it runs from Paddle 2.0 to 3.x:
- fluid.optimizer.Momentum(regularization=fluid.regularizer.L2Decay(c)) is
  paddle.optimizer.Momentum(weight_decay=paddle.regularizer.L2Decay(c)): the same L2 term added to each gradient;
- the ExecutionStrategy (ParallelExecutor threads and scope dropping) is set where Paddle still has one
  (paddle.static.ExecutionStrategy, Paddle 2.x); Paddle 3 removed the ParallelExecutor and with it that
  strategy, so there it is reported and left out: everything else is set as published;
- the program is built in Paddle 2's ProgramDesc IR (Paddle 3's paddle.pir_utils.OldIrGuard): fleet's static
  collective optimizer and FleetX's static model are written for it, not for Paddle 3's default PIR.
"""

import argparse
import contextlib
import os
import sys
import types
from pathlib import Path

import fleetx as X
import paddle
import paddle.distributed.fleet as fleet

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "reference"))
import saved_programs  # noqa: E402

SAVED_PROGRAM, INTO = "vgg16_nchw", "fleetx/applications"  # VGG16(data_layout="NCHW") at the pin


def program_ir():
    """Paddle 2's static-graph IR: a no-op before Paddle 3, OldIrGuard from it on."""
    guard = getattr(getattr(paddle, "pir_utils", None), "OldIrGuard", None)
    return guard() if guard is not None else contextlib.nullcontext()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=32, help="per GPU (the published script: 32)")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--amp", action="store_true", help="DistributedStrategy.amp = True")
    mode.add_argument("--auto", action="store_true",
                      help="auto-parallel: DistributedStrategy.auto = True alone, DALI reading the data")
    parser.add_argument("--data-dir", default=".", help="the VGG16 application's training data")
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.00001, help="FleetX parse_train_configs default")
    parser.add_argument("--momentum", type=float, default=0.99, help="FleetX parse_train_configs default")
    parser.add_argument("--saved-programs", type=Path, default=None,
                        help="the staged saved programs (default: saved-programs beside the fleetx checkout)")
    args = parser.parse_args()
    use_staged_program(args.saved_programs or default_saved_programs())

    with program_ir():
        paddle.enable_static()
        fleet.init(is_collective=True)
        model = X.applications.VGG16()
        data_dir = os.path.relpath(args.data_dir) if args.auto else args.data_dir  # DALI: see the docstring
        loader = model.get_train_dataloader(data_dir, batch_size=args.batch_size, use_dali=args.auto)
        dist_strategy = auto_strategy() if args.auto else published_strategy(args.amp)
        optimizer = paddle.optimizer.Momentum(learning_rate=args.lr, momentum=args.momentum,
                                              weight_decay=paddle.regularizer.L2Decay(0.0001))
        optimizer = fleet.distributed_optimizer(optimizer, strategy=dist_strategy)
        optimizer.minimize(model.loss)
        X.MultiGPUTrainer().fit(model, loader, epoch=args.epochs, use_dali=args.auto)


def default_saved_programs() -> Path:
    """<root>/saved-programs for the fleetx package of <root>/FleetX/python/fleetx (through the links of a scratch
    folder too)."""
    return Path(X.__file__).resolve().parents[3] / "saved-programs"


def use_staged_program(root: Path) -> None:
    """Point FleetX's model loader at `root` as its site-packages, once the staged program there checks out."""
    try:
        record = saved_programs.check(root, INTO, SAVED_PROGRAM)
    except saved_programs.SavedProgramError as exc:
        sys.exit(f"vgg16_benchmark.py: FleetX's saved program {exc} (FleetX would download it now; stage it "
                 f"first: bench/prepare_models.py --saved-program {SAVED_PROGRAM}=ARCHIVE paddle/vgg16)")
    model = sys.modules["fleetx.applications.model"]
    model.sysconfig = types.SimpleNamespace(get_paths=lambda: {"purelib": str(root)})
    print(f"vgg16_benchmark.py: FleetX's saved program {SAVED_PROGRAM} from {root / INTO / SAVED_PROGRAM} "
          f"({record['archive']}, sha256 {record['archive_sha256']} from {record['sha256_from']})", flush=True)


def auto_strategy():
    """Seed 000's auto-parallel table: `dist_strategy.auto = True`, nothing else."""
    dist_strategy = fleet.DistributedStrategy()
    dist_strategy.auto = True
    return dist_strategy


def published_strategy(amp: bool):
    """FleetX's vgg_benchmark.py strategy (seed 000's FP32 and AMP tables)."""
    dist_strategy = fleet.DistributedStrategy()
    if hasattr(paddle.static, "ExecutionStrategy"):  # Paddle 2.x
        exec_strategy = paddle.static.ExecutionStrategy()
        exec_strategy.num_threads = 2
        exec_strategy.num_iteration_per_drop_scope = 100
        dist_strategy.execution_strategy = exec_strategy
    else:
        print(f"vgg16_benchmark.py: Paddle {paddle.__version__} has no ExecutionStrategy (no ParallelExecutor): "
              "the published num_threads 2, num_iteration_per_drop_scope 100 do not apply", file=sys.stderr)
    build_strategy = paddle.static.BuildStrategy()
    build_strategy.enable_inplace = False
    build_strategy.fuse_elewise_add_act_ops = True
    build_strategy.fuse_bn_act_ops = True
    dist_strategy.build_strategy = build_strategy
    dist_strategy.nccl_comm_num = 1
    dist_strategy.amp = amp
    return dist_strategy


if __name__ == "__main__":
    main()
