"""scripts/harness/models_{torch,paddle}.py (the ImageNet networks: {torch,paddle}_imagenet.py): the same three
networks, layer for layer, in both frameworks.

Counts at 1000 classes are taken on torch's meta device / under paddle.LazyGuard (no storage, instant); every
model is also built for real (10 classes), run forward + backward on a tiny batch in train mode, and then -- with
the torch weights copied into the Paddle model -- must give the same eval-mode loss in both frameworks (and in
Paddle's NHWC layout). Skipped where a framework is not installed.
"""

from __future__ import annotations

import ast
import gc
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import pytest

HARNESS = Path(__file__).resolve().parents[1] / "scripts" / "harness"

RESNET50 = 25_557_032
VGG16 = 138_357_544
RESNET50_FC = 2048 * 1000 + 1000
VGG16_LAST_FC = 4096 * 1000 + 1000


def _load(name: str):
    if str(HARNESS) not in sys.path:  # the model modules import their siblings by name, as on a host
        sys.path.insert(0, str(HARNESS))
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HARNESS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture(scope="module")
def mt():
    module = _load("models_torch")
    import torch

    torch.manual_seed(0)
    return module


@pytest.fixture(scope="module")
def mp():
    module = _load("models_paddle")
    import paddle

    paddle.seed(0)
    paddle.set_device("cpu")
    return module


def expected(name: str, num_classes: int, embedding_size: int = 512) -> int:
    if name == "resnet50":
        return RESNET50 - RESNET50_FC + 2048 * num_classes + num_classes
    if name == "vgg16":
        return VGG16 - VGG16_LAST_FC + 4096 * num_classes + num_classes
    # arcface: trunk without fc, BN1d(2048), FC 2048->emb (bias), BN1d(emb), margin weight emb x classes (no bias)
    return RESNET50 - RESNET50_FC + 2 * 2048 + 2048 * embedding_size + embedding_size + 2 * embedding_size \
        + embedding_size * num_classes


def count_torch(mt, name: str, **kwargs) -> int:
    import torch

    with torch.device("meta"):
        return mt.count_params(mt.build_model(name, **kwargs))


def count_paddle(mp, name: str, **kwargs) -> int:
    import paddle

    with paddle.LazyGuard():
        return mp.count_params(mp.build_model(name, **kwargs))


# ---------------------------------------------------------------- parameter counts
def test_expected_formula_matches_the_published_figures():
    assert expected("resnet50", 1000) == RESNET50
    assert expected("vgg16", 1000) == VGG16
    assert expected("arcface", 1000) == 25_074_240


@pytest.mark.parametrize("name, count", [("resnet50", RESNET50), ("vgg16", VGG16)])
def test_torch_counts_at_1000_classes(mt, name, count):
    assert count_torch(mt, name) == count


@pytest.mark.parametrize("name, count", [("resnet50", RESNET50), ("vgg16", VGG16)])
def test_paddle_counts_at_1000_classes(mp, name, count):
    assert count_paddle(mp, name) == count


@pytest.mark.parametrize("num_classes, embedding_size", [(1000, 512), (93_431, 512), (7, 128)])
def test_arcface_counts_follow_the_formula_in_both_frameworks(mt, mp, num_classes, embedding_size):
    kwargs = {"num_classes": num_classes, "embedding_size": embedding_size}
    torch_count = count_torch(mt, "arcface", **kwargs)
    assert torch_count == count_paddle(mp, "arcface", **kwargs)
    assert torch_count == expected("arcface", num_classes, embedding_size)


def test_paddle_count_leaves_out_batchnorm_running_statistics(mp):
    from paddle import nn

    bn = nn.BatchNorm2D(4)
    assert sum(int(np.prod(p.shape)) for p in bn.parameters()) == 16  # weight, bias, _mean, _variance
    assert mp.count_params(bn) == 8


def test_cli_prints_the_three_counts(mt, mp, capsys):
    assert mt.main([]) == 0
    assert mp.main([]) == 0
    lines = capsys.readouterr().out.split()
    for framework in ("torch", "paddle"):
        assert f"{framework} resnet50 {RESNET50}".split() in _triples(lines)
        assert f"{framework} vgg16 {VGG16}".split() in _triples(lines)
        assert f"{framework} arcface {expected('arcface', 1000)}".split() in _triples(lines)


def _triples(words: list[str]) -> list[list[str]]:
    return [words[i:i + 3] for i in range(0, len(words) - 2, 3)]


# ---------------------------------------------------------------- argument checks
@pytest.mark.parametrize("framework", ["torch", "paddle"])
def test_bad_arguments_raise_value_error(framework, request):
    module = request.getfixturevalue("mt" if framework == "torch" else "mp")
    specs = _load("model_specs")
    assert specs.MODELS[:3] == specs.IMAGENET_MODELS == ("resnet50", "vgg16", "arcface")
    assert specs.MODELS[3:] == specs.SEED003_MODELS == ("se_resnext50", "deeplabv3p", "bert", "transformer", "cyclegan")
    with pytest.raises(ValueError, match="resnet18"):
        module.build_model("resnet18")
    with pytest.raises(ValueError, match="num_classes"):
        module.build_model("resnet50", num_classes=0)
    with pytest.raises(ValueError, match="embedding_size"):
        module.build_model("arcface", embedding_size=0)
    with pytest.raises(ValueError, match="data_format"):
        module.build_model("vgg16", data_format="NCWH")


# ---------------------------------------------------------------- real builds: train step + cross-framework loss
SIZES = {"resnet50": 32, "vgg16": 32, "arcface": 64}
CLASSES = 10


def first_conv(net):
    return net.features[0].weight if hasattr(net, "features") else net.trunk.conv1.weight


def copy_torch_into_paddle(torch_net, paddle_net) -> None:
    """Paddle names match torch's except BN statistics; 2-D weights (Linear, margin) are stored transposed."""
    source = torch_net.state_dict()
    state = {}
    for key, value in paddle_net.state_dict().items():
        array = source[key.replace("._mean", ".running_mean").replace("._variance", ".running_var")].numpy()
        array = array.T if array.ndim == 2 else array
        assert list(array.shape) == list(value.shape), key
        state[key] = np.ascontiguousarray(array)  # numpy in set_state_dict: one copy, not two
    assert {k for k in source if not k.endswith("num_batches_tracked")} == {
        k.replace("._mean", ".running_mean").replace("._variance", ".running_var") for k in state
    }
    paddle_net.set_state_dict(state)


def paddle_train_step(mp, name: str, data_format: str, images: np.ndarray, labels: np.ndarray):
    import paddle

    net = mp.build_model(name, num_classes=CLASSES, data_format=data_format)
    assert mp.count_params(net) == expected(name, CLASSES)
    if data_format == "NHWC":
        images = images.transpose(0, 2, 3, 1)
    net.train()
    loss = net(paddle.to_tensor(np.ascontiguousarray(images)), paddle.to_tensor(labels))
    assert loss.shape == [] and math.isfinite(float(loss))
    loss.backward()
    grad = first_conv(net).grad
    assert grad is not None and np.isfinite(grad.numpy()).all() and float(grad.abs().sum()) > 0
    net.clear_gradients()
    return net


@pytest.mark.parametrize("name", ["resnet50", "vgg16", "arcface"])
def test_train_step_and_same_loss_in_both_frameworks(mt, mp, name):
    import paddle
    import torch

    size = SIZES[name]
    rng = np.random.default_rng(1)
    images = rng.standard_normal((2, 3, size, size), dtype=np.float32)
    labels = np.array([3, 7], dtype=np.int64)

    # torch: forward + backward in channels-last (what data_format="NHWC" means in torch), then eval-mode loss
    tnet = mt.build_model(name, num_classes=CLASSES, data_format="NHWC")
    assert mt.count_params(tnet) == expected(name, CLASSES)
    assert first_conv(tnet).is_contiguous(memory_format=torch.channels_last)
    tnet.train()
    loss = tnet(torch.from_numpy(images).to(memory_format=torch.channels_last), torch.from_numpy(labels))
    assert loss.dim() == 0 and torch.isfinite(loss)
    loss.backward()
    grad = first_conv(tnet).grad
    assert grad is not None and torch.isfinite(grad).all() and grad.abs().sum() > 0
    tnet.eval()
    with torch.no_grad():
        torch_loss = float(tnet(torch.from_numpy(images), torch.from_numpy(labels)))

    # paddle, both layouts: forward + backward, then the torch weights -> the same eval-mode loss
    for data_format in ("NCHW", "NHWC"):
        if data_format == "NCHW" or name == "resnet50":  # NHWC backward once: a VGG16 backward costs ~2 s
            pnet = paddle_train_step(mp, name, data_format, images, labels)
        else:
            pnet = mp.build_model(name, num_classes=CLASSES, data_format=data_format)
        copy_torch_into_paddle(tnet, pnet)
        pnet.eval()
        feed = images if data_format == "NCHW" else images.transpose(0, 2, 3, 1)
        with paddle.no_grad():
            paddle_loss = float(pnet(paddle.to_tensor(np.ascontiguousarray(feed)), paddle.to_tensor(labels)))
        assert paddle_loss == pytest.approx(torch_loss, rel=1e-4, abs=1e-4), data_format
        del pnet
        gc.collect()

    with pytest.raises(ValueError, match="NCHW"):  # an NHWC-shaped tensor is refused by torch, with the reason
        tnet(torch.from_numpy(images.transpose(0, 2, 3, 1).copy()), torch.from_numpy(labels))


def test_arcface_target_logit_gets_the_angular_margin(mt, mp):
    """Direct check of the head: target = s*cos(theta+m) (or the fallback), others = s*cos(theta)."""
    import paddle
    import torch

    rng = np.random.default_rng(2)
    thead = _load("torch_imagenet").ArcMarginHead(8, 5)
    weight = thead.weight.detach().numpy()  # torch: [classes, embedding]
    unit_weight = weight / np.linalg.norm(weight, axis=1, keepdims=True)
    embedding = rng.standard_normal((4, 8), dtype=np.float32)
    labels = np.array([0, 1, 2, 4], dtype=np.int64)
    # sample 0 at cos = -0.95 to its class: theta + m would pass pi, so insightface's fallback applies there
    other = embedding[0] - (embedding[0] @ unit_weight[0]) * unit_weight[0]
    embedding[0] = -0.95 * unit_weight[0] + math.sqrt(1 - 0.95**2) * other / np.linalg.norm(other)

    cos = (embedding / np.linalg.norm(embedding, axis=1, keepdims=True)) @ unit_weight.T
    assert cos[0, 0] == pytest.approx(-0.95, abs=1e-5)
    margin = np.cos(np.arccos(np.clip(cos, -1, 1)) + 0.5)
    phi = np.where(cos > math.cos(math.pi - 0.5), margin, cos - math.sin(math.pi - 0.5) * 0.5)
    want = 64.0 * np.where(np.eye(5, dtype=bool)[labels], phi, cos)

    got_torch = thead(torch.from_numpy(embedding), torch.from_numpy(labels)).detach().numpy()
    np.testing.assert_allclose(got_torch, want, rtol=1e-4, atol=1e-3)

    phead = _load("paddle_imagenet").ArcMarginHead(8, 5)
    phead.weight.set_value(paddle.to_tensor(np.ascontiguousarray(weight.T)))
    got_paddle = phead(paddle.to_tensor(embedding), paddle.to_tensor(labels)).numpy()
    np.testing.assert_allclose(got_paddle, want, rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- self-contained
FRAMEWORK_MODULES = ("models_{}", "{}_layers", "{}_imagenet", "{}_seed003", "{}_trainer")
NEUTRAL_MODULES = {"model_specs", "trainer", "catalogue"}  # standard library only: what both frameworks share


@pytest.mark.parametrize("framework", ["torch", "paddle"])
def test_model_modules_import_only_stdlib_numpy_and_their_framework(framework):
    """Each framework's model and step modules: the standard library, numpy, the framework, each other and the
    framework-neutral modules -- never the other framework nor the kit."""
    own = {pattern.format(framework) for pattern in FRAMEWORK_MODULES}
    for name in sorted(own | NEUTRAL_MODULES):
        tree = ast.parse((HARNESS / f"{name}.py").read_text())
        roots = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                roots |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                roots.add((node.module or "").split(".")[0])
        assert "kit" not in roots
        allowed = set(sys.stdlib_module_names) | NEUTRAL_MODULES | {"numpy"}
        if name not in NEUTRAL_MODULES:
            allowed |= own | {framework}
        assert roots <= allowed, (name, roots - allowed)


@pytest.mark.parametrize("module", ["torch_imagenet", "paddle_imagenet"])
def test_an_unknown_imagenet_model_is_an_error_not_arcface(module):
    """The ImageNet-family builders name their three models; any other name was built as ArcFace."""
    build = _load(module).build
    with pytest.raises(ValueError, match=r"no ImageNet-family model 'resnet51' in this module \(resnet50, vgg16, "
                                         r"arcface\)"):
        build("resnet51", 10, "NCHW", 8)


def test_cyclegans_nature_is_on_its_catalogue_row_not_in_name_branches():
    """One process, two optimizers, paired inputs, no autocast path: the catalogue's `adversarial` says it once; the
    harness asks the row, and only the model's own definitions (and its publisher's settings) name it."""
    from kit.core.catalogue import harness

    assert [m.name for m in harness.CATALOGUE if m.adversarial] == ["cyclegan"]
    own = {"catalogue.py", "model_specs.py", "torch_seed003.py", "paddle_seed003.py"}
    named = [f"{p.name}:{i}" for p in sorted(HARNESS.glob("*.py")) if p.name not in own
             for i, line in enumerate(p.read_text().splitlines(), 1) if '"cyclegan"' in line]
    assert named == []
