"""The harness's three models in Paddle: ResNet50 v1.5, VGG16 and ArcFace (ResNet50 trunk + angular margin).

Self-contained on purpose (standard library + numpy + paddle only; it never imports ``kit``) because it runs inside
framework containers. This is ``models_torch.py`` written for Paddle, layer for layer and with the same
initialisation scheme (``paddle.vision.models`` is deliberately not used, so the two files mirror each other):

    resnet50  25,557,032   (1000 classes; torchvision's resnet50)
    vgg16    138,357,544   (1000 classes; torchvision's vgg16, configuration D, no BN)
    arcface   trunk + BN + dropout + FC 2048->512 + BN, plus a 512 x classes margin head (no bias)

Every model is called as ``loss = net(images, labels)``: images float32 ``[B, 3, H, W]`` -- or ``[B, H, W, 3]``
when built with ``data_format="NHWC"`` (passed to every Conv2D / BatchNorm2D / pooling layer) -- and labels int64
``[B]``; the result is the scalar mean softmax cross-entropy.

Paddle differences from torch worth knowing: Linear weights are [in, out] (torch: [out, in]), so the ArcFace
weight is [embedding, classes] here; BatchNorm's running mean/variance are listed by ``parameters()`` (with
``stop_gradient=True``), which ``count_params`` leaves out; Paddle's BN momentum 0.9 is torch's 0.1.

``python scripts/harness/models_paddle.py`` prints the three trainable-parameter counts.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
import paddle
import paddle.nn.functional as F
from paddle import nn
from paddle.nn import initializer

MODELS = ("resnet50", "vgg16", "arcface", "se_resnext50", "deeplabv3p", "bert", "transformer", "cyclegan")
DATA_FORMATS = ("NCHW", "NHWC")

RESNET50_BLOCKS = (3, 4, 6, 3)  # bottlenecks per stage
RESNET50_WIDTHS = (64, 128, 256, 512)  # bottleneck width per stage; output channels = width * 4
BOTTLENECK_EXPANSION = 4
RESNET50_FEATURES = 512 * BOTTLENECK_EXPANSION  # 2048
VGG16_CONFIG = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")
VGG16_POOL = 7
VGG16_HIDDEN = 4096
ARCFACE_SCALE = 64.0  # s
ARCFACE_MARGIN = 0.5  # m (additive angular margin, radians)
ARCFACE_DROPOUT = 0.4
ARCFACE_WEIGHT_STD = 0.01


def _attr(init: initializer.Initializer) -> paddle.ParamAttr:
    return paddle.ParamAttr(initializer=init)


# ---------------------------------------------------------------- layers with the shared initialisation scheme
def _conv(in_ch: int, out_ch: int, kernel: int, data_format: str, stride: int = 1, padding: int = 0,
          bias: bool = False) -> nn.Conv2D:
    """Conv with Kaiming-normal weights (fan_out, ReLU gain, as torchvision) and zero bias."""
    std = math.sqrt(2.0 / (out_ch * kernel * kernel))
    return nn.Conv2D(in_ch, out_ch, kernel, stride=stride, padding=padding, data_format=data_format,
                     weight_attr=_attr(initializer.Normal(0.0, std)),
                     bias_attr=_attr(initializer.Constant(0.0)) if bias else False)


def _bn2d(channels: int, data_format: str) -> nn.BatchNorm2D:
    # epsilon 1e-5, momentum 0.9 (= torch's 0.1)
    return nn.BatchNorm2D(channels, data_format=data_format, weight_attr=_attr(initializer.Constant(1.0)),
                          bias_attr=_attr(initializer.Constant(0.0)))


def _bn1d(features: int) -> nn.BatchNorm1D:
    return nn.BatchNorm1D(features, weight_attr=_attr(initializer.Constant(1.0)),
                          bias_attr=_attr(initializer.Constant(0.0)))


def _linear(in_features: int, out_features: int, std: float | None = None) -> nn.Linear:
    """Linear layer. ``std=None``: PyTorch's default, U(+-1/sqrt(in)) for weight and bias (Paddle's own default
    is Xavier weight, zero bias); otherwise N(0, std) weight and zero bias (torchvision's VGG classifier)."""
    if std is None:
        bound = 1.0 / math.sqrt(in_features)
        weight, bias = initializer.Uniform(-bound, bound), initializer.Uniform(-bound, bound)
    else:
        weight, bias = initializer.Normal(0.0, std), initializer.Constant(0.0)
    return nn.Linear(in_features, out_features, weight_attr=_attr(weight), bias_attr=_attr(bias))


# ---------------------------------------------------------------- ResNet50 v1.5
class Bottleneck(nn.Layer):
    """1x1 -> 3x3 (carries the stride: v1.5) -> 1x1 (x4), BN after each conv, projection shortcut when needed."""

    def __init__(self, in_ch: int, width: int, data_format: str, stride: int = 1) -> None:
        super().__init__()
        out_ch = width * BOTTLENECK_EXPANSION
        self.conv1 = _conv(in_ch, width, 1, data_format)
        self.bn1 = _bn2d(width, data_format)
        self.conv2 = _conv(width, width, 3, data_format, stride=stride, padding=1)
        self.bn2 = _bn2d(width, data_format)
        self.conv3 = _conv(width, out_ch, 1, data_format)
        self.bn3 = _bn2d(out_ch, data_format)
        self.relu = nn.ReLU()
        self.downsample = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(_conv(in_ch, out_ch, 1, data_format, stride=stride),
                                            _bn2d(out_ch, data_format))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50Trunk(nn.Layer):
    """Stem (7x7/2 conv, BN, ReLU, 3x3/2 max-pool) and the four stages; returns the 2048-channel feature map."""

    def __init__(self, data_format: str) -> None:
        super().__init__()
        self.conv1 = _conv(3, 64, 7, data_format, stride=2, padding=3)
        self.bn1 = _bn2d(64, data_format)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2D(kernel_size=3, stride=2, padding=1, data_format=data_format)
        in_ch = 64
        stages = []
        for index, (blocks, width) in enumerate(zip(RESNET50_BLOCKS, RESNET50_WIDTHS, strict=True)):
            stride = 1 if index == 0 else 2
            layers = []
            for block in range(blocks):
                layers.append(Bottleneck(in_ch, width, data_format, stride=stride if block == 0 else 1))
                in_ch = width * BOTTLENECK_EXPANSION
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))


def _check_images(images: paddle.Tensor, data_format: str) -> None:
    shape = list(images.shape)
    if len(shape) != 4 or shape[1 if data_format == "NCHW" else 3] != 3:
        layout = "[B, 3, H, W]" if data_format == "NCHW" else "[B, H, W, 3]"
        raise ValueError(f"images must be {data_format} {layout}, got {shape}")


class ResNet50(nn.Layer):
    def __init__(self, num_classes: int, data_format: str) -> None:
        super().__init__()
        self.data_format = data_format
        self.trunk = ResNet50Trunk(data_format)
        self.avgpool = nn.AdaptiveAvgPool2D(1, data_format=data_format)
        self.fc = _linear(RESNET50_FEATURES, num_classes)

    def forward(self, images: paddle.Tensor, labels: paddle.Tensor) -> paddle.Tensor:
        _check_images(images, self.data_format)
        features = paddle.flatten(self.avgpool(self.trunk(images)), 1)  # 1x1 spatial: same in either layout
        return F.cross_entropy(self.fc(features), labels)


# ---------------------------------------------------------------- VGG16
class VGG16(nn.Layer):
    def __init__(self, num_classes: int, data_format: str) -> None:
        super().__init__()
        self.data_format = data_format
        layers: list[nn.Layer] = []
        in_ch = 3
        for item in VGG16_CONFIG:
            if item == "M":
                layers.append(nn.MaxPool2D(kernel_size=2, stride=2, data_format=data_format))
            else:
                layers += [_conv(in_ch, item, 3, data_format, padding=1, bias=True), nn.ReLU()]
                in_ch = item
        self.features = nn.Sequential(*layers)
        # also up-samples small inputs (32x32 -> 1x1 -> 7x7)
        self.avgpool = nn.AdaptiveAvgPool2D(VGG16_POOL, data_format=data_format)
        self.classifier = nn.Sequential(
            _linear(512 * VGG16_POOL * VGG16_POOL, VGG16_HIDDEN, std=0.01),
            nn.ReLU(),
            nn.Dropout(0.5),
            _linear(VGG16_HIDDEN, VGG16_HIDDEN, std=0.01),
            nn.ReLU(),
            nn.Dropout(0.5),
            _linear(VGG16_HIDDEN, num_classes, std=0.01),
        )

    def forward(self, images: paddle.Tensor, labels: paddle.Tensor) -> paddle.Tensor:
        _check_images(images, self.data_format)
        pooled = self.avgpool(self.features(images))
        if self.data_format == "NHWC":
            pooled = paddle.transpose(pooled, [0, 3, 1, 2])  # flatten in C, H, W order, as torch does
        return F.cross_entropy(self.classifier(paddle.flatten(pooled, 1)), labels)


# ---------------------------------------------------------------- ArcFace
class ArcMarginHead(nn.Layer):
    """ArcFace logits: s * cos(theta + m) for the target class, s * cos(theta) for the others (insightface's
    fallback cos - sin(pi - m) * m where theta + m would pass pi). Weight [embedding, classes], no bias."""

    def __init__(self, embedding_size: int, num_classes: int, scale: float = ARCFACE_SCALE,
                 margin: float = ARCFACE_MARGIN) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.scale = scale
        self.cos_m = math.cos(margin)
        self.sin_m = math.sin(margin)
        self.threshold = math.cos(math.pi - margin)
        self.fallback = math.sin(math.pi - margin) * margin
        self.weight = self.create_parameter(shape=[embedding_size, num_classes], dtype="float32",
                                            attr=_attr(initializer.Normal(0.0, ARCFACE_WEIGHT_STD)))

    def forward(self, embedding: paddle.Tensor, labels: paddle.Tensor) -> paddle.Tensor:
        # The margin arithmetic runs in FP32 even under auto_cast (as PLSC does).
        with paddle.amp.auto_cast(enable=False):
            embedding = F.normalize(embedding.astype("float32"), axis=1)
            weight = F.normalize(self.weight.astype("float32"), axis=0)
            cos = paddle.matmul(embedding, weight)
            sin = paddle.sqrt(paddle.clip(1.0 - cos * cos, 0.0, 1.0))
            phi = cos * self.cos_m - sin * self.sin_m  # cos(theta + m)
            phi = paddle.where(cos > self.threshold, phi, cos - self.fallback)
            one_hot = F.one_hot(labels, self.num_classes).astype(cos.dtype)
            return self.scale * (one_hot * phi + (1.0 - one_hot) * cos)


class ArcFace(nn.Layer):
    def __init__(self, num_classes: int, embedding_size: int, data_format: str) -> None:
        super().__init__()
        self.data_format = data_format
        self.trunk = ResNet50Trunk(data_format)
        self.avgpool = nn.AdaptiveAvgPool2D(1, data_format=data_format)
        self.bn_features = _bn1d(RESNET50_FEATURES)
        self.dropout = nn.Dropout(ARCFACE_DROPOUT)
        self.fc_embedding = _linear(RESNET50_FEATURES, embedding_size)
        self.bn_embedding = _bn1d(embedding_size)
        self.head = ArcMarginHead(embedding_size, num_classes)

    def embed(self, images: paddle.Tensor) -> paddle.Tensor:
        _check_images(images, self.data_format)
        features = paddle.flatten(self.avgpool(self.trunk(images)), 1)
        return self.bn_embedding(self.fc_embedding(self.dropout(self.bn_features(features))))

    def forward(self, images: paddle.Tensor, labels: paddle.Tensor) -> paddle.Tensor:
        logits = self.head(self.embed(images), labels)
        return F.cross_entropy(logits, labels)


# ---------------------------------------------------------------- public interface
def build_model(name: str, num_classes: int = 1000, data_format: str = "NCHW", embedding_size: int = 512,
                size: str = "full", **overrides) -> nn.Layer:
    """Build one of MODELS; images are [B, 3, H, W] for NCHW and [B, H, W, 3] for NHWC.
    Seed 003's models take ``size`` ("full" or "tiny") and configuration overrides, as in models_torch."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    if name in SEED003_MODELS:  # num_classes None: the model's own (only se_resnext50 and deeplabv3p have classes)
        if num_classes is not None and (isinstance(num_classes, bool) or not isinstance(num_classes, int)
                                        or num_classes < 1):
            raise ValueError(f"{name}: num_classes must be an integer >= 1, got {num_classes!r}")
        if data_format != "NCHW":
            raise ValueError(f"{name}: data_format must be NCHW (seed 003's models are built NCHW only)")
        return build_seed003(name, size, num_classes, **overrides)
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"{name}: num_classes must be an integer >= 1, got {num_classes!r}")
    if isinstance(embedding_size, bool) or not isinstance(embedding_size, int) or embedding_size < 1:
        raise ValueError(f"{name}: embedding_size must be an integer >= 1, got {embedding_size!r}")
    if data_format not in DATA_FORMATS:
        raise ValueError(f"{name}: data_format must be one of {', '.join(DATA_FORMATS)}, got {data_format!r}")
    if name == "resnet50":
        return ResNet50(num_classes, data_format)
    if name == "vgg16":
        return VGG16(num_classes, data_format)
    return ArcFace(num_classes, embedding_size, data_format)


def count_params(net: nn.Layer) -> int:
    """Trainable parameters only: BatchNorm's running mean/variance are in ``parameters()`` with
    ``stop_gradient=True`` and are not counted."""
    return sum(int(np.prod(p.shape)) for p in net.parameters() if not p.stop_gradient)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print the trainable-parameter count of each harness model (paddle).")
    parser.add_argument("--num-classes", type=int, default=1000)
    parser.add_argument("--embedding-size", type=int, default=512)
    args = parser.parse_args(argv)
    for name in MODELS:
        if name == "deeplabv3p":
            kwargs = {"num_classes": DEEPLAB_CLASSES}
        elif name in SEED003_MODELS and name != "se_resnext50":
            kwargs = {}  # their own vocabulary
        else:
            kwargs = {"num_classes": args.num_classes, "embedding_size": args.embedding_size}
        # LazyGuard: the layers are built (shapes, counts) without initialising their storage.
        with paddle.LazyGuard():
            net = build_model(name, **kwargs)
        print(f"paddle {name} {count_params(net)}")
    return 0



# ================================================================ seed 003's five models
# The same networks as models_torch.py's second half, layer for layer (see there for the configurations).
SEED003_MODELS = ("se_resnext50", "deeplabv3p", "bert", "transformer", "cyclegan")
SIZES = ("full", "tiny")
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
DEEPLAB_CLASSES = 19  # Cityscapes
IGNORE_INDEX = 255  # Cityscapes' "void" label
BERT_LN_EPS = 1e-12
TRANSFORMER_LN_EPS = 1e-6
INIT_STD = 0.02


def seed003_config(name: str, size: str = "full", **overrides) -> dict:
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


def _normal_linear(in_features: int, out_features: int, bias: bool = True, std: float = INIT_STD) -> nn.Linear:
    return nn.Linear(in_features, out_features, weight_attr=_attr(initializer.Normal(0.0, std)),
                     bias_attr=_attr(initializer.Constant(0.0)) if bias else False)


def _xavier_linear(in_features: int, out_features: int, bias: bool = True) -> nn.Linear:
    return nn.Linear(in_features, out_features, weight_attr=_attr(initializer.XavierUniform()),
                     bias_attr=_attr(initializer.Constant(0.0)) if bias else False)


def _layer_norm(features: int, eps: float) -> nn.LayerNorm:
    return nn.LayerNorm(features, epsilon=eps, weight_attr=_attr(initializer.Constant(1.0)),
                        bias_attr=_attr(initializer.Constant(0.0)))


def _conv_d(in_ch: int, out_ch: int, kernel: int, stride: int = 1, dilation: int = 1, groups: int = 1,
            bias: bool = False) -> nn.Conv2D:
    """'Same' padding conv with Kaiming-normal (fan_out) weights; dilation and groups as given."""
    std = math.sqrt(2.0 / (out_ch * kernel * kernel))
    return nn.Conv2D(in_ch, out_ch, kernel, stride=stride, padding=dilation * (kernel - 1) // 2, dilation=dilation,
                     groups=groups, weight_attr=_attr(initializer.Normal(0.0, std)),
                     bias_attr=_attr(initializer.Constant(0.0)) if bias else False)


def _bn(channels: int) -> nn.BatchNorm2D:
    return _bn2d(channels, "NCHW")


def _check_nchw(images: paddle.Tensor) -> None:
    _check_images(images, "NCHW")


# ---------------------------------------------------------------- SE-ResNeXt50 (32x4d)
class SEModule(nn.Layer):
    def __init__(self, channels: int, reduction: int) -> None:
        super().__init__()
        self.fc1 = _linear(channels, channels // reduction)
        self.fc2 = _linear(channels // reduction, channels)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        s = x.mean(axis=[2, 3])
        s = F.sigmoid(self.fc2(F.relu(self.fc1(s))))
        return x * s.unsqueeze([2, 3])


class SEResNeXtBottleneck(nn.Layer):
    def __init__(self, in_ch: int, planes: int, cardinality: int, base_width: int, reduction: int,
                 stride: int = 1) -> None:
        super().__init__()
        width = (planes * base_width // 64) * cardinality
        out_ch = planes * BOTTLENECK_EXPANSION
        self.conv1 = _conv_d(in_ch, width, 1)
        self.bn1 = _bn(width)
        self.conv2 = _conv_d(width, width, 3, stride=stride, groups=cardinality)
        self.bn2 = _bn(width)
        self.conv3 = _conv_d(width, out_ch, 1)
        self.bn3 = _bn(out_ch)
        self.se = SEModule(out_ch, reduction)
        self.downsample = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(_conv_d(in_ch, out_ch, 1, stride=stride), _bn(out_ch))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.se(self.bn3(self.conv3(out)))
        return F.relu(out + identity)


class SEResNeXt50(nn.Layer):
    def __init__(self, num_classes: int, cfg: dict) -> None:
        super().__init__()
        self.conv1 = _conv_d(3, cfg["stem"], 7, stride=2)
        self.bn1 = _bn(cfg["stem"])
        self.maxpool = nn.MaxPool2D(kernel_size=3, stride=2, padding=1)
        in_ch, stages = cfg["stem"], []
        for index, (blocks, planes) in enumerate(zip(cfg["blocks"], cfg["planes"], strict=True)):
            layers = []
            for block in range(blocks):
                stride = 2 if index > 0 and block == 0 else 1
                layers.append(SEResNeXtBottleneck(in_ch, planes, cfg["cardinality"], cfg["base_width"],
                                                  cfg["reduction"], stride))
                in_ch = planes * BOTTLENECK_EXPANSION
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.fc = _linear(in_ch, num_classes)

    def forward(self, images: paddle.Tensor, labels: paddle.Tensor) -> paddle.Tensor:
        _check_nchw(images)
        x = self.maxpool(F.relu(self.bn1(self.conv1(images))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return F.cross_entropy(self.fc(x.mean(axis=[2, 3])), labels)


# ---------------------------------------------------------------- DeepLabV3+ (ResNet50 backbone, output stride 16)
class DilatedBottleneck(nn.Layer):
    def __init__(self, in_ch: int, planes: int, stride: int = 1, dilation: int = 1) -> None:
        super().__init__()
        out_ch = planes * BOTTLENECK_EXPANSION
        self.conv1 = _conv_d(in_ch, planes, 1)
        self.bn1 = _bn(planes)
        self.conv2 = _conv_d(planes, planes, 3, stride=stride, dilation=dilation)
        self.bn2 = _bn(planes)
        self.conv3 = _conv_d(planes, out_ch, 1)
        self.bn3 = _bn(out_ch)
        self.downsample = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(_conv_d(in_ch, out_ch, 1, stride=stride), _bn(out_ch))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + identity)


def _conv_bn_relu(in_ch: int, out_ch: int, kernel: int, dilation: int = 1) -> nn.Sequential:
    return nn.Sequential(_conv_d(in_ch, out_ch, kernel, dilation=dilation), _bn(out_ch), nn.ReLU())


def _resize(x: paddle.Tensor, size) -> paddle.Tensor:
    return F.interpolate(x, size=[int(size[0]), int(size[1])], mode="bilinear", align_corners=False)


class DeepLabV3Plus(nn.Layer):
    OUTPUT_STRIDE = 16

    def __init__(self, num_classes: int, cfg: dict) -> None:
        super().__init__()
        self.conv1 = _conv_d(3, cfg["stem"], 7, stride=2)
        self.bn1 = _bn(cfg["stem"])
        self.maxpool = nn.MaxPool2D(kernel_size=3, stride=2, padding=1)
        in_ch, stages = cfg["stem"], []
        for index, (blocks, planes) in enumerate(zip(cfg["blocks"], cfg["planes"], strict=True)):
            layers = []
            for block in range(blocks):
                stride = 2 if index in (1, 2) and block == 0 else 1
                dilation = 2 if index == 3 and block > 0 else 1
                layers.append(DilatedBottleneck(in_ch, planes, stride, dilation))
                in_ch = planes * BOTTLENECK_EXPANSION
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        low_ch, aspp = cfg["planes"][0] * BOTTLENECK_EXPANSION, cfg["aspp"]
        self.aspp = nn.LayerList([_conv_bn_relu(in_ch, aspp, 1)] +
                                 [_conv_bn_relu(in_ch, aspp, 3, dilation=r) for r in cfg["rates"]])
        self.aspp_pool = _conv_bn_relu(in_ch, aspp, 1)
        self.aspp_project = _conv_bn_relu(aspp * (len(cfg["rates"]) + 2), aspp, 1)
        self.low_level = _conv_bn_relu(low_ch, cfg["low_level"], 1)
        self.decoder = nn.Sequential(_conv_bn_relu(aspp + cfg["low_level"], cfg["decoder"], 3),
                                     _conv_bn_relu(cfg["decoder"], cfg["decoder"], 3))
        self.classifier = _conv_d(cfg["decoder"], num_classes, 1, bias=True)

    def logits(self, images: paddle.Tensor) -> paddle.Tensor:
        _check_nchw(images)
        x = self.maxpool(F.relu(self.bn1(self.conv1(images))))
        low = self.layer1(x)
        x = self.layer4(self.layer3(self.layer2(low)))
        pooled = self.aspp_pool(x.mean(axis=[2, 3], keepdim=True))
        branches = [branch(x) for branch in self.aspp]
        branches.append(_resize(pooled, x.shape[2:]))
        x = self.aspp_project(paddle.concat(branches, axis=1))
        x = _resize(x, low.shape[2:])
        x = self.decoder(paddle.concat([x, self.low_level(low)], axis=1))
        return _resize(self.classifier(x), images.shape[2:])

    def forward(self, images: paddle.Tensor, labels: paddle.Tensor) -> paddle.Tensor:
        return F.cross_entropy(self.logits(images), labels, ignore_index=IGNORE_INDEX, axis=1)


# ---------------------------------------------------------------- attention blocks shared by BERT and Transformer
class MultiHeadAttention(nn.Layer):
    def __init__(self, d_model: int, heads: int, dropout: float, init) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not a multiple of heads {heads}")
        self.heads, self.d_head = heads, d_model // heads
        self.q, self.k, self.v, self.out = (init(d_model, d_model) for _ in range(4))
        self.dropout = nn.Dropout(dropout)

    def forward(self, query: paddle.Tensor, memory: paddle.Tensor, bias: paddle.Tensor | None) -> paddle.Tensor:
        b, lq, lk = query.shape[0], query.shape[1], memory.shape[1]
        q = self.q(query).reshape([b, lq, self.heads, self.d_head]).transpose([0, 2, 1, 3])
        k = self.k(memory).reshape([b, lk, self.heads, self.d_head]).transpose([0, 2, 1, 3])
        v = self.v(memory).reshape([b, lk, self.heads, self.d_head]).transpose([0, 2, 1, 3])
        scores = paddle.matmul(q, k, transpose_y=True) * (self.d_head ** -0.5)
        if bias is not None:
            scores = scores + bias
        weights = self.dropout(F.softmax(scores, axis=-1))
        context = paddle.matmul(weights, v).transpose([0, 2, 1, 3]).reshape([b, lq, self.heads * self.d_head])
        return self.out(context)


class FeedForward(nn.Layer):
    def __init__(self, d_model: int, d_inner: int, dropout: float, init, activation) -> None:
        super().__init__()
        self.fc1, self.fc2 = init(d_model, d_inner), init(d_inner, d_model)
        self.activation = activation
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.fc2(self.dropout(self.activation(self.fc1(x))))


# ---------------------------------------------------------------- BERT-base pre-training (MLM + NSP)
class BertLayer(nn.Layer):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        h, p = cfg["hidden"], cfg["dropout"]
        self.attention = MultiHeadAttention(h, cfg["heads"], p, _normal_linear)
        self.norm1 = _layer_norm(h, BERT_LN_EPS)
        self.ffn = FeedForward(h, cfg["intermediate"], 0.0, _normal_linear, F.gelu)
        self.norm2 = _layer_norm(h, BERT_LN_EPS)
        self.dropout = nn.Dropout(p)

    def forward(self, x: paddle.Tensor, bias: paddle.Tensor) -> paddle.Tensor:
        x = self.norm1(x + self.dropout(self.attention(x, x, bias)))
        return self.norm2(x + self.dropout(self.ffn(x)))


def _embedding(num: int, dim: int, std: float) -> nn.Embedding:
    return nn.Embedding(num, dim, weight_attr=_attr(initializer.Normal(0.0, std)))


class BertPretraining(nn.Layer):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        h = cfg["hidden"]
        self.word_embeddings = _embedding(cfg["vocab"], h, INIT_STD)
        self.position_embeddings = _embedding(cfg["max_position"], h, INIT_STD)
        self.token_type_embeddings = _embedding(cfg["type_vocab"], h, INIT_STD)
        self.embedding_norm = _layer_norm(h, BERT_LN_EPS)
        self.embedding_dropout = nn.Dropout(cfg["dropout"])
        self.layers = nn.LayerList([BertLayer(cfg) for _ in range(cfg["layers"])])
        self.pooler = _normal_linear(h, h)
        self.mlm_transform = _normal_linear(h, h)
        self.mlm_norm = _layer_norm(h, BERT_LN_EPS)
        self.mlm_bias = self.create_parameter(shape=[cfg["vocab"]], dtype="float32", is_bias=True,
                                              attr=_attr(initializer.Constant(0.0)))
        self.nsp = _normal_linear(h, 2)

    def forward(self, input_ids, token_type_ids, input_mask, masked_positions, masked_labels, nsp_labels):
        b, length = input_ids.shape
        positions = paddle.arange(length, dtype="int64")
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions).unsqueeze(0)
             + self.token_type_embeddings(token_type_ids))
        x = self.embedding_dropout(self.embedding_norm(x))
        bias = ((1.0 - input_mask) * -10000.0).unsqueeze([1, 2])
        for layer in self.layers:
            x = layer(x, bias)
        pooled = paddle.tanh(self.pooler(x[:, 0]))
        nsp_loss = F.cross_entropy(self.nsp(pooled), nsp_labels)
        masked = paddle.index_select(x.reshape([b * length, -1]), masked_positions, axis=0)
        masked = self.mlm_norm(F.gelu(self.mlm_transform(masked)))
        mlm_logits = paddle.matmul(masked, self.word_embeddings.weight, transpose_y=True) + self.mlm_bias
        return F.cross_entropy(mlm_logits, masked_labels) + nsp_loss


# ---------------------------------------------------------------- Transformer base (pre-LN, as Paddle's)
def sinusoid_table(length: int, d_model: int) -> np.ndarray:
    position = np.arange(length, dtype=np.float64)[:, None]
    div = np.power(10000.0, np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    table = np.zeros((length, d_model), dtype=np.float64)
    table[:, 0::2] = np.sin(position / div)
    table[:, 1::2] = np.cos(position / div)
    return table.astype(np.float32)


class TransformerLayer(nn.Layer):
    def __init__(self, cfg: dict, cross: bool) -> None:
        super().__init__()
        d, p = cfg["d_model"], cfg["dropout"]
        self.self_attention = MultiHeadAttention(d, cfg["heads"], p, _xavier_linear)
        self.norm1 = _layer_norm(d, TRANSFORMER_LN_EPS)
        self.cross_attention = MultiHeadAttention(d, cfg["heads"], p, _xavier_linear) if cross else None
        self.norm_cross = _layer_norm(d, TRANSFORMER_LN_EPS) if cross else None
        self.ffn = FeedForward(d, cfg["d_inner"], p, _xavier_linear, F.relu)
        self.norm2 = _layer_norm(d, TRANSFORMER_LN_EPS)
        self.dropout = nn.Dropout(p)

    def forward(self, x, self_bias, memory=None, memory_bias=None):
        y = self.norm1(x)
        x = x + self.dropout(self.self_attention(y, y, self_bias))
        if self.cross_attention is not None:
            x = x + self.dropout(self.cross_attention(self.norm_cross(x), memory, memory_bias))
        return x + self.dropout(self.ffn(self.norm2(x)))


class Transformer(nn.Layer):
    PAD = 0

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        d = cfg["d_model"]
        self.d_model, self.smoothing = d, cfg["label_smoothing"]
        self.embedding = _embedding(cfg["vocab"], d, d ** -0.5)
        self.positions = paddle.to_tensor(sinusoid_table(cfg["max_length"], d))
        self.positions.stop_gradient = True
        self.dropout = nn.Dropout(cfg["dropout"])
        self.encoder = nn.LayerList([TransformerLayer(cfg, cross=False) for _ in range(cfg["layers"])])
        self.encoder_norm = _layer_norm(d, TRANSFORMER_LN_EPS)
        self.decoder = nn.LayerList([TransformerLayer(cfg, cross=True) for _ in range(cfg["layers"])])
        self.decoder_norm = _layer_norm(d, TRANSFORMER_LN_EPS)

    def embed(self, ids: paddle.Tensor) -> paddle.Tensor:
        x = self.embedding(ids) * (self.d_model ** 0.5) + self.positions[: ids.shape[1]].unsqueeze(0)
        return self.dropout(x)

    def forward(self, src_ids, trg_ids, trg_labels):
        src_bias = ((src_ids == self.PAD).astype("float32") * -1e9).unsqueeze([1, 2])
        length = trg_ids.shape[1]
        causal = paddle.triu(paddle.full([length, length], -1e9, dtype="float32"), diagonal=1).unsqueeze([0, 1])
        x = self.embed(src_ids)
        for layer in self.encoder:
            x = layer(x, src_bias)
        memory = self.encoder_norm(x)
        y = self.embed(trg_ids)
        for layer in self.decoder:
            y = layer(y, causal, memory, src_bias)
        vocab = self.embedding.weight.shape[0]
        logits = paddle.matmul(self.decoder_norm(y), self.embedding.weight, transpose_y=True).reshape([-1, vocab])
        labels = trg_labels.reshape([-1])
        # as models_torch: cross_entropy + logsumexp (Paddle's CPU log_softmax takes minutes at 37k classes)
        nll = F.cross_entropy(logits, labels, reduction="none").reshape([-1])
        smooth = paddle.logsumexp(logits, axis=-1) - logits.mean(axis=-1)
        loss = (1.0 - self.smoothing) * nll + self.smoothing * smooth
        weights = (labels != self.PAD).astype("float32")
        return (loss * weights).sum() / weights.sum()


# ---------------------------------------------------------------- CycleGAN
def _gan_conv(in_ch: int, out_ch: int, kernel: int, stride: int = 1, padding: int = 0) -> nn.Conv2D:
    return nn.Conv2D(in_ch, out_ch, kernel, stride=stride, padding=padding,
                     weight_attr=_attr(initializer.Normal(0.0, INIT_STD)), bias_attr=_attr(initializer.Constant(0.0)))


def _gan_deconv(in_ch: int, out_ch: int) -> nn.Conv2DTranspose:
    return nn.Conv2DTranspose(in_ch, out_ch, 3, stride=2, padding=1, output_padding=1,
                              weight_attr=_attr(initializer.Normal(0.0, INIT_STD)),
                              bias_attr=_attr(initializer.Constant(0.0)))


def _instance_norm(channels: int) -> nn.InstanceNorm2D:
    return nn.InstanceNorm2D(channels, weight_attr=False, bias_attr=False)  # torch's affine=False


def _reflect(pad: int) -> nn.Pad2D:
    return nn.Pad2D(padding=pad, mode="reflect")


class ResnetBlock(nn.Layer):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.block = nn.Sequential(
            _reflect(1), _gan_conv(channels, channels, 3), _instance_norm(channels), nn.ReLU(),
            _reflect(1), _gan_conv(channels, channels, 3), _instance_norm(channels))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return x + self.block(x)


class ResnetGenerator(nn.Layer):
    def __init__(self, ngf: int, res_blocks: int) -> None:
        super().__init__()
        layers = [_reflect(3), _gan_conv(3, ngf, 7), _instance_norm(ngf), nn.ReLU()]
        for mult in (1, 2):
            layers += [_gan_conv(ngf * mult, ngf * mult * 2, 3, stride=2, padding=1),
                       _instance_norm(ngf * mult * 2), nn.ReLU()]
        layers += [ResnetBlock(ngf * 4) for _ in range(res_blocks)]
        for mult in (4, 2):
            layers += [_gan_deconv(ngf * mult, ngf * mult // 2), _instance_norm(ngf * mult // 2), nn.ReLU()]
        layers += [_reflect(3), _gan_conv(ngf, 3, 7), nn.Tanh()]
        self.model = nn.Sequential(*layers)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.model(x)


class PatchDiscriminator(nn.Layer):
    def __init__(self, ndf: int, n_layers: int) -> None:
        super().__init__()
        layers = [_gan_conv(3, ndf, 4, stride=2, padding=1), nn.LeakyReLU(0.2)]
        mult = 1
        for n in range(1, n_layers + 1):
            prev, mult = mult, min(2 ** n, 8)
            layers += [_gan_conv(ndf * prev, ndf * mult, 4, stride=2 if n < n_layers else 1, padding=1),
                       _instance_norm(ndf * mult), nn.LeakyReLU(0.2)]
        layers.append(_gan_conv(ndf * mult, 1, 4, stride=1, padding=1))
        self.model = nn.Sequential(*layers)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.model(x)


class CycleGAN(nn.Layer):
    def __init__(self, cfg: dict) -> None:
        super().__init__()
        self.lambda_cycle, self.lambda_identity = cfg["lambda_cycle"], cfg["lambda_identity"]
        self.g_a = ResnetGenerator(cfg["ngf"], cfg["res_blocks"])
        self.g_b = ResnetGenerator(cfg["ngf"], cfg["res_blocks"])
        self.d_a = PatchDiscriminator(cfg["ndf"], cfg["d_layers"])
        self.d_b = PatchDiscriminator(cfg["ndf"], cfg["d_layers"])

    def generator_parameters(self):
        return [*self.g_a.parameters(), *self.g_b.parameters()]

    def discriminator_parameters(self):
        return [*self.d_a.parameters(), *self.d_b.parameters()]

    @staticmethod
    def _gan(prediction: paddle.Tensor, target: float) -> paddle.Tensor:
        return ((prediction - target) ** 2).mean()

    def forward(self, real_a: paddle.Tensor, real_b: paddle.Tensor):
        fake_b, fake_a = self.g_a(real_a), self.g_b(real_b)
        cycle = (self.g_b(fake_b) - real_a).abs().mean() + (self.g_a(fake_a) - real_b).abs().mean()
        identity = (self.g_a(real_b) - real_b).abs().mean() + (self.g_b(real_a) - real_a).abs().mean()
        loss = (self._gan(self.d_a(fake_b), 1.0) + self._gan(self.d_b(fake_a), 1.0)
                + self.lambda_cycle * cycle + self.lambda_cycle * self.lambda_identity * identity)
        return loss, fake_a, fake_b

    def discriminator_loss(self, real_a, real_b, fake_a, fake_b) -> paddle.Tensor:
        loss_a = (self._gan(self.d_a(real_b), 1.0) + self._gan(self.d_a(fake_b), 0.0)) * 0.5
        loss_b = (self._gan(self.d_b(real_a), 1.0) + self._gan(self.d_b(fake_a), 0.0)) * 0.5
        return loss_a + loss_b


def build_seed003(name: str, size: str = "full", num_classes: int | None = None, **overrides) -> nn.Layer:
    cfg = seed003_config(name, size, **overrides)
    if name == "se_resnext50":
        return SEResNeXt50(num_classes or 1000, cfg)
    if name == "deeplabv3p":
        return DeepLabV3Plus(num_classes or DEEPLAB_CLASSES, cfg)
    if name == "bert":
        return BertPretraining(cfg)
    if name == "transformer":
        return Transformer(cfg)
    return CycleGAN(cfg)


# ---------------------------------------------------------------- the publishers' optimizers and one training step
OPTIMIZER_SETTINGS = {
    "se_resnext50": {"optimizer": "momentum", "lr": None, "momentum": 0.9, "weight_decay": 1e-4},
    "deeplabv3p": {"optimizer": "momentum", "lr": 0.01, "momentum": 0.9, "weight_decay": 4e-5},
    "bert": {"optimizer": "adamw", "lr": 1e-4, "betas": (0.9, 0.999), "eps": 1e-6, "weight_decay": 0.01,
             "clip_norm": 1.0},
    "transformer": {"optimizer": "adam", "lr": 2.0 * 512 ** -0.5 * 4000 ** -0.5, "betas": (0.9, 0.997),
                    "eps": 1e-9},
    "cyclegan": {"optimizer": "adam", "lr": 2e-4, "betas": (0.5, 0.999), "eps": 1e-8},
}


def _no_decay(param_name: str) -> bool:
    return param_name.endswith("bias") or "norm" in param_name


class Trainer:
    """models_torch.Trainer for Paddle: the same optimizers, settings and step."""

    def __init__(self, name: str, model: nn.Layer, net: nn.Layer | None = None, lr: float | None = None,
                 batch_size: int = 1, scaler=None, autocast=None) -> None:
        self.name, self.model, self.net = name, model, net if net is not None else model
        self.scaler, self.autocast = scaler, autocast
        s = dict(OPTIMIZER_SETTINGS[name])
        if lr is not None:
            s["lr"] = lr
        if s["lr"] is None:
            s["lr"] = 0.1 * batch_size / 256
        self.settings = s
        if name == "cyclegan":
            self.opt_g = self._adam(model.generator_parameters(), s)
            self.opt_d = self._adam(model.discriminator_parameters(), s)
        elif s["optimizer"] == "momentum":
            self.opt = paddle.optimizer.Momentum(learning_rate=s["lr"], momentum=s["momentum"],
                                                 parameters=model.parameters(),
                                                 weight_decay=paddle.regularizer.L2Decay(s["weight_decay"]))
        elif s["optimizer"] == "adamw":
            decay = {p.name for n, p in model.named_parameters() if not _no_decay(n)}
            self.opt = paddle.optimizer.AdamW(learning_rate=s["lr"], beta1=s["betas"][0], beta2=s["betas"][1],
                                              epsilon=s["eps"], parameters=model.parameters(),
                                              weight_decay=s["weight_decay"],
                                              apply_decay_param_fun=lambda param: param in decay,
                                              grad_clip=nn.ClipGradByGlobalNorm(s["clip_norm"]))
        else:
            self.opt = self._adam(model.parameters(), s)
        self.last: tuple[float, ...] = ()

    @staticmethod
    def _adam(parameters, s: dict) -> paddle.optimizer.Adam:
        return paddle.optimizer.Adam(learning_rate=s["lr"], beta1=s["betas"][0], beta2=s["betas"][1],
                                     epsilon=s["eps"], parameters=parameters)

    def _forward(self, batch):
        if self.autocast is None:
            return self.net(*batch)
        with self.autocast():
            return self.net(*batch)

    def step(self, *batch) -> float:
        if self.name == "cyclegan":
            return self._cyclegan_step(*batch)
        self.opt.clear_grad()
        loss = self._forward(batch)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            self.opt.step()
        self.last = (float(loss.detach()),)
        return self.last[0]

    def _cyclegan_step(self, real_a, real_b) -> float:
        self.opt_g.clear_grad()
        loss_g, fake_a, fake_b = self.net(real_a, real_b)
        loss_g.backward()
        self.opt_g.step()
        self.opt_d.clear_grad()  # drops what the generator pass left on the discriminators
        loss_d = self.model.discriminator_loss(real_a, real_b, fake_a.detach(), fake_b.detach())
        loss_d.backward()
        self.opt_d.step()
        self.last = (float(loss_g.detach()), float(loss_d.detach()))
        return self.last[0] + self.last[1]


if __name__ == "__main__":
    raise SystemExit(main())
