"""The harness's eight models in Paddle, built by name: models_torch.py for Paddle (``build_model``,
``count_params``; used by backend_paddle.py and train.py --count-params).

Self-contained on purpose (standard library + numpy + paddle only; it never imports ``kit``) because it runs inside
framework containers. The networks: paddle_imagenet.py (ResNet50 v1.5, VGG16, ArcFace) and paddle_seed003.py
(SE-ResNeXt50, DeepLabV3+, BERT, Transformer, CycleGAN), over paddle_layers.py; the same networks as torch's,
layer for layer, with the same initialisation, configurations (model_specs.py) and trainable parameter counts.
Images are ``[B, 3, H, W]``, or ``[B, H, W, 3]`` for the ImageNet models built with ``data_format="NHWC"``.

``python scripts/harness/models_paddle.py`` prints the trainable-parameter counts.
"""

from __future__ import annotations

import model_specs
import paddle
import paddle_imagenet
import paddle_seed003
from paddle import nn
from paddle_layers import count_params

__all__ = ["build_model", "count_params", "main"]


def build_model(name: str, num_classes: int | None = 1000, data_format: str = "NCHW",
                embedding_size: int = model_specs.ARCFACE_EMBEDDING, size: str = "full", **overrides) -> nn.Layer:
    """Build one of model_specs.MODELS, its layers in DATA_FORMAT. Seed 003's models take ``size`` ("full" or
    "tiny") and configuration overrides, as in models_torch."""
    return model_specs.build_model(name, paddle_imagenet.build, paddle_seed003.SEED003, num_classes, data_format,
                                   embedding_size, size, **overrides)


def _count(name: str, **kwargs) -> int:
    with paddle.LazyGuard():  # the layers are built (shapes, counts) without initialising their storage
        return count_params(build_model(name, **kwargs))


def main(argv: list[str] | None = None) -> int:
    return model_specs.count_cli("paddle", _count, argv)


if __name__ == "__main__":
    raise SystemExit(main())
