"""The PyTorch layers every harness model is built from, each with the initialisation both frameworks share
(paddle_layers.py is this file for Paddle), the input check, and the trainable-parameter count.

Layout: torch tensors are always NCHW-*shaped*. ``data_format="NHWC"`` means channels-last *memory format*: the
model's parameters are converted with ``.to(memory_format=torch.channels_last)``, and the caller passes images as
``images.to(memory_format=torch.channels_last)`` -- still shaped ``[B, 3, H, W]``. (Paddle, by contrast, takes
NHWC-shaped tensors ``[B, H, W, 3]`` when asked for NHWC.)
"""

from __future__ import annotations

import math

import torch
from model_specs import INIT_STD, kaiming_std
from torch import nn


def conv(in_ch: int, out_ch: int, kernel: int, stride: int = 1, padding: int | None = None, dilation: int = 1,
         groups: int = 1, bias: bool = False) -> nn.Conv2d:
    """Conv with Kaiming-normal weights (fan_out, ReLU gain, as torchvision) and zero bias; padding None: 'same'
    (for the dilation given)."""
    padding = dilation * (kernel - 1) // 2 if padding is None else padding
    layer = nn.Conv2d(in_ch, out_ch, kernel, stride=stride, padding=padding, dilation=dilation, groups=groups,
                      bias=bias)
    nn.init.normal_(layer.weight, 0.0, kaiming_std(out_ch, kernel))
    if bias:
        nn.init.zeros_(layer.bias)
    return layer


def bn2d(channels: int) -> nn.BatchNorm2d:
    bn = nn.BatchNorm2d(channels)  # eps 1e-5, momentum 0.1 (= Paddle's 0.9)
    nn.init.ones_(bn.weight)
    nn.init.zeros_(bn.bias)
    return bn


def shortcut(in_ch: int, out_ch: int, stride: int) -> nn.Sequential | None:
    """A bottleneck's projection shortcut (1x1 conv carrying the block's stride, BN) where the block changes the
    shape; None (the identity) where it does not."""
    if stride != 1 or in_ch != out_ch:
        return nn.Sequential(conv(in_ch, out_ch, 1, stride=stride), bn2d(out_ch))
    return None


def bn1d(features: int) -> nn.BatchNorm1d:
    bn = nn.BatchNorm1d(features)
    nn.init.ones_(bn.weight)
    nn.init.zeros_(bn.bias)
    return bn


def linear(in_features: int, out_features: int, std: float | None = None) -> nn.Linear:
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


def normal_linear(in_features: int, out_features: int, bias: bool = True, std: float = INIT_STD) -> nn.Linear:
    fc = nn.Linear(in_features, out_features, bias=bias)
    nn.init.normal_(fc.weight, 0.0, std)
    if bias:
        nn.init.zeros_(fc.bias)
    return fc


def xavier_linear(in_features: int, out_features: int, bias: bool = True) -> nn.Linear:
    fc = nn.Linear(in_features, out_features, bias=bias)
    nn.init.xavier_uniform_(fc.weight)
    if bias:
        nn.init.zeros_(fc.bias)
    return fc


def embedding(num: int, dim: int, std: float) -> nn.Embedding:
    emb = nn.Embedding(num, dim)
    nn.init.normal_(emb.weight, 0.0, std)
    return emb


def layer_norm(features: int, eps: float) -> nn.LayerNorm:
    return nn.LayerNorm(features, eps=eps)  # weight 1, bias 0


def gan_conv(in_ch: int, out_ch: int, kernel: int, stride: int = 1, padding: int = 0) -> nn.Conv2d:
    layer = nn.Conv2d(in_ch, out_ch, kernel, stride=stride, padding=padding, bias=True)
    nn.init.normal_(layer.weight, 0.0, INIT_STD)  # CycleGAN's init_type='normal', gain 0.02
    nn.init.zeros_(layer.bias)
    return layer


def gan_deconv(in_ch: int, out_ch: int) -> nn.ConvTranspose2d:
    layer = nn.ConvTranspose2d(in_ch, out_ch, 3, stride=2, padding=1, output_padding=1, bias=True)
    nn.init.normal_(layer.weight, 0.0, INIT_STD)
    nn.init.zeros_(layer.bias)
    return layer


def instance_norm(channels: int) -> nn.InstanceNorm2d:
    return nn.InstanceNorm2d(channels, affine=False, track_running_stats=False)


def check_images(images: torch.Tensor) -> None:
    if images.dim() != 4 or images.shape[1] != 3:
        raise ValueError(
            f"images must be NCHW-shaped [B, 3, H, W], got {list(images.shape)}; for channels-last pass "
            "images.to(memory_format=torch.channels_last), which keeps that shape"
        )


def count_params(net: nn.Module) -> int:
    """Trainable parameters only (BatchNorm running statistics are buffers, not parameters, in torch)."""
    return sum(p.numel() for p in net.parameters() if p.requires_grad)
