"""Seed 003's five models in the harness (scripts/harness): SE-ResNeXt50, DeepLabV3+, BERT, Transformer, CycleGAN.

Parameter parity of the published (full) configurations is checked on torch's meta device / under
paddle.LazyGuard (no storage, instant); the small ("tiny") configurations are built for real, the torch weights
copied into Paddle, and two training steps with each publisher's optimizer must give the same losses in both
frameworks (dropout off, so train mode is deterministic). Then short real CPU runs of train.py: the log lines,
the NLP whole-epoch figure and the peak memory.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import kitlogs
import numpy as np
import pytest
from kitlogs import kitlines

REPO = Path(__file__).resolve().parents[1]
HARNESS = REPO / "scripts" / "harness"
TRAIN = HARNESS / "train.py"
NEW = ("se_resnext50", "deeplabv3p", "bert", "transformer", "cyclegan")
# trainable parameters of the published configurations (the same in both frameworks)
FULL_COUNTS = {
    "se_resnext50": 27_559_896,  # 32x4d, 1000 classes (Hu et al.; Cadene's se_resnext50_32x4d: 27,559,896)
    "deeplabv3p": 40_351_667,  # ResNet50 backbone, output stride 16, 19 Cityscapes classes
    "bert": 110_106_428,  # BERT-base uncased + MLM/NSP heads (HF BertForPreTraining: 110,106,428)
    "transformer": 63_084_544,  # base, 37,000-token shared vocabulary, tied embeddings
    "cyclegan": 28_285_832,  # 2 x ResNet-9 generator (11,378,179) + 2 x 70x70 PatchGAN (2,764,737)
}


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
    return _load("models_torch")


@pytest.fixture(scope="module")
def mp():
    module = _load("models_paddle")
    import paddle

    paddle.set_device("cpu")
    return module


@pytest.fixture(scope="module")
def syn():
    return _load("synthetic")


def count_torch(mt, name, **kwargs) -> int:
    import torch

    with torch.device("meta"):
        return mt.count_params(mt.build_model(name, **kwargs))


def count_paddle(mp, name, **kwargs) -> int:
    import paddle

    with paddle.LazyGuard():
        return mp.count_params(mp.build_model(name, **kwargs))


def transformer_base_formula(vocab: int = 37000, d: int = 512, inner: int = 2048, layers: int = 6) -> int:
    attention = 4 * (d * d + d)
    ffn = d * inner + inner + inner * d + d
    norm = 2 * d
    return vocab * d + layers * (attention + ffn + 2 * norm) + layers * (2 * attention + ffn + 3 * norm) + 2 * norm


def cyclegan_formula(ngf: int = 64, ndf: int = 64, blocks: int = 9) -> int:
    def conv(i, o, k):
        return i * o * k * k + o

    g = conv(3, ngf, 7) + conv(ngf, 2 * ngf, 3) + conv(2 * ngf, 4 * ngf, 3) + blocks * 2 * conv(4 * ngf, 4 * ngf, 3) \
        + conv(4 * ngf, 2 * ngf, 3) + conv(2 * ngf, ngf, 3) + conv(ngf, 3, 7)
    d = conv(3, ndf, 4) + conv(ndf, 2 * ndf, 4) + conv(2 * ndf, 4 * ndf, 4) + conv(4 * ndf, 8 * ndf, 4) \
        + conv(8 * ndf, 1, 4)
    return 2 * g + 2 * d


# ---------------------------------------------------------------- parameter parity
def test_formulas_give_the_published_figures():
    assert cyclegan_formula() == FULL_COUNTS["cyclegan"]
    assert transformer_base_formula() == FULL_COUNTS["transformer"]


@pytest.mark.parametrize("name", NEW)
def test_full_configuration_has_the_same_parameter_count_in_both_frameworks(mt, mp, name):
    kwargs = {"num_classes": 19} if name == "deeplabv3p" else {}
    torch_count = count_torch(mt, name, **kwargs)
    assert torch_count == count_paddle(mp, name, **kwargs) == FULL_COUNTS[name]


@pytest.mark.parametrize("name", NEW)
def test_tiny_configuration_has_the_same_parameter_count_in_both_frameworks(mt, mp, name):
    kwargs = {"num_classes": 10} if name in ("se_resnext50", "deeplabv3p") else {}
    assert count_torch(mt, name, size="tiny", **kwargs) == count_paddle(mp, name, size="tiny", **kwargs)


@pytest.mark.parametrize("name", NEW)
def test_the_published_configuration_has_its_published_parameter_count_in_both_frameworks(mt, mp, name):
    classes = {"num_classes": 19} if name == "deeplabv3p" else {}  # the harness's default for it (Cityscapes)
    assert count_torch(mt, name, **classes) == count_paddle(mp, name, **classes) == FULL_COUNTS[name]


def test_count_params_cli_prints_equal_counts(tmp_path):
    for name in NEW[:1]:  # the command line's path (the counts of every model: the test above, in this process)
        counts = {}
        for fw in ("paddle", "torch"):
            out = subprocess.run([sys.executable, str(TRAIN), "--framework", fw, "--model", name, "--count-params"],
                                 capture_output=True, text=True, timeout=300, cwd=REPO)
            assert out.returncode == 0, out.stderr[-2000:]
            line = out.stdout.strip().splitlines()[-1]
            assert line.startswith(f"model={name} framework={fw} ")
            counts[fw] = int(line.rsplit("params=", 1)[1])
        assert counts["paddle"] == counts["torch"] == FULL_COUNTS[name], name


def test_bad_configuration_is_refused(mt, mp):
    for module in (mt, mp):
        with pytest.raises(ValueError, match="size"):
            module.build_model("bert", size="huge")
        with pytest.raises(ValueError, match="unknown configuration"):
            module.build_model("bert", size="tiny", hidden_size=3)
        with pytest.raises(ValueError, match="NCHW"):
            module.build_model("se_resnext50", data_format="NHWC")


# ---------------------------------------------------------------- the same training step in both frameworks
def copy_torch_into_paddle(torch_net, paddle_net) -> None:
    """Same names except BN statistics; torch Linear weights [out, in] are Paddle's [in, out]."""
    import torch

    linear = {f"{n}.weight" for n, m in torch_net.named_modules() if isinstance(m, torch.nn.Linear)}
    source = {k: v for k, v in torch_net.state_dict().items() if not k.endswith("num_batches_tracked")}
    state = {}
    for key, value in paddle_net.state_dict().items():
        tkey = key.replace("._mean", ".running_mean").replace("._variance", ".running_var")
        array = source[tkey].detach().numpy()
        array = array.T if tkey in linear else array
        assert list(array.shape) == list(value.shape), key
        state[key] = np.ascontiguousarray(array)
    assert set(source) == {k.replace("._mean", ".running_mean").replace("._variance", ".running_var")
                           for k in state}
    paddle_net.set_state_dict(state)


def batch_for(syn, name: str) -> tuple:
    if name == "bert":
        return syn.bert_corpus(4, 2, 24, 1000, seed=3)[0].arrays
    if name == "transformer":
        return syn.transformer_corpus(40, 400, 60, 1000, seed=3)[0].arrays
    if name == "cyclegan":
        return syn.vision_batch(name, 1, 32, 0, seed=3)
    return syn.vision_batch(name, 2, 32, 10, seed=3)


@pytest.mark.parametrize("name", NEW)
def test_two_training_steps_give_the_same_losses_in_both_frameworks(mt, mp, syn, name):
    import paddle
    import torch

    torch.manual_seed(0)
    kwargs = {"num_classes": 10} if name in ("se_resnext50", "deeplabv3p") else {}
    if name in ("bert", "transformer"):
        kwargs["dropout"] = 0.0  # train mode without randomness: the two frameworks must agree step for step
    tnet = mt.build_model(name, size="tiny", **kwargs)
    pnet = mp.build_model(name, size="tiny", **kwargs)
    copy_torch_into_paddle(tnet, pnet)
    tnet.train()
    pnet.train()
    ttrain = _load("torch_trainer").Trainer(name, tnet, batch_size=2)
    ptrain = _load("paddle_trainer").Trainer(name, pnet, batch_size=2)
    assert ttrain.settings == ptrain.settings
    arrays = batch_for(syn, name)
    tbatch = [torch.from_numpy(a) for a in arrays]
    pbatch = [paddle.to_tensor(a) for a in arrays]
    losses = []
    for step in (1, 2):  # step 2 runs on the weights each optimizer produced
        tloss, ploss = ttrain.step(*tbatch), ptrain.step(*pbatch)
        assert np.isfinite(tloss)
        assert ptrain.last == pytest.approx(ttrain.last, rel=2e-3, abs=2e-4), f"step {step}"
        assert ploss == pytest.approx(tloss, rel=2e-3, abs=2e-4)
        losses.append(tloss)
    assert losses[0] != losses[1], "the optimizer changed nothing"


# ---------------------------------------------------------------- train.py: real short CPU runs
RUN_ARGS = {
    "se_resnext50": ["--batch-size", "2", "--image-size", "32", "--num-classes", "10"],
    "deeplabv3p": ["--batch-size", "2", "--image-size", "32"],
    "cyclegan": ["--batch-size", "1", "--image-size", "32"],
    "bert": ["--batch-size", "4", "--seq-len", "32", "--corpus-size", "12", "--measure-epochs", "2"],
    "transformer": ["--batch-size", "256", "--seq-len", "48", "--corpus-size", "40"],
}
VISION_STEPS = ["--warmup-steps", "1", "--measure-steps", "2"]


def harness(*args: str, timeout: int = 300) -> subprocess.CompletedProcess:
    return kitlogs.harness(*args, env={"OMP_NUM_THREADS": "1"}, timeout=timeout)


def run_model(framework: str, name: str, *extra: str) -> list[dict]:
    steps = ["--warmup-steps", "1"] if name in ("bert", "transformer") else VISION_STEPS
    out = harness("--framework", framework, "--model", name, "--size", "tiny", "--threads", "1", *RUN_ARGS[name],
                  *steps, *extra)
    assert out.returncode == 0, out.stderr[-3000:]
    return kitlines(out.stdout)


def write_log(tmp_path: Path, framework: str, name: str, events: list[dict], run: int = 1) -> Path:
    """The events as a run log in the report's layout: <fw>/<model>/bz<B>/1n1g/<model>_b<B>_fp32_<run>.log."""
    batch = events[0]["local_batch"]
    path = tmp_path / framework / name / f"bz{batch}" / "1n1g" / f"{name}_b{batch}_fp32_{run}.log"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(":::KITLOG " + json.dumps(e) + "\n" for e in events))
    return path


@pytest.mark.parametrize("framework", ["paddle", "torch"])
@pytest.mark.parametrize("name", ["se_resnext50", "deeplabv3p", "cyclegan"])
def test_vision_run_logs_steps_figure_and_peak_memory(tmp_path, framework, name):
    from kit.results.extract import Method, compute_figure
    from kit.results.parsers import parse_log

    events = run_model(framework, name)
    assert [e["event"] for e in events] == ["run_start", "warmup_end", "step", "step", "run_stop", "rank_stop"]
    start, stop, rank = events[0], events[4], events[5]
    assert start["model"] == name and start["size"] == "tiny" and start["data"] == "synthetic"
    assert start["unit"] == ("samples/s" if name == "cyclegan" else "images/s")
    assert start["optimizer"] == ("adam" if name == "cyclegan" else "momentum")
    assert stop["status"] == "success" and stop["unit"] == start["unit"]
    batch = start["global_batch"]
    assert stop["throughput"] == pytest.approx(batch * 2 / sum(e["seconds"] for e in events[2:4]), rel=1e-3)
    for line in (stop, rank):
        assert line["peak_memory_kind"] == "peak_rss"
        assert isinstance(line["peak_memory_mb"], float) and line["peak_memory_mb"] > 50  # the framework alone
    figure = compute_figure(parse_log(write_log(tmp_path, framework, name, events)), Method(reduce="harmonic_mean"))
    assert figure.value == pytest.approx(stop["throughput"], rel=1e-3) and figure.unit == "samples/s"


@pytest.mark.parametrize("framework", ["paddle", "torch"])
@pytest.mark.parametrize("name", ["bert", "transformer"])
def test_nlp_figure_is_whole_epochs_of_the_corpus_over_their_time(tmp_path, framework, name):
    from kit.results.extract import Method, compute_figure
    from kit.results.parsers import parse_log

    events = run_model(framework, name)
    kinds = [e["event"] for e in events]
    assert kinds[:3] == ["run_start", "corpus", "warmup_end"] and kinds[-2:] == ["run_stop", "rank_stop"]
    start, corpus, stop = events[0], events[1], events[-2]
    epochs = [e for e in events if e["event"] == "epoch"]
    steps = [e for e in events if e["event"] == "step"]
    unit, count = ("sequences/s", "sequences") if name == "bert" else ("tokens/s", "tokens")
    assert start["unit"] == stop["unit"] == unit
    assert len(epochs) == start["measure_epochs"] == stop["epochs"]
    assert len(steps) == corpus["batches_per_epoch"] * len(epochs) == stop["steps"]
    for epoch in epochs:  # every epoch is the whole corpus, its time the sum of its steps' times
        own = [s for s in steps if s["epoch"] == epoch["epoch"]]
        assert epoch[count] == corpus[f"{count}_per_epoch"] == sum(s["global_batch" if name == "bert" else "tokens"]
                                                                   for s in own)
        assert epoch["seconds"] == pytest.approx(sum(s["seconds"] for s in own), abs=1e-5 * len(own))
    # variable lengths: not every batch has the same number of tokens
    assert len({s["tokens"] for s in steps}) > 1
    total, seconds = sum(e[count] for e in epochs), sum(e["seconds"] for e in epochs)
    assert stop[count] == total
    assert stop["throughput"] == pytest.approx(total / seconds, rel=1e-4)
    assert stop[f"{count}_per_sec"] == stop["throughput"]
    parsed = parse_log(write_log(tmp_path, framework, name, events))
    for method in (Method(reduce="harmonic_mean"), Method(reduce="last_summary")):
        figure = compute_figure(parsed, method)
        assert figure.unit == unit
        assert figure.value == pytest.approx(total / seconds, rel=1e-4), method.reduce
    assert stop["peak_memory_mb"] > 50


def test_report_has_a_peak_memory_column(tmp_path):
    from kit.results.exporters import to_csv, to_markdown
    from kit.results.extract import Method
    from kit.results.report import build_report

    events = run_model("torch", "cyclegan")
    for run in (1, 2):
        write_log(tmp_path / "logs", "torch", "cyclegan", events, run)
    report = build_report(tmp_path / "logs", Method(reduce="harmonic_mean"))
    assert not report.failures
    (case,) = report.groups[0].cases
    assert case.peak_memory_mb == events[-2]["peak_memory_mb"] > 0
    assert all(r.peak_memory_mb > 0 for r in case.runs)
    markdown = to_markdown(report)
    assert "| peak memory |" in markdown and f"| {case.peak_memory_mb:.0f} MiB |" in markdown
    assert to_csv(report).splitlines()[0].endswith(",peak_memory_mb")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--model", "bert", "--batch-size", "2", "--image-size", "32"], "--image-size does not apply to bert"),
        (["--model", "transformer", "--batch-size", "2", "--measure-steps", "5"], "give --measure-epochs"),
        (["--model", "resnet50", "--batch-size", "2", "--size", "tiny"], "--size applies to seed 003's models"),
        (["--model", "cyclegan", "--batch-size", "1", "--channels-last"], "NCHW only"),
        (["--model", "deeplabv3p", "--batch-size", "1"], "--batch-size must be >= 2 for deeplabv3p"),
    ],
)
def test_bad_arguments_exit_2(args, words):
    out = harness("--framework", "torch", *args)
    assert out.returncode == 2 and words in out.stderr and "Traceback" not in out.stderr


# ---------------------------------------------------------------- bench: make bench-seed003, make bench-overhead
def test_bench_seed003_plans_both_frameworks_for_every_model(capsys):
    from kit.cli import main

    assert main(["bench", "--suite", "seed003", "--dry-run"]) == 0
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("  local: ")]
    assert len(lines) == 10
    for name in NEW:
        for fw in ("paddle", "torch"):
            assert sum(f"--framework {fw} --model {name} " in line for line in lines) == 1
    assert all("--size" not in line for line in lines)  # the published architectures, at CPU input sizes


@pytest.mark.parametrize("name", ["cyclegan", "bert", "transformer"])
def test_bare_loop_trains_seed003_models_with_their_trainer(name):
    sys.path.insert(0, str(REPO / "bench"))
    from harness_overhead import PRESETS

    preset = [("1" if prev in ("--measure-steps", "--warmup-steps") else arg)
              for prev, arg in zip(["", *PRESETS[name][:-1]], PRESETS[name], strict=True)]
    out = subprocess.run([sys.executable, str(REPO / "bench" / "bare_loop.py"), "--framework", "torch", "--model", name,
                          "--threads", "1", *preset], capture_output=True, text=True, timeout=300, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert float(out.stdout.strip().splitlines()[-1]) > 0


SEED003_SUITE = """\
schema_version: 1
name: s3
hardware: cpu
defaults: {warmup_steps: 1, measure_steps: 10, repeats: 1, timeout_s: 600, size: tiny}
cases:
  - {framework: [paddle, torch], model: bert, batch_size: 4, seq_len: 16, corpus_size: 8}
  - {framework: [paddle, torch], model: cyclegan, batch_size: 1, image_size: 32}
"""


def test_kit_bench_runs_seed003_models_from_a_suite_with_peak_memory_in_the_report(tmp_path):
    from kit.cli import main
    from kit.config.suites import load_suite
    from kit.core.yamlio import ConfigError

    (tmp_path / "s3.yaml").write_text(SEED003_SUITE)
    assert main(["bench", "--suite", str(tmp_path / "s3.yaml"), "--runs-dir", str(tmp_path / "runs")]) == 0
    (run_dir,) = list((tmp_path / "runs").iterdir())
    results = json.loads((run_dir / "results.json").read_text())
    units = {(g["framework"], g["model"]): g["unit"] for g in results["groups"]}
    assert units == {("paddle", "bert"): "sequences/s", ("torch", "bert"): "sequences/s",
                     ("paddle", "cyclegan"): "samples/s", ("torch", "cyclegan"): "samples/s"}
    entries = json.loads((run_dir / "run.json").read_text())["runs"].values()
    assert {(e["case"].split("/")[1], e["unit"]) for e in entries} == {("bert", "sequences/s"), ("cyclegan", "samples/s")}
    report = (run_dir / "report.md").read_text()
    assert "| peak memory |" in report and " MiB |" in report
    log = (run_dir / "logs/torch/bert/bz4/1n1g/bert_b4_fp32_1.log").read_text()
    start = next(e for e in kitlines(log) if e["event"] == "run_start")
    assert (start["seq_len"], start["corpus_size"]) == (16, 8)
    # keys that only seed 003's models take are refused on others, naming file, line and key
    (tmp_path / "bad.yaml").write_text(SEED003_SUITE.replace("model: cyclegan", "model: resnet50"))
    with pytest.raises(ConfigError, match=r"bad.yaml:\d+: size: size does not apply to resnet50"):
        load_suite(tmp_path / "bad.yaml")
