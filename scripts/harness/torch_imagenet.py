"""The ImageNet models in PyTorch: ResNet50 v1.5, VGG16 and ArcFace (ResNet50 trunk + angular margin).

``paddle_imagenet.py`` is this file written for Paddle, layer for layer and with the same initialisation scheme
(torch_layers.py), so both frameworks train the same networks with the same trainable parameter counts:

    resnet50  25,557,032   (1000 classes; torchvision's resnet50)
    vgg16    138,357,544   (1000 classes; torchvision's vgg16, configuration D, no BN)
    arcface   trunk + BN + dropout + FC 2048->512 + BN, plus a 512 x classes margin head (no bias)

Every model is called as ``loss = net(images, labels)``: images float32 ``[B, 3, H, W]`` (NHWC: channels-last
memory, see torch_layers.py), labels int64 ``[B]``; the result is the scalar mean softmax cross-entropy.
Sizes and constants: model_specs.py.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from model_specs import (
    ARCFACE_DROPOUT,
    ARCFACE_MARGIN,
    ARCFACE_SCALE,
    ARCFACE_WEIGHT_STD,
    BOTTLENECK_EXPANSION,
    RESNET50_BLOCKS,
    RESNET50_FEATURES,
    RESNET50_STEM,
    RESNET50_WIDTHS,
    VGG16_CONFIG,
    VGG16_DROPOUT,
    VGG16_HIDDEN,
    VGG16_INIT_STD,
    VGG16_POOL,
    arcface_margin,
    resnet_stages,
)
from torch import nn
from torch_layers import bn1d, bn2d, check_images, conv, linear, shortcut


# ---------------------------------------------------------------- ResNet50 v1.5
class Bottleneck(nn.Module):
    """1x1 -> 3x3 (carries the stride: v1.5) -> 1x1 (x4), BN after each conv, projection shortcut when needed."""

    def __init__(self, in_ch: int, width: int, stride: int = 1) -> None:
        super().__init__()
        out_ch = width * BOTTLENECK_EXPANSION
        self.conv1 = conv(in_ch, width, 1)
        self.bn1 = bn2d(width)
        self.conv2 = conv(width, width, 3, stride=stride)
        self.bn2 = bn2d(width)
        self.conv3 = conv(width, out_ch, 1)
        self.bn3 = bn2d(out_ch)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = shortcut(in_ch, out_ch, stride)

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
        self.conv1 = conv(3, RESNET50_STEM, 7, stride=2)
        self.bn1 = bn2d(RESNET50_STEM)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1, self.layer2, self.layer3, self.layer4 = (
            nn.Sequential(*(Bottleneck(in_ch, width, stride) for in_ch, width, stride, _ in stage))
            for stage in resnet_stages(RESNET50_STEM, RESNET50_BLOCKS, RESNET50_WIDTHS))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))


class ResNet50(nn.Module):
    def __init__(self, num_classes: int) -> None:
        super().__init__()
        self.trunk = ResNet50Trunk()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = linear(RESNET50_FEATURES, num_classes)

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        check_images(images)
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
                layers += [conv(in_ch, item, 3, bias=True), nn.ReLU(inplace=True)]
                in_ch = item
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d(VGG16_POOL)  # also up-samples small inputs (32x32 -> 1x1 -> 7x7)
        self.classifier = nn.Sequential(
            linear(512 * VGG16_POOL * VGG16_POOL, VGG16_HIDDEN, std=VGG16_INIT_STD),
            nn.ReLU(inplace=True),
            nn.Dropout(VGG16_DROPOUT),
            linear(VGG16_HIDDEN, VGG16_HIDDEN, std=VGG16_INIT_STD),
            nn.ReLU(inplace=True),
            nn.Dropout(VGG16_DROPOUT),
            linear(VGG16_HIDDEN, num_classes, std=VGG16_INIT_STD),
        )

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        check_images(images)
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
        self.cos_m, self.sin_m, self.threshold, self.fallback = arcface_margin(margin)
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
        self.bn_features = bn1d(RESNET50_FEATURES)
        self.dropout = nn.Dropout(ARCFACE_DROPOUT)
        self.fc_embedding = linear(RESNET50_FEATURES, embedding_size)
        self.bn_embedding = bn1d(embedding_size)
        self.head = ArcMarginHead(embedding_size, num_classes)

    def embed(self, images: torch.Tensor) -> torch.Tensor:
        check_images(images)
        features = torch.flatten(self.avgpool(self.trunk(images)), 1)
        return self.bn_embedding(self.fc_embedding(self.dropout(self.bn_features(features))))

    def forward(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        logits = self.head(self.embed(images), labels)
        return F.cross_entropy(logits, labels)


def build(name: str, num_classes: int, data_format: str, embedding_size: int) -> nn.Module:
    """One of the three (arguments checked by model_specs.build_model); NHWC: channels-last memory."""
    if name == "resnet50":
        net: nn.Module = ResNet50(num_classes)
    elif name == "vgg16":
        net = VGG16(num_classes)
    elif name == "arcface":
        net = ArcFace(num_classes, embedding_size)
    else:
        raise ValueError(f"no ImageNet-family model {name!r} in this module (resnet50, vgg16, arcface)")
    if data_format == "NHWC":
        net = net.to(memory_format=torch.channels_last)
    return net
