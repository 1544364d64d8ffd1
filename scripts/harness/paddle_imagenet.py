"""The ImageNet models in Paddle: ResNet50 v1.5, VGG16 and ArcFace (ResNet50 trunk + angular margin).

torch_imagenet.py written for Paddle, layer for layer and with the same initialisation scheme (paddle_layers.py);
the same trainable parameter counts. Every model is called as ``loss = net(images, labels)``: images float32
``[B, 3, H, W]`` -- or ``[B, H, W, 3]`` when built with ``data_format="NHWC"`` (passed to every Conv2D /
BatchNorm2D / pooling layer) -- and labels int64 ``[B]``; the result is the scalar mean softmax cross-entropy.
Linear weights are [in, out] in Paddle, so the ArcFace weight is [embedding, classes] here.
"""

from __future__ import annotations

import paddle
import paddle.nn.functional as F
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
from paddle import nn
from paddle.nn import initializer
from paddle_layers import attr, bn1d, bn2d, check_images, conv, linear, shortcut


# ---------------------------------------------------------------- ResNet50 v1.5
class Bottleneck(nn.Layer):
    """1x1 -> 3x3 (carries the stride: v1.5) -> 1x1 (x4), BN after each conv, projection shortcut when needed."""

    def __init__(self, in_ch: int, width: int, data_format: str, stride: int = 1) -> None:
        super().__init__()
        out_ch = width * BOTTLENECK_EXPANSION
        self.conv1 = conv(in_ch, width, 1, data_format=data_format)
        self.bn1 = bn2d(width, data_format)
        self.conv2 = conv(width, width, 3, stride=stride, data_format=data_format)
        self.bn2 = bn2d(width, data_format)
        self.conv3 = conv(width, out_ch, 1, data_format=data_format)
        self.bn3 = bn2d(out_ch, data_format)
        self.relu = nn.ReLU()
        self.downsample = shortcut(in_ch, out_ch, stride, data_format)

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
        self.conv1 = conv(3, RESNET50_STEM, 7, stride=2, data_format=data_format)
        self.bn1 = bn2d(RESNET50_STEM, data_format)
        self.relu = nn.ReLU()
        self.maxpool = nn.MaxPool2D(kernel_size=3, stride=2, padding=1, data_format=data_format)
        self.layer1, self.layer2, self.layer3, self.layer4 = (
            nn.Sequential(*(Bottleneck(in_ch, width, data_format, stride) for in_ch, width, stride, _ in stage))
            for stage in resnet_stages(RESNET50_STEM, RESNET50_BLOCKS, RESNET50_WIDTHS))

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))


class ResNet50(nn.Layer):
    def __init__(self, num_classes: int, data_format: str) -> None:
        super().__init__()
        self.data_format = data_format
        self.trunk = ResNet50Trunk(data_format)
        self.avgpool = nn.AdaptiveAvgPool2D(1, data_format=data_format)
        self.fc = linear(RESNET50_FEATURES, num_classes)

    def forward(self, images: paddle.Tensor, labels: paddle.Tensor) -> paddle.Tensor:
        check_images(images, self.data_format)
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
                layers += [conv(in_ch, item, 3, bias=True, data_format=data_format), nn.ReLU()]
                in_ch = item
        self.features = nn.Sequential(*layers)
        # also up-samples small inputs (32x32 -> 1x1 -> 7x7)
        self.avgpool = nn.AdaptiveAvgPool2D(VGG16_POOL, data_format=data_format)
        self.classifier = nn.Sequential(
            linear(512 * VGG16_POOL * VGG16_POOL, VGG16_HIDDEN, std=VGG16_INIT_STD),
            nn.ReLU(),
            nn.Dropout(VGG16_DROPOUT),
            linear(VGG16_HIDDEN, VGG16_HIDDEN, std=VGG16_INIT_STD),
            nn.ReLU(),
            nn.Dropout(VGG16_DROPOUT),
            linear(VGG16_HIDDEN, num_classes, std=VGG16_INIT_STD),
        )

    def forward(self, images: paddle.Tensor, labels: paddle.Tensor) -> paddle.Tensor:
        check_images(images, self.data_format)
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
        self.cos_m, self.sin_m, self.threshold, self.fallback = arcface_margin(margin)
        self.weight = self.create_parameter(shape=[embedding_size, num_classes], dtype="float32",
                                            attr=attr(initializer.Normal(0.0, ARCFACE_WEIGHT_STD)))

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
        self.bn_features = bn1d(RESNET50_FEATURES)
        self.dropout = nn.Dropout(ARCFACE_DROPOUT)
        self.fc_embedding = linear(RESNET50_FEATURES, embedding_size)
        self.bn_embedding = bn1d(embedding_size)
        self.head = ArcMarginHead(embedding_size, num_classes)

    def embed(self, images: paddle.Tensor) -> paddle.Tensor:
        check_images(images, self.data_format)
        features = paddle.flatten(self.avgpool(self.trunk(images)), 1)
        return self.bn_embedding(self.fc_embedding(self.dropout(self.bn_features(features))))

    def forward(self, images: paddle.Tensor, labels: paddle.Tensor) -> paddle.Tensor:
        logits = self.head(self.embed(images), labels)
        return F.cross_entropy(logits, labels)


def build(name: str, num_classes: int, data_format: str, embedding_size: int) -> nn.Layer:
    """One of the three (arguments checked by model_specs.build_model), its layers in DATA_FORMAT."""
    if name == "resnet50":
        return ResNet50(num_classes, data_format)
    if name == "vgg16":
        return VGG16(num_classes, data_format)
    if name == "arcface":
        return ArcFace(num_classes, embedding_size, data_format)
    raise ValueError(f"no ImageNet-family model {name!r} in this module (resnet50, vgg16, arcface)")
