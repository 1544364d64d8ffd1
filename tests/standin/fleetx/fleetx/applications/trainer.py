"""STAND-IN for fleetx.applications.trainer.MultiGPUTrainer (tests only). FleetX's fit() runs the program on
CUDAPlace(FLAGS_selected_gpus) and prints, from step start_step + 1 of every epoch, on every worker:
    print("epoch id: %d, step%d, train_loss: %f, total time cost = %f, step per second: %f, speed: %f"
          % (epoch_id, step, loss[0], total_time, (step - start_step) / total_time, 1 / (end_time - start_time)))
This one says what it was given, iterates the loader as FleetX does, and prints those lines with the known
speeds SPEEDS (steps/s, one per printed step, the same on every worker of the synchronous job)."""

import json
import os
import sys

import paddle
import paddle.distributed.fleet as fleet

SPEEDS = [1.25] * 20 + [2.0, 4.0] * 50  # 20 warm-up steps, then 2 and 4 steps/s: mean 3, harmonic mean 8/3
LOSS = 6.907755


def strategy() -> dict:
    """What the driver's DistributedStrategy turned on (fleet keeps the one distributed_optimizer was given)."""
    given = fleet.fleet._user_defined_strategy
    return {"auto": given.auto, "amp": given.amp, "fuse_bn_act_ops": given.build_strategy.fuse_bn_act_ops}


class MultiGPUTrainer:
    def fit(self, model, dataloader, epoch, use_dali=False, start_step=10):
        import fleetx

        ops = sorted({op.type for op in paddle.static.default_main_program().global_block().ops})
        collective = [op for op in ops if "allreduce" in op or "all_reduce" in op]  # what fleet's minimize added
        data = sorted(os.listdir(model.data_dir)) if os.path.isdir(model.data_dir) else None
        print("stand-in fleetx " + json.dumps({
            **fleetx.GROUP, "worker_index": fleet.worker_index(), "worker_num": fleet.worker_num(),
            "argv": sys.argv, "cwd": os.getcwd(), "epochs": epoch, "batch_size": model.batch_size,
            "data_dir": model.data_dir, "data": data, "collective_ops": collective, "saved_program": model.saved_program,
            "dali": {"loader": model.use_dali, "fit": use_dali}, "strategy": strategy(),
            "env": {k: os.environ.get(k) for k in (
                "PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_TRAINER_ENDPOINTS", "PADDLE_CURRENT_ENDPOINT",
                "PADDLE_MASTER", "PADDLE_NNODES", "PADDLE_LOCAL_RANK", "FLAGS_selected_gpus", "POD_IP",
                "PADDLE_LOG_DIR", "PYTHONPATH")},
        }), flush=True)
        speeds = iter(SPEEDS * epoch)
        for epoch_id in range(epoch):
            total_time = 0.0
            for step, _data in enumerate(dataloader):
                if step > start_step:
                    speed = next(speeds)
                    total_time += 1 / speed
                    print("epoch id: %d, step%d, train_loss: %f, total time cost = %f, step per second: %f, "
                          "speed: %f" % (epoch_id, step, LOSS, total_time, (step - start_step) / total_time, speed),
                          flush=True)
