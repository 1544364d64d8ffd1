"""STAND-IN for fleetx.applications (tests only): VGG16 as a small static program (the real one is VGG16 on
224x224 images), its loader of synthetic batches, and the trainer."""

import numpy as np
import paddle

from fleetx.applications.trainer import MultiGPUTrainer

STEPS_PER_EPOCH = 23  # FleetX prints from step start_step + 1 = 11: twelve lines per epoch, 120 in all


class VGG16:
    def __init__(self):
        image = paddle.static.data("image", [None, 3, 8, 8], "float32")
        label = paddle.static.data("label", [None, 1], "int64")
        logits = paddle.static.nn.fc(paddle.flatten(image, 1), 10)
        self.loss = paddle.mean(paddle.nn.functional.cross_entropy(logits, label))
        self.data_dir = self.batch_size = self.use_dali = None

    def get_train_dataloader(self, data_dir, batch_size=32, shuffle=True, use_dali=False):
        self.data_dir, self.batch_size, self.use_dali = data_dir, batch_size, use_dali
        return Loader(batch_size)


class Loader:
    def __init__(self, batch_size):
        self.batch_size = batch_size

    def __iter__(self):
        rng = np.random.default_rng(0)
        for _ in range(STEPS_PER_EPOCH):
            yield {"image": rng.random((self.batch_size, 3, 8, 8), dtype=np.float32),
                   "label": rng.integers(0, 10, (self.batch_size, 1), dtype=np.int64)}


__all__ = ["VGG16", "Loader", "MultiGPUTrainer"]
