"""The harness's three models in PyTorch: ResNet50 v1.5, VGG16 and ArcFace (ResNet50 trunk + angular margin).

Self-contained on purpose (standard library + torch only; it never imports ``kit``) because it runs inside
framework containers. ``models_paddle.py`` is the same file written for Paddle, layer for layer and with the same
initialisation scheme, so both frameworks train the same networks with the same trainable parameter counts:

    resnet50  25,557,032   (1000 classes; torchvision's resnet50)
    vgg16    138,357,544   (1000 classes; torchvision's vgg16, configuration D, no BN)
    arcface   trunk + BN + dropout + FC 2048->512 + BN, plus a 512 x classes margin head (no bias)

Every model is called as ``loss = net(images, labels)``: images float32 ``[B, 3, H, W]``, labels int64 ``[B]``; the
result is the scalar mean softmax cross-entropy.

Layout: torch tensors are always NCHW-*shaped*. ``data_format="NHWC"`` means channels-last *memory format*: the
model's parameters are converted with ``.to(memory_format=torch.channels_last)`` here, and the caller passes images
as ``images.to(memory_format=torch.channels_last)`` -- still shaped ``[B, 3, H, W]``. (Paddle, by contrast, takes
NHWC-shaped tensors ``[B, H, W, 3]`` when asked for NHWC.)

``python scripts/harness/models_torch.py`` prints the three trainable-parameter counts.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
from torch import nn

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


# ---------------------------------------------------------------- layers with the shared initialisation scheme
def _conv(in_ch: int, out_ch: int, kernel: int, stride: int = 1, padding: int = 0, bias: bool = False) -> nn.Conv2d:
    """Conv with Kaiming-normal weights (fan_out, ReLU gain, as torchvision) and zero bias."""
    conv = nn.Conv2d(in_ch, out_ch, kernel, stride=stride, padding=padding, bias=bias)
    nn.init.normal_(conv.weight, 0.0, math.sqrt(2.0 / (out_ch * kernel * kernel)))
    if bias:
        nn.init.zeros_(conv.bias)
    return conv


def _bn2d(channels: int) -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(channels)  # eps 1e-5, momentum 0.1 (= Paddle's 0.9)
    nn.init.ones_(bn.weight)
    nn.init.zeros_(bn.bias)
    return bn


def _bn1d(features: int) -> nn.BatchNorm1d:
    bn = nn.BatchNorm1d(features)
    nn.init.ones_(bn.weight)
    nn.init.zeros_(bn.bias)
    return bn


def _linear(in_features: int, out_features: int, std: float | None = None) -> nn.Linear:
    """Linear layer. ``std=None``: PyTorch's default, U(+-1/sqrt(in)) for weight and bias, written out so that
    Paddle can use the same; otherwise N(0, std) weight and zero bias (torchvision's VGG classifier)."""
    fc = nn.Linear(in_features, out_features)
    if std is None:
        bound = 1.0 / math.sqrt(in_features)
        nn.init.uniform_(fc.weight, -bound, bound)
        nn.init.uniform_(fc.bias, -bound, bound)
    else:
        nn.init.normal_(fc.weight, 0.0, std)
        nn.init.zeros_(fc.bias)
    return fc


# ---------------------------------------------------------------- ResNet50 v1.5
class Bottleneck(nn.Module):
    """1x1 -> 3x3 (carries the stride: v1.5) -> 1x1 (x4), BN after each conv, projection shortcut when needed."""

    def __init__(self, in_ch: int, width: int, stride: int = 1) -> None:
        super().__init__()
        out_ch = width * BOTTLENECK_EXPANSION
        self.conv1 = _conv(in_ch, width, 1)
        self.bn1 = _bn2d(width)
        self.conv2 = _conv(width, width, 3, stride=stride, padding=1)
        self.bn2 = _bn2d(width)
        self.conv3 = _conv(width, out_ch, 1)
        self.bn3 = _bn2d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(_conv(in_ch, out_ch, 1, stride=stride), _bn2d(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + identity)


class ResNet50Trunk(nn.Module):
    """Stem (7x7/2 conv, BN, ReLU, 3x3/2 max-pool) and the four stages; returns the [B, 2048, h, w] feature map."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = _conv(3, 64, 7, stride=2, padding=3)
        self.bn1 = _bn2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        in_ch = 64
        stages = []
        for index, (blocks, width) in enumerate(zip(RESNET50_BLOCKS, RESNET50_WIDTHS, strict=True)):
            stride = 1 if index == 0 else 2
            layers = []
            for block in range(blocks):
                layers.append(Bottleneck(in_ch, width, stride=stride if block == 0 else 1))
                in_ch = width * BOTTLENECK_EXPANSION
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))


def _check_images(images: torch.Tensor) -> None:
    if images.dim() != 4 or images.shape[1] != 3:
        raise ValueError(
            f"images must be NCHW-shaped [B, 3, H, W], got {list(images.shape)}; for channels-last pass "
            "images.to(memory_format=torch.channels_last), which keeps that shape"
        )


class ResNet50(nn.Module):
    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.trunk = ResNet50Trunk()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = _linear(RESNET50_FEATURES, num_classes)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        _check_images(images)
        features = torch.flatten(self.avgpool(self.trunk(images)), 1)
        return F.cross_entropy(self.fc(features), labels)


# ---------------------------------------------------------------- VGG16
class VGG16(nn.Module):
    def __init__(self, num_classes: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        in_ch = 3
        for item in VGG16_CONFIG:
            if item == "M":
                layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
            else:
                layers += [_conv(in_ch, item, 3, padding=1, bias=True), nn.ReLU(inplace=True)]
                in_ch = item
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(VGG16_POOL)  # also up-samples small inputs (32x32 -> 1x1 -> 7x7)
        self.classifier = nn.Sequential(
            _linear(512 * VGG16_POOL * VGG16_POOL, VGG16_HIDDEN, std=0.01),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            _linear(VGG16_HIDDEN, VGG16_HIDDEN, std=0.01),
            nn.ReLU(inplace=True),
            nn.Dropout(0.5),
            _linear(VGG16_HIDDEN, num_classes, std=0.01),
        )

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        _check_images(images)
        features = torch.flatten(self.avgpool(self.features(images)), 1)  # C, H, W order
        return F.cross_entropy(self.classifier(features), labels)


# ---------------------------------------------------------------- ArcFace
class ArcMarginHead(nn.Module):
    """ArcFace logits: s * cos(theta + m) for the target class, s * cos(theta) for the others (insightface's
    fallback cos - sin(pi - m) * m where theta + m would pass pi). Weight [classes, embedding], no bias."""

    def __init__(self, embedding_size: int, num_classes: int, scale: float = ARCFACE_SCALE,
                 margin: float = ARCFACE_MARGIN) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.scale = scale
        self.cos_m = math.cos(margin)
        self.sin_m = math.sin(margin)
        self.threshold = math.cos(math.pi - margin)
        self.fallback = math.sin(math.pi - margin) * margin
        self.weight = nn.Parameter(torch.empty(num_classes, embedding_size))
        nn.init.normal_(self.weight, 0.0, ARCFACE_WEIGHT_STD)

    def forward(self, embedding: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        # The margin arithmetic runs in FP32 even under autocast (as PLSC does).
        with torch.autocast(device_type=embedding.device.type, enabled=False):
            cos = F.linear(F.normalize(embedding.float(), dim=1), F.normalize(self.weight.float(), dim=1))
            sin = torch.sqrt(torch.clamp(1.0 - cos * cos, 0.0, 1.0))
            phi = cos * self.cos_m - sin * self.sin_m  # cos(theta + m)
            phi = torch.where(cos > self.threshold, phi, cos - self.fallback)
            one_hot = F.one_hot(labels, self.num_classes).to(cos.dtype)
            return self.scale * (one_hot * phi + (1.0 - one_hot) * cos)


class ArcFace(nn.Module):
    def __init__(self, num_classes: int, embedding_size: int) -> None:
        super().__init__()
        self.trunk = ResNet50Trunk()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.bn_features = _bn1d(RESNET50_FEATURES)
        self.dropout = nn.Dropout(ARCFACE_DROPOUT)
        self.fc_embedding = _linear(RESNET50_FEATURES, embedding_size)
        self.bn_embedding = _bn1d(embedding_size)
        self.head = ArcMarginHead(embedding_size, num_classes)

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        _check_images(images)
        features = torch.flatten(self.avgpool(self.trunk(images)), 1)
        return self.bn_embedding(self.fc_embedding(self.dropout(self.bn_features(features))))

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.embed(images), labels)
        return F.cross_entropy(logits, labels)


# ---------------------------------------------------------------- public interface
def build_model(name: str, num_classes: int = 1000, data_format: str = "NCHW", embedding_size: int = 512) -> nn.Module:
    """Build one of MODELS; see the module docstring for what ``data_format="NHWC"`` means in torch."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose from {', '.join(MODELS)}")
    if isinstance(num_classes, bool) or not isinstance(num_classes, int) or num_classes < 1:
        raise ValueError(f"{name}: num_classes must be an integer >= 1, got {num_classes!r}")
    if isinstance(embedding_size, bool) or not isinstance(embedding_size, int) or embedding_size < 1:
        raise ValueError(f"{name}: embedding_size must be an integer >= 1, got {embedding_size!r}")
    if data_format not in DATA_FORMATS:
        raise ValueError(f"{name}: data_format must be one of {', '.join(DATA_FORMATS)}, got {data_format!r}")
    if name == "resnet50":
        net: nn.Module = ResNet50(num_classes)
    elif name == "vgg16":
        net = VGG16(num_classes)
    else:
        net = ArcFace(num_classes, embedding_size)
    if data_format == "NHWC":
        net = net.to(memory_format=torch.channels_last)
    return net


def count_params(net: nn.Module) -> int:
    """Trainable parameters only (BatchNorm running statistics are buffers, not parameters, in torch)."""
    return sum(p.numel() for p in net.parameters() if p.requires_grad)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print the trainable-parameter count of each harness model (torch).")
    parser.add_argument("--num-classes", type=int, default=1000)
    parser.add_argument("--embedding-size", type=int, default=512)
    args = parser.parse_args(argv)
    for name in MODELS:
        # Meta device: the layers are built (shapes, counts) without allocating or initialising their storage.
        with torch.device("meta"):
            net = build_model(name, num_classes=args.num_classes, embedding_size=args.embedding_size)
        print(f"torch {name} {count_params(net)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
