"""Every figure of the seeds' tables is a suite reference, on the case the table names.

The tables below are typed by hand from the seed files in ../shared/seeds/ (the file is named above each), not
read by code: a suite row that drifts from its seed fails here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kit.config.suites import load_suite

# seed 000 (000_2bebc35fa2127610.txt), FleetX VGG16 baseline: "batch / node" x (1 x 1, 1 x 8, 2 x 8, 4 x 8)
SEED000_SHAPES = ((1, 1), (1, 8), (2, 8), (4, 8))
SEED000_FP32 = {32: (252.68, 1888.20, 2873.18, 5548.48),
                64: (261.33, 1980.04, 3900.12, 7617.47),
                128: (266.24, 2027.06, 4028.78, 7848.70)}
SEED000_AMP = {32: (407.69, 3332.17, 5136.50, 9544.81),
               64: (468.51, 3708.32, 7112.45, 14013.01),
               128: (512.02, 3892.58, 7618.34, 15219.57),
               256: (439.47, 3409.96, 6779.20, 13443.23)}
# the auto-parallel table (DistributedStrategy.auto = True, DALI on)
SEED000_AUTO = {32: (409.68, 3044.60, 4840.74, 7668.70),
                64: (455.98, 3395.67, 6525.20, 12237.04),
                128: (472.81, 3587.29, 7019.13, 13562.80),
                256: (407.88, 3154.15, 6217.92, 12147.46)}

# seed 004 (004_c5ab03129253aecb.txt), ResNet50 v1.5 batch 256: (framework, GPUs, precision) -> images/s; '-' left out
SEED004_V100 = {
    ("paddle", 1, "fp32"): 393.561, ("paddle", 8, "fp32"): 3019.361, ("paddle", 32, "fp32"): 10984.436,
    ("paddle", 1, "amp"): 1438.518, ("paddle", 8, "amp"): 10936.815, ("paddle", 32, "amp"): 39972.131,
    ("tensorflow", 1, "fp32"): 415.786, ("tensorflow", 8, "fp32"): 3273.03, ("tensorflow", 32, "fp32"): 12671.9,
    ("tensorflow", 1, "amp"): 1218.82, ("tensorflow", 8, "amp"): 9405.36, ("tensorflow", 32, "amp"): 33317.67,
    ("torch", 1, "fp32"): 370.194, ("torch", 8, "fp32"): 2791.98, ("torch", 32, "fp32"): 10523.32,
    ("torch", 1, "amp"): 790.033, ("torch", 8, "amp"): 5889.05, ("torch", 32, "amp"): 21259.81,
    ("mxnet", 1, "fp32"): 389.54, ("mxnet", 8, "fp32"): 2957.8,
    ("mxnet", 1, "amp"): 1471.9, ("mxnet", 8, "amp"): 10336,
}
SEED004_A100 = {
    ("paddle", 1, "fp32"): 908.244, ("paddle", 8, "fp32"): 5333.558,
    ("paddle", 1, "amp"): 2602.629, ("paddle", 8, "amp"): 17587.654,
    ("tensorflow", 1, "fp32"): 975.374, ("tensorflow", 1, "amp"): 2064.8,
    ("torch", 1, "fp32"): 924.989, ("torch", 8, "fp32"): 7020.9,
    ("torch", 1, "amp"): 1449.65, ("torch", 8, "amp"): 10744.6,
    ("mxnet", 1, "fp32"): 1015.8, ("mxnet", 8, "fp32"): 7848.2,
    ("mxnet", 1, "amp"): 3046.4, ("mxnet", 8, "amp"): 22690,
}
# the V100 MXNet FP32 figures run at batch 128, as the publisher's OtherReports/MXNet README states (seed 004's
# comparison table heads every column "BS=256")
V100_BATCH = {("mxnet", "fp32"): 128}

# seed 002 (002_80919e09aecdb16c.txt), DLPerf PLSC ArcFace, batch 128 FP32: (nodes, GPUs per node) -> samples/s
SEED002 = {(1, 1): 397.78, (1, 4): 1539.66, (1, 8): 2545.3, (2, 8): 5953.84, (4, 8): 11084.53}


def references(suite: str, impl: str | None = None) -> dict:
    return {(c.framework, c.model, c.batch_size, c.nodes, c.gpus_per_node, c.precision): c
            for c in load_suite(suite).cases if c.impl == "reference" and c.reference is not None}


@pytest.mark.parametrize(("precision", "table"),
                         [("fp32", SEED000_FP32), ("amp", SEED000_AMP), ("auto", SEED000_AUTO)])
def test_seed000_fleetx_vgg16_tables_are_v100_references(precision, table):
    refs = references("v100")
    for batch, row in table.items():
        for (nodes, gpus), value in zip(SEED000_SHAPES, row, strict=True):
            case = refs[("paddle", "vgg16", batch, nodes, gpus, precision)]
            assert case.reference.value == value and case.reference.unit == "samples/s", case.key
            assert "seed 000" in case.reference.source and case.repeats == 7  # the seed: the median of 7 runs
    fleetx = [k for k in refs if k[1] == "vgg16"]
    assert len(fleetx) == sum(len(t) * 4 for t in (SEED000_FP32, SEED000_AMP, SEED000_AUTO))  # 44: no other


@pytest.mark.parametrize(("suite", "table"), [("v100", SEED004_V100), ("a100", SEED004_A100)])
def test_seed004_resnet50_tables_are_references(suite, table):
    refs = references(suite)
    for (framework, gpus, precision), value in table.items():
        nodes, per_node = (4, 8) if gpus == 32 else (1, gpus)
        batch = V100_BATCH.get((framework, precision), 256) if suite == "v100" else 256
        case = refs[(framework, "resnet50", batch, nodes, per_node, precision)]
        assert case.reference.value == value, case.key
    resnet = {k for k in refs if k[1] == "resnet50" and k[2] in (128, 256)}
    assert len(resnet) == len(table)  # every ResNet50 reference of the suite is one of the seed's cells


def test_seed002_plsc_table_is_v100_references():
    refs = references("v100")
    for (nodes, gpus), value in SEED002.items():
        case = refs[("paddle", "arcface", 128, nodes, gpus, "fp32")]
        assert case.reference.value == value and case.precision == "fp32"


# seed 001 (001_35bd56ed9f798634.txt), comparison table: only the 1-GPU NGC cells carry figures
SEED001 = {("tensorflow", "fp32", 128): 398.257, ("torch", "fp32", 128): 355.69, ("mxnet", "fp32", 128): 376.18,
           ("tensorflow", "amp", 256): 985.466, ("torch", "amp", 256): 797.38, ("mxnet", "amp", 256): 1398.8}


def test_seed001_comparison_table_runs_in_seed001s_images():
    from kit.images.parity import cudnn_of, parity_warning

    suite = load_suite("seed001")
    refs = references("seed001")
    for (framework, precision, batch), value in SEED001.items():
        assert refs[(framework, "resnet50", batch, 1, 1, precision)].reference.value == value
    assert len(refs) == len(SEED001)
    assert {(c.gpus_per_node * c.nodes) for c in suite.cases} == {1, 8, 32}
    # the seed's own table: Paddle on cuDNN 7.6.5, the NGC images on 8.0.1 and 7.6.1 (seed 001's environment table)
    versions = cudnn_of(suite)
    assert {fw: (key, v) for fw, (key, v) in versions.items()} == {
        "paddle": ("paddle/seed001", "7.6.5"), "tensorflow": ("tensorflow/seed001", "8.0.1"),
        "torch": ("pytorch/seed001", "8.0.1"), "mxnet": ("mxnet/seed001", "7.6.1")}
    assert parity_warning(versions).startswith("cuDNN differs across the frameworks compared: mxnet 7.6.1")


def test_perf_family_ngc_pytorch_figures_are_v100_references_equal_to_the_claims():
    """The BERT and Transformer rows carry the published figures the claims file re-derives from their logs."""
    from kit.core.yamlio import load_yaml

    claims = load_yaml(Path(__file__).resolve().parent.parent / "kit/claims/perf-models.yaml")
    published = {}
    for claim in claims["logs"]:  # the one- and eight-GPU V100 logs (32 GPUs: NGC's multi-node runs, not rows here)
        name = str(claim["file"])
        if "OtherReports/PyTorch/logs/V100_LOG" in name and claim["gpus"] in (1, 8):
            published[name.rsplit("/", 1)[1]] = claim["published"]
    refs = references("v100")
    rows = {k: c.reference.value for k, c in refs.items() if k[1] in ("bert", "transformer")}
    assert sorted(rows.values()) == sorted(published.values())


# seed 003 (003_7f6cf1e964616475.txt), "GPU 单机单卡测试结果" (one V100, samples/s): model -> (Fluid 1.4.1, the other
# framework's figure, which framework that is: TensorFlow 1.12.0-rc2, PyTorch 1.1.0 for SE-ResNeXt50)
SEED003 = {"cyclegan": (7.3, 6.1, "TensorFlow"), "se_resnext50": (169.4, 153.1, "PyTorch"),
           "deeplabv3p": (12.8, 6.4, "TensorFlow"), "bert": (4.0, 3.4, "TensorFlow"),
           "transformer": (4.9, 4.7, "TensorFlow")}


def test_seed003_table_is_v100_harness_references_shown_not_checked():
    """Seed 003's figures came from Paddle's 2019 benchmark scripts, not the harness: unbounded, on 1 GPU FP32."""
    cases = [c for c in load_suite("v100").cases if c.model in SEED003 and c.impl == "harness"]
    seen = {}
    for case in cases:
        assert (case.nodes, case.gpus_per_node, case.precision) == (1, 1, "fp32")
        ref = case.reference
        assert ref is not None and not ref.bounded and ref.unit == "samples/s" and "seed 003" in ref.source
        seen[(case.model, case.framework)] = (ref.value, ref.source)
    assert len(seen) == 2 * len(SEED003)
    for model, (fluid, other, other_name) in SEED003.items():
        assert seen[(model, "paddle")][0] == fluid and "Fluid 1.4.1" in seen[(model, "paddle")][1]
        assert seen[(model, "torch")][0] == other and other_name in seen[(model, "torch")][1]
    for generation in ("a100", "h100"):  # the same rows, no seed 003 figure (V100 only); Lambda's BERT-base shown
        rows = {(c.model, c.framework) for c in load_suite(generation).cases if c.model in SEED003}
        refs = {(c.model, c.framework, r.source.split(",")[0]) for c in load_suite(generation).cases
                if c.model in SEED003 for r in c.references}
        assert rows == set(seen) and refs == {("bert", "torch", "Lambda deeplearning-benchmark@aa5addb6")}
