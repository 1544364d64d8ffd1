"""Suite YAML: the built-in matrices load and expand; bad input names file, line and key."""

from __future__ import annotations

import json

import pytest

from kit.config import reference, suites
from kit.config.cases import Case
from kit.core.layout import split_tag
from kit.core.yamlio import ConfigError
from kit.run.command import Placement, build_command

MINIMAL = """\
schema_version: 1
name: tiny
hardware: cpu
defaults: {warmup_steps: 1, measure_steps: 10, repeats: 2}
cases:
  - framework: [paddle, torch]
    model: resnet50
    batch_size: [2, 4]
    image_size: 32
    gpus_per_node: [1, 2]
"""


def write(tmp_path, text, name="suite.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_builtin_suites_load_and_mirror_the_seeds():
    assert {"local", "v100", "a100", "h100"} <= set(suites.available())
    v100 = suites.load_suite("v100")
    keys = {c.key for c in v100.cases}
    for fw in ("paddle", "torch", "paddleclas", "ngc-pytorch", "ngc-tensorflow"):
        amp = "amp-nhwc" if fw in ("paddle", "torch") else "amp"  # the harness's AMP is channels-last on GPUs
        for prec in ("fp32", amp):
            for case in ("1n1g", "1n8g", "4n8g"):
                assert f"{fw}/resnet50/bz256/{case}/{prec}" in keys
    for fw in ("paddle", "torch", "ngc-tensorflow"):
        amp = "amp" if fw == "ngc-tensorflow" else "amp-nhwc"
        assert {f"{fw}/resnet50/bz128/1n8g/{prec}" for prec in ("fp32", amp)} <= keys
    assert "ngc-mxnet/resnet50/bz128/1n1g/fp32" in keys and "ngc-mxnet/resnet50/bz256/1n8g/amp" in keys
    for bs in (32, 64, 128):
        assert {f"paddle/vgg16/bz{bs}/1n8g/fp32", f"fleetx/vgg16/bz{bs}/1n1g/amp", f"fleetx/vgg16/bz{bs}/4n8g/fp32"} <= keys
    assert "torch/vgg16/bz256/1n1g/amp-nhwc" in keys and "torch/vgg16/bz256/1n1g/fp32" not in keys
    assert {f"paddle/arcface/bz128/1n{g}g/fp32" for g in (1, 4, 8)} <= keys
    assert {f"plsc/arcface/bz128/{c}/fp32" for c in ("1n1g", "1n4g", "1n8g", "2n8g", "4n8g")} <= keys
    by_key = {c.key: c for c in v100.cases}
    ref = by_key["paddleclas/resnet50/bz256/1n1g/fp32"].reference
    assert ref.value == 393.561 and ref.unit == "samples/s" and ref.holds(393.0) and not ref.holds(350.0)
    assert by_key["plsc/arcface/bz128/2n8g/fp32"].reference.value == 5953.84
    # figures of the published programs; on harness rows only seed 003's, shown and never checked (unbounded)
    assert all(c.reference is None or not c.reference.bounded for c in v100.cases if c.impl == "harness")
    tf = by_key["ngc-tensorflow/resnet50/bz256/1n1g/fp32"]
    assert (tf.framework, tf.impl, tf.runner) == ("tensorflow", "reference", "reference")
    assert by_key["paddle/arcface/bz128/1n1g/fp32"].image_size == 112
    assert all(c.repeats == (7 if c.log_framework == "fleetx" else 5) and c.warmup_steps == 20  # seed 000: 7 runs
               and c.measure_steps == 100 for c in v100.cases)
    assert {f"fleetx/vgg16/bz{bs}/2n8g/{p}" for bs in (32, 64, 128) for p in ("fp32", "amp")} <= keys
    assert {f"fleetx/vgg16/bz256/{c}/amp" for c in ("1n1g", "1n8g", "2n8g", "4n8g")} <= keys
    perf_family = {k for k in keys if k.startswith(("ngc-pytorch-bert/", "ngc-pytorch-transformer/"))}
    assert len(perf_family) == 8  # PaddlePaddle/Perf's BERT and Transformer, NGC PyTorch side: V100 only
    keys -= perf_family
    # Ampere and later: each harness FP32 row also runs tf32 (the frameworks' default there, the seeds' "FP32")
    harness_fp32 = {c.key for c in v100.cases if c.impl == "harness" and c.precision == "fp32"
                    and c.model in ("resnet50", "vgg16", "arcface")}
    keys |= {k.removesuffix("/fp32") + "/tf32" for k in harness_fp32}
    assert {c.key for c in suites.load_suite("h100").cases} == keys
    mxnet_fp32 = {f"ngc-mxnet/resnet50/bz{{}}/{c}/fp32" for c in ("1n1g", "1n8g")}
    a100 = {c.key for c in suites.load_suite("a100").cases}  # seed 004's A100 MXNet FP32 ran at batch 256
    assert a100 == keys - {k.format(128) for k in mxnet_fp32} | {k.format(256) for k in mxnet_fp32}


def test_local_suite_is_cpu_paddle_and_torch_harness_only():
    local = suites.load_suite("local")
    assert local.hardware == "cpu"
    assert {c.framework for c in local.cases} == {"paddle", "torch"}
    assert {c.model for c in local.cases} == {"resnet50", "vgg16", "arcface"}
    assert all(c.impl == "harness" and c.repeats >= 3 and c.nodes == 1 for c in local.cases)


def test_lists_expand_to_the_cartesian_product(tmp_path):
    suite = suites.load_suite(write(tmp_path, MINIMAL))
    assert len(suite.cases) == 2 * 2 * 2
    case = suite.cases[0]
    assert (case.warmup_steps, case.measure_steps, case.repeats, case.num_classes) == (1, 10, 2, 1000)
    assert case.log_path(2).as_posix() == "paddle/resnet50/bz2/1n1g/resnet50_b2_fp32_2.log"
    assert {c.global_batch for c in suite.cases} == {2, 4, 8}


@pytest.mark.parametrize(
    ("old", "new", "line", "key", "words"),
    [
        ("    model: resnet50\n", "    model: resnet51\n", 7, "model", "not one of"),
        ("    batch_size: [2, 4]\n", "    batch_size: 0\n", 8, "batch_size", ">= 1"),
        ("    image_size: 32\n", "    colour: blue\n", 9, "colour", "unknown key"),
        ("  - framework: [paddle, torch]\n", "  - framework: tensorflow\n    impl: harness\n", 7, "impl",
         "harness runs paddle, torch"),
        ("    model: resnet50\n", "    model: vgg16\n    impl: reference\n", 8, "impl",
         "no reference implementation for torch/vgg16"),
        ("  - framework: [paddle, torch]\n    model: resnet50\n", "  - framework: mxnet\n    model: arcface\n", 6,
         "framework", "no reference implementation for mxnet/arcface; there are: paddle/resnet50 (paddleclas)"),
        ("  - framework: [paddle, torch]\n    model: resnet50\n",
         "  - framework: paddle\n    model: arcface\n    impl: reference\n    precision: amp\n", 8, "impl",
         "DLPerf published FP32 runs only"),
        ("    image_size: 32\n", "    impl: ngc\n", 9, "impl", "not one of harness, reference"),
        ("    image_size: 32\n", "    precision: [fp32, fp32]\n", 9, "precision", "listed twice"),
        ("    image_size: 32\n", "    repeats: yes\n", 9, "repeats", "expected an integer"),
        ("    batch_size: [2, 4]\n", "", 6, "batch_size", "missing required key"),
    ],
)
def test_bad_case_values_name_file_line_and_key(tmp_path, old, new, line, key, words):
    path = write(tmp_path, MINIMAL.replace(old, new))
    with pytest.raises(ConfigError) as err:
        suites.load_suite(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: {key}: ") and words in message, message


def test_reference_must_select_a_case_and_bounds_are_relative(tmp_path):
    ref = "    references:\n      - {gpus_per_node: 8, value: 10, lower: -0.1, upper: 0.1, unit: samples/s}\n"
    with pytest.raises(ConfigError, match="selects no case"):
        suites.load_suite(write(tmp_path, MINIMAL + ref))
    bad = ref.replace("gpus_per_node: 8", "gpus_per_node: 2").replace("lower: -0.1", "lower: 0.1")
    with pytest.raises(ConfigError, match="lower bound must be <= 0"):
        suites.load_suite(write(tmp_path, MINIMAL + bad))
    good = ref.replace("gpus_per_node: 8", "gpus_per_node: 2, framework: torch, batch_size: 4")
    suite = suites.load_suite(write(tmp_path, MINIMAL + good))
    with_ref = [c for c in suite.cases if c.reference]
    assert [c.key for c in with_ref] == ["torch/resnet50/bz4/1n2g/fp32"]
    assert with_ref[0].reference.bounds() == pytest.approx((9.0, 11.0))


def test_duplicate_cases_and_top_level_errors(tmp_path):
    twice = MINIMAL + "  - {framework: torch, model: resnet50, batch_size: 2, image_size: 32}\n"
    with pytest.raises(ConfigError, match="also comes from the entry at line 6"):
        suites.load_suite(write(tmp_path, twice))
    with pytest.raises(ConfigError, match="unsupported schema_version 2"):
        suites.load_suite(write(tmp_path, MINIMAL.replace("schema_version: 1", "schema_version: 2")))
    with pytest.raises(ConfigError, match="malformed YAML"):
        suites.load_suite(write(tmp_path, MINIMAL + "  - [unclosed\n"))
    with pytest.raises(ConfigError, match="no built-in suite of that name; known: .*local"):
        suites.load_suite("nosuch")


def test_command_builder_single_and_data_parallel(tmp_path):
    suite = suites.load_suite(write(tmp_path, MINIMAL))
    by_key = {c.key: c for c in suite.cases}
    one = build_command(by_key["torch/resnet50/bz2/1n1g/fp32"], python="py", harness="h.py", threads=2)
    assert one.argv[:2] == ["py", "h.py"] and "--batch-size" in one.argv and one.env["OMP_NUM_THREADS"] == "2"
    two = build_command(by_key["torch/resnet50/bz2/1n2g/fp32"], Placement(master_port=1234), python="py",
                        harness="h.py", threads=1)
    assert two.argv[:3] == ["py", "-m", "torch.distributed.run"]
    assert two.argv[two.argv.index("--nproc_per_node") + 1] == "2"
    assert two.argv[two.argv.index("--master_port") + 1] == "1234"
    paddle = build_command(by_key["paddle/resnet50/bz4/1n2g/fp32"], python="py", harness="h.py", threads=1,
                           launcher_log_dir="/tmp/x y")
    assert paddle.argv[:3] == ["py", "-m", "paddle.distributed.launch"] and "--master" not in paddle.argv
    assert paddle.env["FLAGS_paddle_num_threads"] == "1"
    assert "'/tmp/x y'" in paddle.shell()
    case = Case(**{**by_key["paddle/resnet50/bz4/1n2g/fp32"].__dict__, "nodes": 2})
    remote = build_command(case, Placement(nnodes=2, node_rank=1, master_addr="10.0.0.1", master_port=7000,
                                           socket_ifname="eth0"), harness="h.py")
    assert remote.argv[remote.argv.index("--master") + 1] == "10.0.0.1:7000"
    assert remote.argv[remote.argv.index("--rank") + 1] == "1"
    assert remote.env["GLOO_SOCKET_IFNAME"] == "eth0" == remote.env["NCCL_SOCKET_IFNAME"]
    with pytest.raises(ValueError, match="needs 2 node"):
        build_command(case, Placement(), harness="h.py")


def test_reference_cases_log_under_their_implementation_and_select_references(tmp_path):
    text = MINIMAL.replace("  - framework: [paddle, torch]\n", "  - framework: [paddle, torch]\n    impl: [harness, reference]\n")
    ref = ("    references:\n      - {impl: reference, framework: torch, batch_size: 4, gpus_per_node: 2, value: 10, "
           "lower: -0.1, upper: 0.1, unit: samples/s}\n")
    suite = suites.load_suite(write(tmp_path, text + ref))
    by_key = {c.key: c for c in suite.cases}
    assert len(suite.cases) == 16 and {c.log_framework for c in suite.cases} == {"paddle", "torch", "paddleclas",
                                                                                  "ngc-pytorch"}
    case = by_key["ngc-pytorch/resnet50/bz4/1n2g/fp32"]
    assert case.log_path(3).as_posix() == "ngc-pytorch/resnet50/bz4/1n2g/resnet50_b4_fp32_3.log"
    assert case.reference.value == 10 and by_key["torch/resnet50/bz4/1n2g/fp32"].reference is None
    assert case.to_dict()["implementation"] == "ngc-pytorch" and case.to_dict()["impl"] == "reference"
    assert case.ref_job() == reference.RefJob("torch", "resnet50", "fp32", 4, 2, 1)
    with pytest.raises(ConfigError, match=r":8: impl: NGC MXNet: the publisher ran one node only"):
        suites.load_suite(write(tmp_path, MINIMAL.replace("[paddle, torch]", "mxnet").replace(
            "    batch_size: [2, 4]\n", "    impl: reference\n    nodes: 2\n    batch_size: [2, 4]\n"), "mx.yaml"))


def test_auto_is_fleetx_auto_parallel_mode_only(tmp_path):
    """precision: auto names FleetX's auto-parallel mode (seed 000): its program takes it, nothing else does."""
    fleetx = ("schema_version: 1\nname: fx\ndescription: d\nhardware: gpu\ncases:\n"
              "  - {framework: paddle, impl: reference, model: vgg16, precision: auto, batch_size: 32}\n")
    (case,) = suites.load_suite(write(tmp_path, fleetx, "fx.yaml")).cases
    assert case.key == "fleetx/vgg16/bz32/1n1g/auto" and case.log_path(1).name == "vgg16_b32_auto_1.log"
    with pytest.raises(ConfigError, match=r"fx2.yaml:6: .*precision auto is a published program's mode .*harness "
                                          r"runs fp32, tf32, amp, bf16"):
        suites.load_suite(write(tmp_path, fleetx.replace("impl: reference, ", ""), "fx2.yaml"))
    with pytest.raises(ConfigError, match=r"precision 'auto': PaddleClas runs fp32, amp"):
        suites.load_suite(write(tmp_path, fleetx.replace("vgg16", "resnet50"), "fx3.yaml"))


@pytest.mark.parametrize("name", ["../escaped/x", "/tmp/abs", "a/b", ".hidden", "-flag", "", "x" * 101])
def test_a_suite_name_is_a_plain_name(tmp_path, name):
    path = write(tmp_path, MINIMAL.replace("name: tiny\n", f"name: {json.dumps(name)}\n", 1))
    with pytest.raises(ConfigError) as err:
        suites.load_suite(path)
    assert str(err.value).startswith(f"{path}:") and ": name: " in str(err.value), str(err.value)


def test_a_hostile_suite_name_creates_nothing_outside_the_runs_dir(tmp_path, capsys):
    from kit.cli import main

    path = write(tmp_path, MINIMAL.replace("name: tiny\n", "name: ../escaped/x\n", 1))
    assert main(["bench", "--suite", str(path), "--runs-dir", str(tmp_path / "runs")]) == 2
    assert "must be a plain name" in capsys.readouterr().err
    assert not (tmp_path / "escaped").exists()


@pytest.mark.parametrize(("old", "new", "line", "key", "words"), [
    ("    image_size: 32\n", "    repeats: 100000000\n", 9, "repeats", "<= 1000, got 100000000"),
    ("    batch_size: [2, 4]\n", "    batch_size: 10000000\n", 8, "batch_size", "<= 65536"),
    ("    image_size: 32\n", "    measure_steps: 100000000\n", 9, "measure_steps", "<= 10000000"),
    ("    image_size: 32\n", "    warmup_steps: 100000000\n", 9, "warmup_steps", "<= 1000000"),
    ("    image_size: 32\n", "    timeout_s: .inf\n", 9, "timeout_s", "<= 604800, got inf"),
    ("    image_size: 32\n", "    timeout_s: .nan\n", 9, "timeout_s", "got nan"),
    ("    image_size: 32\n", "    repeats: 1000\n    precision: [fp32, amp]\n", 6, "cases", "more than 10000 runs"),
    ("    image_size: 32\n", f"    measure_steps: [{', '.join(map(str, range(1, 400)))}]\n"
     f"    warmup_steps: [{', '.join(map(str, range(400)))}]\n", 6, "cases", "expand to 1276800 cases"),
])
def test_repeats_steps_batch_and_timeouts_are_bounded(tmp_path, old, new, line, key, words):
    path = write(tmp_path, MINIMAL.replace(old, new))
    with pytest.raises(ConfigError) as err:
        suites.load_suite(path)
    assert str(err.value).startswith(f"{path}:{line}: {key}: ") and words in str(err.value)


# ---- image: a docker/pins.yaml image per suite (defaults) or case (issue 20) --------------------

SEED_SUITE = """\
schema_version: 1
name: seeds
hardware: gpu
defaults: {repeats: 1, image: seed001}
cases:
  - {framework: paddle, model: resnet50, batch_size: 128, impl: reference}
  - {framework: tensorflow, model: resnet50, batch_size: 128}
  - {framework: paddle, model: arcface, batch_size: 128, image: paddle/seed002, impl: reference}
  - {framework: torch, model: resnet50, batch_size: 64}
"""


def test_image_key_from_defaults_and_case(tmp_path):
    suite = suites.load_suite(write(tmp_path, SEED_SUITE))
    assert [c.image for c in suite.cases] == ["seed001", "seed001", "paddle/seed002", "seed001"]
    assert suite.cases[2].to_dict()["image"] == "paddle/seed002"
    plain = suites.load_suite(write(tmp_path, MINIMAL, "plain.yaml"))
    assert all(c.image is None and "image" not in c.to_dict() for c in plain.cases)  # unchanged without image:


@pytest.mark.parametrize(
    ("old", "new", "line", "words"),
    [
        ("image: paddle/seed002", "image: paddle/seed009", 8, "no image 'paddle/seed009'"),
        ("image: paddle/seed002", "image: pytorch/seed001", 8, "is the pytorch image, not paddle's"),
        ("image: seed001}", "image: seed002}", 4, "no image 'tensorflow/seed002'"),
        ("image: paddle/seed002", "image: 7", 8, "expected a string"),
    ],
)
def test_unknown_image_names_file_line_and_key(tmp_path, old, new, line, words):
    path = write(tmp_path, SEED_SUITE.replace(old, new))
    with pytest.raises(ConfigError) as err:
        suites.load_suite(path)
    message = str(err.value)
    assert message.startswith(f"{path}:{line}: image: ") and words in message, message


GPU_IMAGENET = """\
schema_version: 1
name: {name}
hardware: gpu
defaults: {{warmup_steps: 1, measure_steps: 10, repeats: 1, data: imagenet}}
cases:
  - framework: torch
    model: resnet50
    precision: amp
    batch_size: 256
"""


def test_an_imagenet_case_decodes_on_the_gpu_by_default_and_a_other_loader_is_named(tmp_path):
    path = write(tmp_path, GPU_IMAGENET.format(name="g") + "    loader: [gpu, cpu]\n")
    default, cpu = suites.load_suite(path).cases
    assert (default.loader, default.tag) == ("gpu", "amp-nhwc")
    assert (cpu.loader, cpu.tag, cpu.key) == ("cpu", "amp-nhwc-cpuload", "torch/resnet50/bz256/1n1g/amp-nhwc-cpuload")
    assert cpu.log_path(1).name == "resnet50_b256_amp-nhwc-cpuload_1.log"
    assert split_tag(cpu.tag) == {"precision": "amp", "layout": "nhwc", "loader": "cpu"}
    argv = build_command(cpu, data_list="/data/train_list.txt").argv
    assert argv[argv.index("--loader") + 1] == "cpu" and argv[argv.index("--data") + 1] == "/data/train_list.txt"
    cpu_suite = suites.load_suite(write(tmp_path, MINIMAL.replace("image_size: 32", "image_size: 32\n    data: imagenet")))
    assert {c.loader for c in cpu_suite.cases} == {"cpu"} and all("load" not in c.tag for c in cpu_suite.cases)
    synthetic = suites.load_suite(write(tmp_path, MINIMAL))
    assert {c.loader for c in synthetic.cases} == {None}
    assert "--loader" not in build_command(synthetic.cases[0]).argv


@pytest.mark.parametrize("text, line, words", [
    (MINIMAL + "    loader: gpu\n", 11, "loader applies to data: imagenet"),
    (MINIMAL.replace("image_size: 32", "image_size: 32\n    data: imagenet") + "    loader: dali\n", 12,
     "loader dali decodes on a GPU; this is a CPU suite"),
    (MINIMAL + "    loader: nvjpeg\n", 11, "'nvjpeg' is not one of cpu, gpu, dali"),
    (GPU_IMAGENET.format(name="g").replace("framework: torch", "framework: tensorflow") + "    loader: cpu\n", 10,
     "loader is the published program's own"),
])
def test_a_loader_where_it_does_not_apply_names_file_line_and_key(tmp_path, text, line, words):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        suites.load_suite(path)
    assert str(err.value).startswith(f"{path}:{line}: loader: ") and words in str(err.value), str(err.value)


def test_loader_dali_is_refused_at_plan_time_where_the_image_pins_no_dali(tmp_path):
    from kit.run import plan

    suite = suites.load_suite(write(tmp_path, GPU_IMAGENET.format(name="h100") + "    loader: [gpu, dali]\n"))
    gpu, dali = suite.cases
    assert plan.image_refusal(gpu, suite) is None
    why = plan.image_refusal(dali, suite)
    assert why.startswith("loader dali: the harness reads JPEGs with NVIDIA DALI; image ") and "pins no DALI" in why
    runs, skipped = plan.plan(suite, str(tmp_path))
    assert [r.case.key for r in runs] == [gpu.key] and [(c.key, w) for c, w in skipped] == [(dali.key, why)]


REFS = """\
    references:
      - {value: 900, lower: -0.05, upper: 0.05, unit: samples/s, source: "seed 004"}
      - {value: 1898, lower: null, upper: null, unit: images/s, source: "Lambda 1x H100", batch: 640,
         container: "NGC pytorch 22.09", date: "2024-02-05", math: tf32}
      - {value: 938, lower: null, upper: null, unit: images/s, source: "DLE README"}
"""


def test_a_case_takes_one_bounded_reference_and_any_number_shown(tmp_path):
    text = GPU_IMAGENET.format(name="g").replace("precision: amp", "precision: fp32") + REFS
    case, = suites.load_suite(write(tmp_path, text)).cases
    assert [r.source for r in case.references] == ["seed 004", "Lambda 1x H100", "DLE README"]
    assert case.reference.source == "seed 004"  # the one checked
    assert case.references[1].described() == "Lambda 1x H100 (batch 640, NGC pytorch 22.09, 2024-02-05)"
    assert case.to_dict()["references"][1] == {"value": 1898.0, "lower": None, "upper": None, "unit": "images/s",
                                               "source": "Lambda 1x H100", "math": "tf32", "batch": 640,
                                               "container": "NGC pytorch 22.09", "date": "2024-02-05"}
    twice = text.replace("lower: null, upper: null, unit: images/s, source: \"DLE", "lower: -0.1, upper: 0.1, "
                         "unit: images/s, source: \"DLE")
    with pytest.raises(ConfigError, match="has two bounded references"):
        suites.load_suite(write(tmp_path, twice))
    for bad, key in (('date: "2024-02-05"', 'date: "Feb 2024"'), ("batch: 640", "batch: 0")):
        with pytest.raises(ConfigError) as err:
            suites.load_suite(write(tmp_path, text.replace(bad, key)))
        assert f":{text.count(chr(10), 0, text.index(bad)) + 1}: {key.split(':')[0]}: " in str(err.value)
