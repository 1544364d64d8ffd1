"""The Paddle layers every harness model is built from: torch_layers.py written for Paddle, each layer with the same
initialisation scheme (``paddle.vision.models`` is deliberately not used, so the two frameworks mirror each other),
the input check, and the trainable-parameter count.

Paddle differences from torch worth knowing: Linear weights are [in, out] (torch: [out, in]); BatchNorm's running
mean/variance are listed by ``parameters()`` (with ``stop_gradient=True``), which ``count_params`` leaves out;
Paddle's BN momentum 0.9 is torch's 0.1; ``data_format="NHWC"`` builds NHWC layers that take ``[B, H, W, 3]``.
"""

from __future__ import annotations

import math

import numpy as np
import paddle
from model_specs import INIT_STD, kaiming_std
from paddle import nn
from paddle.nn import initializer


def attr(init: initializer.Initializer) -> paddle.ParamAttr:
    return paddle.ParamAttr(initializer=init)


def _bias(bias: bool):
    return attr(initializer.Constant(0.0)) if bias else False


def conv(in_ch: int, out_ch: int, kernel: int, stride: int = 1, padding: int | None = None, dilation: int = 1,
         groups: int = 1, bias: bool = False, data_format: str = "NCHW") -> nn.Conv2D:
    """Conv with Kaiming-normal weights (fan_out, ReLU gain, as torchvision) and zero bias; padding None: 'same'
    (for the dilation given)."""
    padding = dilation * (kernel - 1) // 2 if padding is None else padding
    return nn.Conv2D(in_ch, out_ch, kernel, stride=stride, padding=padding, dilation=dilation, groups=groups,
                     data_format=data_format, weight_attr=attr(initializer.Normal(0.0, kaiming_std(out_ch, kernel))),
                     bias_attr=_bias(bias))


def bn2d(channels: int, data_format: str = "NCHW") -> nn.BatchNorm2D:
    # epsilon 1e-5, momentum 0.9 (= torch's 0.1)
    return nn.BatchNorm2D(channels, data_format=data_format, weight_attr=attr(initializer.Constant(1.0)),
                          bias_attr=attr(initializer.Constant(0.0)))


def shortcut(in_ch: int, out_ch: int, stride: int, data_format: str = "NCHW") -> nn.Sequential | None:
    """A bottleneck's projection shortcut (1x1 conv carrying the block's stride, BN) where the block changes the
    shape; None (the identity) where it does not."""
    if stride != 1 or in_ch != out_ch:
        return nn.Sequential(conv(in_ch, out_ch, 1, stride=stride, data_format=data_format), bn2d(out_ch, data_format))
    return None


def bn1d(features: int) -> nn.BatchNorm1D:
    return nn.BatchNorm1D(features, weight_attr=attr(initializer.Constant(1.0)),
                          bias_attr=attr(initializer.Constant(0.0)))


def linear(in_features: int, out_features: int, std: float | None = None) -> nn.Linear:
    """Linear layer. ``std=None``: PyTorch's default, U(+-1/sqrt(in)) for weight and bias (Paddle's own default
    is Xavier weight, zero bias); otherwise N(0, std) weight and zero bias (torchvision's VGG classifier)."""
    if std is None:
        bound = 1.0 / math.sqrt(in_features)
        weight, bias = initializer.Uniform(-bound, bound), initializer.Uniform(-bound, bound)
    else:
        weight, bias = initializer.Normal(0.0, std), initializer.Constant(0.0)
    return nn.Linear(in_features, out_features, weight_attr=attr(weight), bias_attr=attr(bias))


def normal_linear(in_features: int, out_features: int, bias: bool = True, std: float = INIT_STD) -> nn.Linear:
    return nn.Linear(in_features, out_features, weight_attr=attr(initializer.Normal(0.0, std)),
                     bias_attr=_bias(bias))


def xavier_linear(in_features: int, out_features: int, bias: bool = True) -> nn.Linear:
    return nn.Linear(in_features, out_features, weight_attr=attr(initializer.XavierUniform()),
                     bias_attr=_bias(bias))


def embedding(num: int, dim: int, std: float) -> nn.Embedding:
    return nn.Embedding(num, dim, weight_attr=attr(initializer.Normal(0.0, std)))


def layer_norm(features: int, eps: float) -> nn.LayerNorm:
    return nn.LayerNorm(features, epsilon=eps, weight_attr=attr(initializer.Constant(1.0)),
                        bias_attr=attr(initializer.Constant(0.0)))


def gan_conv(in_ch: int, out_ch: int, kernel: int, stride: int = 1, padding: int = 0) -> nn.Conv2D:
    return nn.Conv2D(in_ch, out_ch, kernel, stride=stride, padding=padding,
                     weight_attr=attr(initializer.Normal(0.0, INIT_STD)), bias_attr=_bias(True))


def gan_deconv(in_ch: int, out_ch: int) -> nn.Conv2DTranspose:
    return nn.Conv2DTranspose(in_ch, out_ch, 3, stride=2, padding=1, output_padding=1,
                              weight_attr=attr(initializer.Normal(0.0, INIT_STD)), bias_attr=_bias(True))


def instance_norm(channels: int) -> nn.InstanceNorm2D:
    return nn.InstanceNorm2D(channels, weight_attr=False, bias_attr=False)  # torch's affine=False


def reflect(pad: int) -> nn.Pad2D:
    return nn.Pad2D(padding=pad, mode="reflect")


def check_images(images: paddle.Tensor, data_format: str = "NCHW") -> None:
    shape = list(images.shape)
    if len(shape) != 4 or shape[1 if data_format == "NCHW" else 3] != 3:
        layout = "[B, 3, H, W]" if data_format == "NCHW" else "[B, H, W, 3]"
        raise ValueError(f"images must be {data_format} {layout}, got {shape}")


def count_params(net: nn.Layer) -> int:
    """Trainable parameters only: BatchNorm's running mean/variance are in ``parameters()`` with
    ``stop_gradient=True`` and are not counted."""
    return sum(int(np.prod(p.shape)) for p in net.parameters() if not p.stop_gradient)
