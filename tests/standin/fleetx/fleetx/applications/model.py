"""STAND-IN for fleetx.applications.model (tests only): VGG16 as a small static program (the real one is VGG16 on
224x224 images) and its loader of synthetic batches. As the real one at the pin, VGG16() looks for its saved
program at sysconfig.get_paths()["purelib"] + '/fleetx/applications/vgg16_nchw' (it reads that folder's
loss_name); where it is absent, the real one would wget it from fleet.bj.bcebos.com, which this one refuses."""

import os
import sysconfig

import numpy as np
import paddle

STEPS_PER_EPOCH = 23  # FleetX prints from step start_step + 1 = 11: twelve lines per epoch, 120 in all


class VGG16:
    def __init__(self, data_layout="NCHW"):
        fleet_path = sysconfig.get_paths()["purelib"] + "/fleetx/applications/"
        model_name = "vgg16_nchw" if data_layout == "NCHW" else "vgg16_nhwc"
        if not os.path.exists(fleet_path + model_name):
            raise RuntimeError(f"stand-in fleetx: {fleet_path + model_name} is absent, and the real VGG16() would "
                               "download it from https://fleet.bj.bcebos.com now")
        with open(fleet_path + model_name + "/loss_name") as fin:
            self.saved_program = {"path": fleet_path + model_name, "loss_name": fin.read()}
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


__all__ = ["VGG16", "Loader"]
