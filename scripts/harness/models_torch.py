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

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

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
def build_model(name: str, num_classes: int = 1000, data_format: str = "NCHW", embedding_size: int = 512,
                size: str = "full", **overrides) -> nn.Module:
    """Build one of MODELS; see the module docstring for what ``data_format="NHWC"`` means in torch.
    Seed 003's models take ``size`` ("full": the published configuration, "tiny": for CPU tests) and configuration
    overrides (e.g. ``dropout=0.0``); ``num_classes`` applies to se_resnext50 and deeplabv3p only."""
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
        if name == "deeplabv3p":
            kwargs = {"num_classes": DEEPLAB_CLASSES}
        elif name in SEED003_MODELS and name != "se_resnext50":
            kwargs = {}  # their own vocabulary
        else:
            kwargs = {"num_classes": args.num_classes, "embedding_size": args.embedding_size}
        # Meta device: the layers are built (shapes, counts) without allocating or initialising their storage.
        with torch.device("meta"):
            net = build_model(name, **kwargs)
        print(f"torch {name} {count_params(net)}")
    return 0



# ================================================================ seed 003's five models
# SE-ResNeXt50 (32x4d), DeepLabV3+ (ResNet50, output stride 16), BERT-base pre-training (MLM + NSP),
# Transformer base (WMT en-de, shared 37k vocabulary), CycleGAN (2 ResNet-9 generators + 2 70x70 PatchGANs).
# Each has a "full" configuration (the published one; counted for parity) and a "tiny" one (same topology,
# fewer/narrower layers) for CPU tests. ``build_trainer`` gives each its publisher's loss and optimizer.
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
    fc = nn.Linear(in_features, out_features, bias=bias)
    nn.init.normal_(fc.weight, 0.0, std)
    if bias:
        nn.init.zeros_(fc.bias)
    return fc


def _xavier_linear(in_features: int, out_features: int, bias: bool = True) -> nn.Linear:
    fc = nn.Linear(in_features, out_features, bias=bias)
    nn.init.xavier_uniform_(fc.weight)
    if bias:
        nn.init.zeros_(fc.bias)
    return fc


def _layer_norm(features: int, eps: float) -> nn.LayerNorm:
    return nn.LayerNorm(features, eps=eps)  # weight 1, bias 0


def _conv_d(in_ch: int, out_ch: int, kernel: int, stride: int = 1, dilation: int = 1, groups: int = 1,
            bias: bool = False) -> nn.Conv2d:
    """'Same' padding conv with Kaiming-normal (fan_out) weights; dilation and groups as given."""
    conv = nn.Conv2d(in_ch, out_ch, kernel, stride=stride, padding=dilation * (kernel - 1) // 2,
                     dilation=dilation, groups=groups, bias=bias)
    nn.init.normal_(conv.weight, 0.0, math.sqrt(2.0 / (out_ch * kernel * kernel)))
    if bias:
        nn.init.zeros_(conv.bias)
    return conv


# ---------------------------------------------------------------- SE-ResNeXt50 (32x4d)
class SEModule(nn.Module):
    """Squeeze-and-excitation: global pool -> FC c->c/r -> ReLU -> FC c/r->c -> sigmoid -> scale."""

    def __init__(self, channels: int, reduction: int) -> None:
        super().__init__()
        self.fc1 = _linear(channels, channels // reduction)
        self.fc2 = _linear(channels // reduction, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = x.mean(dim=(2, 3))
        s = torch.sigmoid(self.fc2(F.relu(self.fc1(s))))
        return x * s[:, :, None, None]


class SEResNeXtBottleneck(nn.Module):
    """1x1 -> grouped 3x3 (cardinality groups, carries the stride) -> 1x1 (planes x 4) -> SE, + shortcut."""

    def __init__(self, in_ch: int, planes: int, cardinality: int, base_width: int, reduction: int,
                 stride: int = 1) -> None:
        super().__init__()
        width = (planes * base_width // 64) * cardinality
        out_ch = planes * BOTTLENECK_EXPANSION
        self.conv1 = _conv_d(in_ch, width, 1)
        self.bn1 = _bn2d(width)
        self.conv2 = _conv_d(width, width, 3, stride=stride, groups=cardinality)
        self.bn2 = _bn2d(width)
        self.conv3 = _conv_d(width, out_ch, 1)
        self.bn3 = _bn2d(out_ch)
        self.se = SEModule(out_ch, reduction)
        self.downsample = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(_conv_d(in_ch, out_ch, 1, stride=stride), _bn2d(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        out = self.se(self.bn3(self.conv3(out)))
        return F.relu(out + identity)


class SEResNeXt50(nn.Module):
    def __init__(self, num_classes: int, cfg: dict) -> None:
        super().__init__()
        self.conv1 = _conv_d(3, cfg["stem"], 7, stride=2)
        self.bn1 = _bn2d(cfg["stem"])
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
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

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        _check_images(images)
        x = self.maxpool(F.relu(self.bn1(self.conv1(images))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return F.cross_entropy(self.fc(x.mean(dim=(2, 3))), labels)


# ---------------------------------------------------------------- DeepLabV3+ (ResNet50 backbone, output stride 16)
class DilatedBottleneck(nn.Module):
    """ResNet v1.5 bottleneck with a dilated 3x3 (DeepLab's backbone)."""

    def __init__(self, in_ch: int, planes: int, stride: int = 1, dilation: int = 1) -> None:
        super().__init__()
        out_ch = planes * BOTTLENECK_EXPANSION
        self.conv1 = _conv_d(in_ch, planes, 1)
        self.bn1 = _bn2d(planes)
        self.conv2 = _conv_d(planes, planes, 3, stride=stride, dilation=dilation)
        self.bn2 = _bn2d(planes)
        self.conv3 = _conv_d(planes, out_ch, 1)
        self.bn3 = _bn2d(out_ch)
        self.downsample = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(_conv_d(in_ch, out_ch, 1, stride=stride), _bn2d(out_ch))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = F.relu(self.bn1(self.conv1(x)))
        out = F.relu(self.bn2(self.conv2(out)))
        return F.relu(self.bn3(self.conv3(out)) + identity)


def _conv_bn_relu(in_ch: int, out_ch: int, kernel: int, dilation: int = 1) -> nn.Sequential:
    return nn.Sequential(_conv_d(in_ch, out_ch, kernel, dilation=dilation), _bn2d(out_ch), nn.ReLU())


class DeepLabV3Plus(nn.Module):
    """ResNet50 backbone with output stride 16 (layer4: stride 1, dilation 2), ASPP (1x1, 3x3 at rates 6/12/18,
    image pooling; 256 channels each, projected 1280->256), decoder: layer1 features 1x1->48, concat with the
    x4-upsampled ASPP output, two 3x3 256 convs, 1x1 classifier, bilinear x4 to the input size (as in Chen et
    al. 2018). Loss: pixel-wise softmax cross-entropy ignoring label 255."""

    OUTPUT_STRIDE = 16

    def __init__(self, num_classes: int, cfg: dict) -> None:
        super().__init__()
        self.conv1 = _conv_d(3, cfg["stem"], 7, stride=2)
        self.bn1 = _bn2d(cfg["stem"])
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        in_ch, stages = cfg["stem"], []
        for index, (blocks, planes) in enumerate(zip(cfg["blocks"], cfg["planes"], strict=True)):
            layers = []
            for block in range(blocks):
                stride = 2 if index in (1, 2) and block == 0 else 1
                dilation = 2 if index == 3 and block > 0 else 1  # torchvision's replace_stride_with_dilation
                layers.append(DilatedBottleneck(in_ch, planes, stride, dilation))
                in_ch = planes * BOTTLENECK_EXPANSION
            stages.append(nn.Sequential(*layers))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        low_ch, aspp = cfg["planes"][0] * BOTTLENECK_EXPANSION, cfg["aspp"]
        self.aspp = nn.ModuleList([_conv_bn_relu(in_ch, aspp, 1)] +
                                  [_conv_bn_relu(in_ch, aspp, 3, dilation=r) for r in cfg["rates"]])
        self.aspp_pool = _conv_bn_relu(in_ch, aspp, 1)
        self.aspp_project = _conv_bn_relu(aspp * (len(cfg["rates"]) + 2), aspp, 1)
        self.low_level = _conv_bn_relu(low_ch, cfg["low_level"], 1)
        self.decoder = nn.Sequential(_conv_bn_relu(aspp + cfg["low_level"], cfg["decoder"], 3),
                                     _conv_bn_relu(cfg["decoder"], cfg["decoder"], 3))
        self.classifier = _conv_d(cfg["decoder"], num_classes, 1, bias=True)

    def logits(self, images: torch.Tensor) -> torch.Tensor:
        _check_images(images)
        x = self.maxpool(F.relu(self.bn1(self.conv1(images))))
        low = self.layer1(x)
        x = self.layer4(self.layer3(self.layer2(low)))
        pooled = self.aspp_pool(x.mean(dim=(2, 3), keepdim=True))
        branches = [branch(x) for branch in self.aspp]
        branches.append(F.interpolate(pooled, size=x.shape[2:], mode="bilinear", align_corners=False))
        x = self.aspp_project(torch.cat(branches, dim=1))
        x = F.interpolate(x, size=low.shape[2:], mode="bilinear", align_corners=False)
        x = self.decoder(torch.cat([x, self.low_level(low)], dim=1))
        return F.interpolate(self.classifier(x), size=images.shape[2:], mode="bilinear", align_corners=False)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(self.logits(images), labels, ignore_index=IGNORE_INDEX)


# ---------------------------------------------------------------- attention blocks shared by BERT and Transformer
class MultiHeadAttention(nn.Module):
    """Separate q/k/v/out projections (the same parameters as Paddle's layer, no packed in_proj)."""

    def __init__(self, d_model: int, heads: int, dropout: float, init) -> None:
        super().__init__()
        if d_model % heads:
            raise ValueError(f"d_model {d_model} is not a multiple of heads {heads}")
        self.heads, self.d_head = heads, d_model // heads
        self.q, self.k, self.v, self.out = (init(d_model, d_model) for _ in range(4))
        self.dropout = nn.Dropout(dropout)

    def forward(self, query: torch.Tensor, memory: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        b, lq, lk = query.shape[0], query.shape[1], memory.shape[1]
        q = self.q(query).view(b, lq, self.heads, self.d_head).transpose(1, 2)
        k = self.k(memory).view(b, lk, self.heads, self.d_head).transpose(1, 2)
        v = self.v(memory).view(b, lk, self.heads, self.d_head).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (self.d_head ** -0.5)
        if bias is not None:
            scores = scores + bias
        weights = self.dropout(torch.softmax(scores, dim=-1))
        context = torch.matmul(weights, v).transpose(1, 2).reshape(b, lq, self.heads * self.d_head)
        return self.out(context)


class FeedForward(nn.Module):
    def __init__(self, d_model: int, d_inner: int, dropout: float, init, activation) -> None:
        super().__init__()
        self.fc1, self.fc2 = init(d_model, d_inner), init(d_inner, d_model)
        self.activation = activation
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.dropout(self.activation(self.fc1(x))))


# ---------------------------------------------------------------- BERT-base pre-training (MLM + NSP)
class BertLayer(nn.Module):
    """Post-LN encoder layer: x = LN(x + drop(attn(x))); x = LN(x + drop(ffn(x))), GELU (erf)."""

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        h, p = cfg["hidden"], cfg["dropout"]
        self.attention = MultiHeadAttention(h, cfg["heads"], p, _normal_linear)
        self.norm1 = _layer_norm(h, BERT_LN_EPS)
        self.ffn = FeedForward(h, cfg["intermediate"], 0.0, _normal_linear, F.gelu)
        self.norm2 = _layer_norm(h, BERT_LN_EPS)
        self.dropout = nn.Dropout(p)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        x = self.norm1(x + self.dropout(self.attention(x, x, bias)))
        return self.norm2(x + self.dropout(self.ffn(x)))


class BertPretraining(nn.Module):
    """BERT-base (Devlin et al. 2018): word + position + segment embeddings, LN, 12 post-LN layers; MLM head
    (dense + GELU + LN, decoder tied to the word embeddings + output bias) on the masked positions only, NSP head
    on the tanh pooler of [CLS]. Loss = mean MLM cross-entropy + mean NSP cross-entropy.

    forward(input_ids [B,L], token_type_ids [B,L], input_mask [B,L] (1 token, 0 padding) float32,
            masked_positions [M] (flat indices into B*L), masked_labels [M], nsp_labels [B])."""

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        h = cfg["hidden"]
        self.word_embeddings = nn.Embedding(cfg["vocab"], h)
        self.position_embeddings = nn.Embedding(cfg["max_position"], h)
        self.token_type_embeddings = nn.Embedding(cfg["type_vocab"], h)
        for emb in (self.word_embeddings, self.position_embeddings, self.token_type_embeddings):
            nn.init.normal_(emb.weight, 0.0, INIT_STD)
        self.embedding_norm = _layer_norm(h, BERT_LN_EPS)
        self.embedding_dropout = nn.Dropout(cfg["dropout"])
        self.layers = nn.ModuleList([BertLayer(cfg) for _ in range(cfg["layers"])])
        self.pooler = _normal_linear(h, h)
        self.mlm_transform = _normal_linear(h, h)
        self.mlm_norm = _layer_norm(h, BERT_LN_EPS)
        self.mlm_bias = nn.Parameter(torch.zeros(cfg["vocab"]))
        self.nsp = _normal_linear(h, 2)

    def forward(self, input_ids, token_type_ids, input_mask, masked_positions, masked_labels, nsp_labels):
        b, length = input_ids.shape
        positions = torch.arange(length, device=input_ids.device)
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)[None]
             + self.token_type_embeddings(token_type_ids))
        x = self.embedding_dropout(self.embedding_norm(x))
        bias = ((1.0 - input_mask) * -10000.0)[:, None, None, :]
        for layer in self.layers:
            x = layer(x, bias)
        pooled = torch.tanh(self.pooler(x[:, 0]))
        nsp_loss = F.cross_entropy(self.nsp(pooled), nsp_labels)
        masked = x.reshape(b * length, -1).index_select(0, masked_positions)
        masked = self.mlm_norm(F.gelu(self.mlm_transform(masked)))
        mlm_logits = torch.matmul(masked, self.word_embeddings.weight.t()) + self.mlm_bias
        return F.cross_entropy(mlm_logits, masked_labels) + nsp_loss


# ---------------------------------------------------------------- Transformer base (pre-LN, as Paddle's)
def sinusoid_table(length: int, d_model: int) -> np.ndarray:
    """Sinusoidal position encoding [length, d_model] (Vaswani et al.; sin on even, cos on odd channels)."""
    position = np.arange(length, dtype=np.float64)[:, None]
    div = np.power(10000.0, np.arange(0, d_model, 2, dtype=np.float64) / d_model)
    table = np.zeros((length, d_model), dtype=np.float64)
    table[:, 0::2] = np.sin(position / div)
    table[:, 1::2] = np.cos(position / div)
    return table.astype(np.float32)


class TransformerLayer(nn.Module):
    """Pre-LN layer (Paddle's preprocess 'n', postprocess 'da'): x += drop(sublayer(LN(x))) per sublayer."""

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


class Transformer(nn.Module):
    """Transformer base (Vaswani et al. 2017) for translation, as Paddle's benchmark builds it: 6+6 pre-LN layers,
    d_model 512, 8 heads, FFN 2048, dropout 0.1, one embedding shared by source, target and the output projection
    (scaled by sqrt(d_model), sinusoidal positions), final LN on encoder and decoder. Loss: label-smoothed (0.1)
    cross-entropy summed over the non-padding target tokens / their number. Id 0 is padding.

    forward(src_ids [B,S], trg_ids [B,T] (decoder input), trg_labels [B,T])."""

    PAD = 0

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        d = cfg["d_model"]
        self.d_model, self.smoothing = d, cfg["label_smoothing"]
        self.embedding = nn.Embedding(cfg["vocab"], d)
        nn.init.normal_(self.embedding.weight, 0.0, d ** -0.5)
        self.register_buffer("positions", torch.from_numpy(sinusoid_table(cfg["max_length"], d)), persistent=False)
        self.dropout = nn.Dropout(cfg["dropout"])
        self.encoder = nn.ModuleList([TransformerLayer(cfg, cross=False) for _ in range(cfg["layers"])])
        self.encoder_norm = _layer_norm(d, TRANSFORMER_LN_EPS)
        self.decoder = nn.ModuleList([TransformerLayer(cfg, cross=True) for _ in range(cfg["layers"])])
        self.decoder_norm = _layer_norm(d, TRANSFORMER_LN_EPS)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embedding(ids) * (self.d_model ** 0.5) + self.positions[: ids.shape[1]][None]
        return self.dropout(x)

    def forward(self, src_ids, trg_ids, trg_labels):
        src_bias = ((src_ids == self.PAD).float() * -1e9)[:, None, None, :]
        length = trg_ids.shape[1]
        causal = torch.triu(torch.full((length, length), -1e9, device=trg_ids.device), diagonal=1)[None, None]
        x = self.embed(src_ids)
        for layer in self.encoder:
            x = layer(x, src_bias)
        memory = self.encoder_norm(x)
        y = self.embed(trg_ids)
        for layer in self.decoder:
            y = layer(y, causal, memory, src_bias)
        vocab = self.embedding.num_embeddings
        logits = torch.matmul(self.decoder_norm(y), self.embedding.weight.t()).reshape(-1, vocab)
        labels = trg_labels.reshape(-1)
        # label smoothing eps over the whole vocabulary: (1 - eps) * nll + eps * (logsumexp - mean logit); written
        # with cross_entropy + logsumexp, not log_softmax (Paddle's CPU log_softmax takes minutes at 37k classes)
        nll = F.cross_entropy(logits, labels, reduction="none")
        smooth = torch.logsumexp(logits, dim=-1) - logits.mean(dim=-1)
        loss = (1.0 - self.smoothing) * nll + self.smoothing * smooth
        weights = (labels != self.PAD).float()
        return (loss * weights).sum() / weights.sum()


# ---------------------------------------------------------------- CycleGAN
def _gan_conv(in_ch: int, out_ch: int, kernel: int, stride: int = 1, padding: int = 0) -> nn.Conv2d:
    conv = nn.Conv2d(in_ch, out_ch, kernel, stride=stride, padding=padding, bias=True)
    nn.init.normal_(conv.weight, 0.0, INIT_STD)  # CycleGAN's init_type='normal', gain 0.02
    nn.init.zeros_(conv.bias)
    return conv


def _gan_deconv(in_ch: int, out_ch: int) -> nn.ConvTranspose2d:
    conv = nn.ConvTranspose2d(in_ch, out_ch, 3, stride=2, padding=1, output_padding=1, bias=True)
    nn.init.normal_(conv.weight, 0.0, INIT_STD)
    nn.init.zeros_(conv.bias)
    return conv


def _instance_norm(channels: int) -> nn.InstanceNorm2d:
    return nn.InstanceNorm2d(channels, affine=False, track_running_stats=False)


class ResnetBlock(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.block = nn.Sequential(
            nn.ReflectionPad2d(1), _gan_conv(channels, channels, 3), _instance_norm(channels), nn.ReLU(),
            nn.ReflectionPad2d(1), _gan_conv(channels, channels, 3), _instance_norm(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


class ResnetGenerator(nn.Module):
    """c7s1-64, d128, d256, 9 x R256, u128, u64, c7s1-3 + tanh (Zhu et al. 2017; reflection padding, IN)."""

    def __init__(self, ngf: int, res_blocks: int) -> None:
        super().__init__()
        layers = [nn.ReflectionPad2d(3), _gan_conv(3, ngf, 7), _instance_norm(ngf), nn.ReLU()]
        for mult in (1, 2):
            layers += [_gan_conv(ngf * mult, ngf * mult * 2, 3, stride=2, padding=1),
                       _instance_norm(ngf * mult * 2), nn.ReLU()]
        layers += [ResnetBlock(ngf * 4) for _ in range(res_blocks)]
        for mult in (4, 2):
            layers += [_gan_deconv(ngf * mult, ngf * mult // 2), _instance_norm(ngf * mult // 2), nn.ReLU()]
        layers += [nn.ReflectionPad2d(3), _gan_conv(ngf, 3, 7), nn.Tanh()]
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


class PatchDiscriminator(nn.Module):
    """70x70 PatchGAN: C64 (no norm), C128, C256 (stride 2), C512 (stride 1), 1-channel 4x4 output; LeakyReLU 0.2."""

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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x)


class CycleGAN(nn.Module):
    """Two generators (G_A: A->B, G_B: B->A) and two discriminators (D_A judges B images, D_B judges A images).
    Losses (LSGAN): generators = MSE(D(fake), 1) both ways + lambda_cycle x L1 cycle both ways + lambda_identity x
    lambda_cycle x L1 identity both ways; each discriminator = (MSE(D(real), 1) + MSE(D(fake), 0)) / 2.
    ``forward`` returns the generators' loss and the fakes; ``discriminator_loss`` takes the detached fakes."""

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
    def _gan(prediction: torch.Tensor, target: float) -> torch.Tensor:
        return ((prediction - target) ** 2).mean()

    def forward(self, real_a: torch.Tensor, real_b: torch.Tensor):
        fake_b, fake_a = self.g_a(real_a), self.g_b(real_b)
        cycle = (self.g_b(fake_b) - real_a).abs().mean() + (self.g_a(fake_a) - real_b).abs().mean()
        identity = (self.g_a(real_b) - real_b).abs().mean() + (self.g_b(real_a) - real_a).abs().mean()
        loss = (self._gan(self.d_a(fake_b), 1.0) + self._gan(self.d_b(fake_a), 1.0)
                + self.lambda_cycle * cycle + self.lambda_cycle * self.lambda_identity * identity)
        return loss, fake_a, fake_b

    def discriminator_loss(self, real_a, real_b, fake_a, fake_b) -> torch.Tensor:
        loss_a = (self._gan(self.d_a(real_b), 1.0) + self._gan(self.d_a(fake_b), 0.0)) * 0.5
        loss_b = (self._gan(self.d_b(real_a), 1.0) + self._gan(self.d_b(fake_a), 0.0)) * 0.5
        return loss_a + loss_b


def build_seed003(name: str, size: str = "full", num_classes: int | None = None, **overrides) -> nn.Module:
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
    # Paddle's benchmark/fluid scripts (v1.4) and the papers they follow; the lr is held constant (a schedule
    # changes no step's work)
    "se_resnext50": {"optimizer": "momentum", "lr": None, "momentum": 0.9, "weight_decay": 1e-4},
    "deeplabv3p": {"optimizer": "momentum", "lr": 0.01, "momentum": 0.9, "weight_decay": 4e-5},
    "bert": {"optimizer": "adamw", "lr": 1e-4, "betas": (0.9, 0.999), "eps": 1e-6, "weight_decay": 0.01,
             "clip_norm": 1.0},
    "transformer": {"optimizer": "adam", "lr": 2.0 * 512 ** -0.5 * 4000 ** -0.5, "betas": (0.9, 0.997),
                    "eps": 1e-9},
    "cyclegan": {"optimizer": "adam", "lr": 2e-4, "betas": (0.5, 0.999), "eps": 1e-8},
}


def _no_decay(param_name: str) -> bool:
    """BERT excludes biases and LayerNorm parameters from weight decay."""
    return param_name.endswith("bias") or "norm" in param_name


class Trainer:
    """One training step of a seed 003 model with its publisher's optimizer (and loss, inside the model).

    ``step(*batch)`` runs forward, backward and the update(s) and returns the loss as a float; for CycleGAN one
    step trains the generators, then the discriminators, and returns generator loss + discriminator loss
    (``last`` holds both). ``net`` may be a DistributedDataParallel wrapper of ``model``."""

    def __init__(self, name: str, model: nn.Module, net: nn.Module | None = None, lr: float | None = None,
                 batch_size: int = 1, scaler=None, autocast=None) -> None:
        self.name, self.model, self.net = name, model, net if net is not None else model
        self.scaler, self.autocast = scaler, autocast
        s = dict(OPTIMIZER_SETTINGS[name])
        if lr is not None:
            s["lr"] = lr
        if s["lr"] is None:
            s["lr"] = 0.1 * batch_size / 256
        self.settings = s
        self.clip_norm = s.get("clip_norm")
        if name == "cyclegan":
            self.opt_g = torch.optim.Adam(model.generator_parameters(), lr=s["lr"], betas=s["betas"], eps=s["eps"])
            self.opt_d = torch.optim.Adam(model.discriminator_parameters(), lr=s["lr"], betas=s["betas"],
                                          eps=s["eps"])
        elif s["optimizer"] == "momentum":
            self.opt = torch.optim.SGD(model.parameters(), lr=s["lr"], momentum=s["momentum"],
                                       weight_decay=s["weight_decay"])
        elif s["optimizer"] == "adamw":
            named = list(model.named_parameters())
            groups = [{"params": [p for n, p in named if not _no_decay(n)], "weight_decay": s["weight_decay"]},
                      {"params": [p for n, p in named if _no_decay(n)], "weight_decay": 0.0}]
            self.opt = torch.optim.AdamW(groups, lr=s["lr"], betas=s["betas"], eps=s["eps"])
        else:
            self.opt = torch.optim.Adam(model.parameters(), lr=s["lr"], betas=s["betas"], eps=s["eps"])
        self.last: tuple[float, ...] = ()

    def _forward(self, batch):
        if self.autocast is None:
            return self.net(*batch)
        with self.autocast():
            return self.net(*batch)

    def step(self, *batch) -> float:
        if self.name == "cyclegan":
            return self._cyclegan_step(*batch)
        self.opt.zero_grad(set_to_none=True)
        loss = self._forward(batch)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            if self.clip_norm:
                self.scaler.unscale_(self.opt)
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
            self.scaler.step(self.opt)
            self.scaler.update()
        else:
            loss.backward()
            if self.clip_norm:
                torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.clip_norm)
            self.opt.step()
        self.last = (float(loss.detach()),)
        return self.last[0]

    def _cyclegan_step(self, real_a, real_b) -> float:
        self.opt_g.zero_grad(set_to_none=True)
        loss_g, fake_a, fake_b = self.net(real_a, real_b)
        loss_g.backward()
        self.opt_g.step()
        self.opt_d.zero_grad(set_to_none=True)  # drops what the generator pass left on the discriminators
        loss_d = self.model.discriminator_loss(real_a, real_b, fake_a.detach(), fake_b.detach())
        loss_d.backward()
        self.opt_d.step()
        self.last = (float(loss_g.detach()), float(loss_d.detach()))
        return self.last[0] + self.last[1]


if __name__ == "__main__":
    raise SystemExit(main())
