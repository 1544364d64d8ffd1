"""The harness's models and what each supports: the one catalogue the harness and the kit both read.

    from catalogue import MODELS, NLP, SEED003
    MODELS["resnet50"].image_size, MODELS["bert"].compiled_not   # 224, "its batches change shape ..."

Standard library only: it travels to every host with the harness, and the kit loads this file by its path
(kit.core.catalogue), so a model's facts are written here once.
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_LAYOUTS = ("nchw", "nhwc")
NCHW_ONLY = ("nchw",)
SYNTHETIC_ONLY = ("synthetic",)
RESHAPED = "its batches change shape with the corpus's sentence lengths, so recompilation would be timed"


@dataclass(frozen=True)
class Model:
    name: str
    family: str  # imagenet: ResNet50/VGG16/ArcFace (the seeds 000-002, 004); seed003: seed 003's five models
    image_size: int  # default input size (0: none, a sequence model)
    num_classes: int  # default classes (0: none)
    layouts: tuple[str, ...] = NCHW_ONLY  # nhwc: built channels-last too
    data: tuple[str, ...] = SYNTHETIC_ONLY  # imagenet: reads an ImageNet train list through the loaders
    compiled_not: str = ""  # why --mode compiled does not apply ("" : it does)
    epochs: bool = False  # timed over whole epochs of a variable-length corpus (seed 003's rule for NLP)
    seq_len: int = 0  # default max sequence (bert) / sentence (transformer) length
    corpus_size: int = 0  # default sequences / sentence pairs in the synthetic corpus
    unit: str = "images/s"  # what the figure counts
    optimizer: str = "momentum_sgd"  # its update rule (model_specs.OPTIMIZER_SETTINGS holds the rest)
    adversarial: bool = False  # CycleGAN's nature: generators and discriminators, each with its own optimizer
    #                            (two), paired inputs (domain A and B batches), one process, no autocast path

    @property
    def compilable(self) -> bool:
        return not self.compiled_not


_IMAGENET = dict(family="imagenet", layouts=ALL_LAYOUTS, data=("synthetic", "imagenet"))
CATALOGUE = (
    Model("resnet50", image_size=224, num_classes=1000, **_IMAGENET),
    Model("vgg16", image_size=224, num_classes=1000, **_IMAGENET),
    Model("arcface", image_size=112, num_classes=93431, **_IMAGENET),
    Model("se_resnext50", "seed003", 224, 1000, optimizer="momentum"),
    Model("deeplabv3p", "seed003", 769, 19, optimizer="momentum"),
    Model("bert", "seed003", 0, 0, compiled_not=RESHAPED, epochs=True, seq_len=512, corpus_size=4096,
          unit="sequences/s", optimizer="adamw"),
    Model("transformer", "seed003", 0, 0, compiled_not=RESHAPED, epochs=True, seq_len=256, corpus_size=20000,
          unit="tokens/s", optimizer="adam"),
    Model("cyclegan", "seed003", 256, 0, unit="samples/s", optimizer="adam", adversarial=True,
          compiled_not="its step runs the discriminators outside the network, with two optimizers"),
)
MODELS = {m.name: m for m in CATALOGUE}
NAMES = tuple(MODELS)
SEED003 = tuple(m.name for m in CATALOGUE if m.family == "seed003")
NLP = tuple(m.name for m in CATALOGUE if m.epochs)
IMAGENET = tuple(m.name for m in CATALOGUE if "imagenet" in m.data)
NHWC = tuple(m.name for m in CATALOGUE if "nhwc" in m.layouts)
NOT_COMPILABLE = {m.name: m.compiled_not for m in CATALOGUE if m.compiled_not}
ADVERSARIAL = tuple(m.name for m in CATALOGUE if m.adversarial)
UNIT = {m.name: m.unit for m in CATALOGUE if m.unit != "images/s"}
