"""The harness's eight models in PyTorch, built by name: ``build_model`` and ``count_params`` (used by
backend_torch.py, train.py --count-params and bench/bare_loop.py).

Self-contained on purpose (standard library + numpy + torch only; it never imports ``kit``) because it runs inside
framework containers. The networks: torch_imagenet.py (ResNet50 v1.5, VGG16, ArcFace) and torch_seed003.py
(SE-ResNeXt50, DeepLabV3+, BERT, Transformer, CycleGAN), over torch_layers.py; their sizes and the checks on the
arguments: model_specs.py, shared with models_paddle.py, which builds the same networks in Paddle, layer for layer
and with the same initialisation scheme, so both frameworks train the same networks with the same trainable
parameter counts. Every model is called as ``loss = net(*batch)`` (the ImageNet models: ``net(images, labels)``).

``python scripts/harness/models_torch.py`` prints the trainable-parameter counts.
"""

from __future__ import annotations

import model_specs
import torch
import torch_imagenet
import torch_seed003
from torch import nn
from torch_layers import count_params

__all__ = ["build_model", "count_params", "main"]


def build_model(name: str, num_classes: int | None = 1000, data_format: str = "NCHW",
                embedding_size: int = model_specs.ARCFACE_EMBEDDING, size: str = "full", **overrides) -> nn.Module:
    """Build one of model_specs.MODELS; see torch_layers.py for what ``data_format="NHWC"`` means in torch.
    Seed 003's models take ``size`` ("full": the published configuration, "tiny": for CPU tests) and configuration
    overrides (e.g. ``dropout=0.0``); ``num_classes`` applies to se_resnext50 and deeplabv3p only."""
    return model_specs.build_model(name, torch_imagenet.build, torch_seed003.SEED003, num_classes, data_format,
                                   embedding_size, size, **overrides)


def _count(name: str, **kwargs) -> int:
    with torch.device("meta"):  # the layers are built (shapes, counts) without allocating or initialising storage
        return count_params(build_model(name, **kwargs))


def main(argv: list[str] | None = None) -> int:
    return model_specs.count_cli("torch", _count, argv)


if __name__ == "__main__":
    raise SystemExit(main())
