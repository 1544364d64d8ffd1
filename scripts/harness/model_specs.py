"""What the harness's models are, written once for both frameworks: names, sizes, architecture constants, seed 003's
configurations (``size``: full | tiny), the checks on a build's arguments, and each model's optimizer settings.

Standard library only (numpy is imported by ``sinusoid_table`` alone, when called). The layers live in one module per
framework and model family (torch_imagenet.py, torch_seed003.py, paddle_imagenet.py, paddle_seed003.py, over
torch_layers.py / paddle_layers.py), the optimizer step in torch_trainer.py / paddle_trainer.py; models_torch.py and
models_paddle.py put them together as ``build_model``.
"""

from __future__ import annotations

import argparse
import math

from catalogue import IMAGENET as IMAGENET_MODELS  # the model sets, from the one catalogue
from catalogue import MODELS as CATALOGUE_MODELS
from catalogue import NAMES as MODELS  # noqa: F401
from catalogue import SEED003 as SEED003_MODELS

DATA_FORMATS = ("NCHW", "NHWC")
SIZES = ("full", "tiny")

# ---------------------------------------------------------------- the ImageNet models (seeds 000-002, 004)
RESNET50_BLOCKS = (3, 4, 6, 3)  # bottlenecks per stage
RESNET50_WIDTHS = (64, 128, 256, 512)  # bottleneck width per stage; output channels = width * 4
RESNET50_STEM = 64
BOTTLENECK_EXPANSION = 4
RESNET50_FEATURES = 512 * BOTTLENECK_EXPANSION  # 2048
VGG16_CONFIG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")
VGG16_POOL = 7
VGG16_HIDDEN = 4096
VGG16_DROPOUT = 0.5
VGG16_INIT_STD = 0.01  # torchvision's VGG classifier: N(0, 0.01) weights, zero bias
ARCFACE_EMBEDDING = 512
ARCFACE_SCALE = 64.0  # s
ARCFACE_MARGIN = 0.5  # m (additive angular margin, radians)
ARCFACE_DROPOUT = 0.4
ARCFACE_WEIGHT_STD = 0.01

# ---------------------------------------------------------------- seed 003's five models
# SE-ResNeXt50 (32x4d), DeepLabV3+ (ResNet50, output stride 16), BERT-base pre-training (MLM + NSP),
# Transformer base (WMT en-de, shared 37k vocabulary), CycleGAN (2 ResNet-9 generators + 2 70x70 PatchGANs).
# Each has a "full" configuration (the published one; counted for parity) and a "tiny" one (same topology,
# fewer/narrower layers) for CPU tests.
CONFIGS: dict[str, dict[str, dict]] = {
    "se_resnext50": {
        "full": {"blocks": (3, 4, 6, 3), "stem": 64, "planes": (64, 128, 256, 512), "cardinality": 32,
                 "base_width": 4, "reduction": 16},
        "tiny": {"blocks": (1, 1, 1, 1), "stem": 16, "planes": (16, 32, 64, 128), "cardinality": 8,
                 "base_width": 4, "reduction": 4},
    },
    "deeplabv3p": {
        "full": {"blocks": (3, 4, 6, 3), "stem": 64, "planes": (64, 128, 256, 512), "aspp": 256,
                 "rates": (6, 12, 18), "low_level": 48, "decoder": 256},
        "tiny": {"blocks": (1, 1, 1, 1), "stem": 16, "planes": (16, 32, 64, 128), "aspp": 32,
                 "rates": (6, 12, 18), "low_level": 8, "decoder": 32},
    },
    "bert": {
        "full": {"vocab": 30522, "hidden": 768, "layers": 12, "heads": 12, "intermediate": 3072,
                 "max_position": 512, "type_vocab": 2, "dropout": 0.1},
        "tiny": {"vocab": 1000, "hidden": 64, "layers": 2, "heads": 4, "intermediate": 256,
                 "max_position": 128, "type_vocab": 2, "dropout": 0.1},
    },
    "transformer": {
        "full": {"vocab": 37000, "d_model": 512, "layers": 6, "heads": 8, "d_inner": 2048, "max_length": 256,
                 "dropout": 0.1, "label_smoothing": 0.1},
        "tiny": {"vocab": 1000, "d_model": 64, "layers": 2, "heads": 4, "d_inner": 256, "max_length": 128,
                 "dropout": 0.1, "label_smoothing": 0.1},
    },
    "cyclegan": {
        "full": {"ngf": 64, "ndf": 64, "res_blocks": 9, "d_layers": 3, "lambda_cycle": 10.0,
                 "lambda_identity": 0.5},
        "tiny": {"ngf": 8, "ndf": 8, "res_blocks": 2, "d_layers": 3, "lambda_cycle": 10.0,
                 "lambda_identity": 0.5},
    },
}
# seed 003's models with classes, from the catalogue (se_resnext50: ImageNet's 1000; DeepLab: Cityscapes' 19)
SEED003_CLASSES = {name: CATALOGUE_MODELS[name].num_classes for name in SEED003_MODELS
                   if CATALOGUE_MODELS[name].num_classes}
DEEPLAB_CLASSES = SEED003_CLASSES["deeplabv3p"]
DEEPLAB_OUTPUT_STRIDE = 16
IGNORE_INDEX = 255  # Cityscapes' "void" label
BERT_LN_EPS = 1e-12
BERT_MASK_BIAS = -10000.0  # added to the attention scores of padding tokens
TRANSFORMER_LN_EPS = 1e-6
TRANSFORMER_PAD = 0  # id 0 pads source and target
TRANSFORMER_MASK_BIAS = -1e9
INIT_STD = 0.02  # BERT's N(0, 0.02); CycleGAN's init_type='normal', gain 0.02
GAN_LEAKY_SLOPE = 0.2


def seed003_config(name: str, size: str = "full", **overrides) -> dict:
    """Seed 003 model NAME's configuration at SIZE, with OVERRIDES (e.g. ``dropout=0.0``) of its own keys."""
    if name not in CONFIGS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(SEED003_MODELS)}")
    if size not in SIZES:
        raise ValueError(f"{name}: size must be one of {', '.join(SIZES)}, got {size!r}")
    config = dict(CONFIGS[name][size])
    unknown = set(overrides) - set(config)
    if unknown:
        raise ValueError(f"{name}: unknown configuration key(s) {', '.join(sorted(unknown))}")
    config.update(overrides)
    return config


def _positive_int(name: str, what: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name}: {what} must be an integer >= 1, got {value!r}")


def build_model(name: str, imagenet, seed003: dict, num_classes: int | None = 1000, data_format: str = "NCHW",
                embedding_size: int = ARCFACE_EMBEDDING, size: str = "full", **overrides):
    """A framework's build_model: the arguments checked, then IMAGENET(name, num_classes, data_format,
    embedding_size), or seed 003's SEED003[name]([classes,] configuration) (classes: se_resnext50 and deeplabv3p
    only; num_classes None, their own)."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    if name in SEED003_MODELS:  # num_classes None: the model's own (only se_resnext50 and deeplabv3p have classes)
        if num_classes is not None:
            _positive_int(name, "num_classes", num_classes)
        if data_format != "NCHW":
            raise ValueError(f"{name}: data_format must be NCHW (seed 003's models are built NCHW only)")
        config = seed003_config(name, size, **overrides)
        if name in SEED003_CLASSES:
            return seed003[name](num_classes or SEED003_CLASSES[name], config)
        return seed003[name](config)
    _positive_int(name, "num_classes", num_classes)
    _positive_int(name, "embedding_size", embedding_size)
    if data_format not in DATA_FORMATS:
        raise ValueError(f"{name}: data_format must be one of {', '.join(DATA_FORMATS)}, got {data_format!r}")
    return imagenet(name, num_classes, data_format, embedding_size)


def count_cli(framework: str, count, argv: list[str] | None = None) -> int:
    """``python models_<framework>.py``: each model's trainable parameters, COUNT(name, **build_model arguments)
    building it without storage."""
    parser = argparse.ArgumentParser(
        description=f"Print the trainable-parameter count of each harness model ({framework}).")
    parser.add_argument("--num-classes", type=int, default=1000)
    parser.add_argument("--embedding-size", type=int, default=ARCFACE_EMBEDDING)
    args = parser.parse_args(argv)
    for name in MODELS:
        if name == "deeplabv3p":
            kwargs = {"num_classes": DEEPLAB_CLASSES}
        elif name in SEED003_MODELS and name != "se_resnext50":
            kwargs = {}  # their own vocabulary
        else:
            kwargs = {"num_classes": args.num_classes, "embedding_size": args.embedding_size}
        print(f"{framework} {name} {count(name, **kwargs)}")
    return 0


# ---------------------------------------------------------------- the layers' shared arithmetic
def resnet_stages(stem: int, blocks, widths, output_stride: int = 32) -> list[list[tuple[int, int, int, int]]]:
    """The bottleneck stages of a ResNet-50-style trunk after its stem: per stage, per block, (in channels, width,
    stride, dilation); the first block of stages 2-4 halves the resolution (v1.5: on the 3x3). Output stride 16
    (DeepLabV3+): stage 4 keeps the resolution and dilates its later blocks x2 (torchvision's
    replace_stride_with_dilation)."""
    in_ch, stages = stem, []
    for index, (count, width) in enumerate(zip(blocks, widths, strict=True)):
        dilated = output_stride == DEEPLAB_OUTPUT_STRIDE and index == 3
        stage = []
        for block in range(count):
            stride = 2 if index > 0 and block == 0 and not dilated else 1
            stage.append((in_ch, width, stride, 2 if dilated and block > 0 else 1))
            in_ch = width * BOTTLENECK_EXPANSION
        stages.append(stage)
    return stages


def resnext_width(planes: int, cardinality: int, base_width: int) -> int:
    """The grouped 3x3's channels in a ResNeXt bottleneck (32x4d: planes 64 -> 128)."""
    return (planes * base_width // 64) * cardinality


def arcface_margin(margin: float) -> tuple[float, float, float, float]:
    """(cos m, sin m, threshold, fallback): target logit cos(theta + m) where cos(theta) > threshold, else
    cos(theta) - fallback (insightface's, where theta + m would pass pi)."""
    return math.cos(margin), math.sin(margin), math.cos(math.pi - margin), math.sin(math.pi - margin) * margin


def kaiming_std(out_ch: int, kernel: int) -> float:
    """Kaiming-normal std of a conv (fan_out, ReLU gain, as torchvision)."""
    return math.sqrt(2.0 / (out_ch * kernel * kernel))


def sinusoid_table(length: int, d_model: int):
    """Sinusoidal position encoding [length, d_model] float32 (Vaswani et al.; sin on even, cos on odd channels)."""
    import numpy as np

    position = np.arange(length, dtype=np.float64)[:, None]
    div = np.power(10000.0, np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    table = np.zeros((length, d_model), dtype=np.float64)
    table[:, 0::2] = np.sin(position / div)
    table[:, 1::2] = np.cos(position / div)
    return table.astype(np.float32)


# ---------------------------------------------------------------- optimizers
IMAGENET_SGD = {"optimizer": "momentum_sgd", "lr": None, "momentum": 0.9, "weight_decay": 1e-4}
OPTIMIZER_SETTINGS = {
    # the ImageNet models: the seeds' momentum SGD (train.py's --lr, --momentum, --weight-decay), linear-scaling lr
    **{name: IMAGENET_SGD for name in IMAGENET_MODELS},
    # seed 003: Paddle's benchmark/fluid scripts (v1.4) and the papers they follow; the lr is held constant (a
    # schedule changes no step's work); None: the linear scaling rule
    "se_resnext50": {"optimizer": "momentum", "lr": None, "momentum": 0.9, "weight_decay": 1e-4},
    "deeplabv3p": {"optimizer": "momentum", "lr": 0.01, "momentum": 0.9, "weight_decay": 4e-5},
    "bert": {"optimizer": "adamw", "lr": 1e-4, "betas": (0.9, 0.999), "eps": 1e-6, "weight_decay": 0.01,
             "clip_norm": 1.0},
    "transformer": {"optimizer": "adam", "lr": 2.0 * 512 ** -0.5 * 4000 ** -0.5, "betas": (0.9, 0.997),
                    "eps": 1e-9},
    "cyclegan": {"optimizer": "adam", "lr": 2e-4, "betas": (0.5, 0.999), "eps": 1e-8},
}
MOMENTUM_OPTIMIZERS = ("momentum_sgd", "momentum")  # SGD with momentum and L2 weight decay
assert all(s["optimizer"] == CATALOGUE_MODELS[name].optimizer for name, s in OPTIMIZER_SETTINGS.items()), \
    "catalogue.py names each model's optimizer as OPTIMIZER_SETTINGS does"


def linear_scaling_lr(batch: int, world_size: int = 1) -> float:
    """The seeds' learning-rate rule: 0.1 x global batch / 256."""
    return 0.1 * batch * world_size / 256


def optimizer_settings(name: str, batch_size: int = 1, **given) -> dict:
    """Model NAME's optimizer settings (run_start logs them), with GIVEN values (None: the model's own) of its
    own keys; lr None: the linear scaling rule for BATCH_SIZE (the global batch)."""
    settings = dict(OPTIMIZER_SETTINGS[name])
    unknown = set(given) - set(settings)
    if unknown:
        raise ValueError(f"{name}: unknown optimizer setting(s) {', '.join(sorted(unknown))}")
    settings.update({key: value for key, value in given.items() if value is not None})
    if settings["lr"] is None:
        settings["lr"] = linear_scaling_lr(batch_size)
    return settings


def no_decay(param_name: str) -> bool:
    """BERT excludes biases and LayerNorm parameters from weight decay."""
    return param_name.endswith("bias") or "norm" in param_name
