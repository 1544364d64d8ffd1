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

MODELS = ("resnet50", "vgg16", "arcface")
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
def build_model(name: str, num_classes: int = 1000, data_format: str = "NCHW", embedding_size: int = 512) -> nn.Layer:
    """Build one of MODELS; images are [B, 3, H, W] for NCHW and [B, H, W, 3] for NHWC."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
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
        # LazyGuard: the layers are built (shapes, counts) without initialising their storage.
        with paddle.LazyGuard():
            net = build_model(name, num_classes=args.num_classes, embedding_size=args.embedding_size)
        print(f"paddle {name} {count_params(net)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
