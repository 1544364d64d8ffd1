"""The real CPU runs of the seeds' published programs (tests/fixtures/genuine-cpu-logs, its README): each log is read
by its format's parser as the program printed it, and its figure derives by its publisher's method; its command
record says what ran (the code clean at its pin, the one shim that let it run on a CPU)."""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

from kit.cli import main
from kit.config.programs import IMPLS
from kit.config.reference import ONE_HOST, RefJob, build, record
from kit.images.spec import pin_of
from kit.results.extract import compute_figure
from kit.results.parsers import parse_log

GENUINE = Path(__file__).resolve().parent / "fixtures" / "genuine-cpu-logs"
PLSC_LOG = GENUINE / "plsc" / "arcface_b2_fp32_1.log"
# plsc/entry.py:1022-1027 at the pin through its formatter (entry.py:49-50), as the run printed it
PLSC_LINE = re.compile(r"^INFO (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) entry\.py:\d+\] "
                       r"Pass:0 batch:(\d+) lr:[\d.]+ loss:[\d.]+ qps:(\d+\.\d\d)$")


def plsc_lines() -> list[tuple[int, float]]:
    return [(int(m[2]), float(m[3])) for line in PLSC_LOG.read_text().splitlines() if (m := PLSC_LINE.match(line))]


def test_every_folder_is_described_in_the_readme():
    readme = (GENUINE / "README.md").read_text()
    for folder in sorted(p for p in GENUINE.iterdir() if p.is_dir()):
        assert f"`{folder.name}/`" in readme, folder.name


def test_plsc_real_log_is_read_as_printed_every_10_batches_to_the_patch_s_batch_150():
    printed = plsc_lines()
    assert [step for step, _ in printed] == list(range(0, 150, 10))  # DLPerf's patch ends it at batch 150
    parsed = parse_log(PLSC_LOG, "auto")
    assert parsed.format.name == "plsc"
    assert [(r.step, r.value, r.epoch, r.unit) for r in parsed.records] == [(s, v, 0, "images/s") for s, v in printed]
    assert all(r.timestamp is not None for r in parsed.records)


def test_plsc_real_log_derives_its_figure_by_the_publisher_s_method():
    job = RefJob("paddle", "arcface", "fp32", 2, 1, data="synthetic", device="cpu")
    publisher, kit = build(job, recipe_only=True).publisher_method, build(job, recipe_only=True).kit_method
    values = [v for _, v in plsc_lines()]
    figure = compute_figure(parse_log(PLSC_LOG, "plsc"), publisher)
    assert figure.value == round(statistics.fmean(values[5:]), 2)  # DLPerf: records 5.. (batches 50-149)
    assert compute_figure(parse_log(PLSC_LOG, "plsc"), kit).value == statistics.harmonic_mean(values[5:])
    assert main(["extract", str(PLSC_LOG), "--format", "plsc", "--skip", "5", "--round", "2"]) == 0


def test_plsc_real_run_was_the_kit_s_recipe_on_the_pinned_code_with_the_cpu_shim_named():
    sidecar = json.loads(PLSC_LOG.with_name("arcface_b2_fp32_1.cmd.json").read_text())
    job = RefJob("paddle", "arcface", "fp32", 2, 1, data="synthetic", device="cpu")
    recipe = record(build(job, ONE_HOST, code_root=sidecar["code_root"], scripts_dir=sidecar["scripts_dir"]), job,
                    ONE_HOST)
    assert {k: sidecar[k] for k in recipe} == recipe  # what the kit builds for the job, nothing else
    assert sidecar["argv"] == ["python3", "train.py", "--loss-type", "arcface", "--batch-size", "2"]
    state = sidecar["model_code_state"]
    assert state["clean"] and state["commit"] == pin_of(IMPLS[("paddle", "arcface")].code)
    assert sidecar["patch_sha256"] and sidecar["ran_in"].endswith("/plsc-patched")
    assert sidecar["environ"]["PYTHONPATH"].endswith("bench/genuine_cpu_logs/cuda_place_on_cpu")
    first = PLSC_LOG.read_text().splitlines()[0]
    assert first.startswith("sitecustomize (bench/genuine_cpu_logs/cuda_place_on_cpu): Paddle 1.8.5 is a CPU build")


PM18_LOG = GENUINE / "paddle-models-1.8" / "r50_b4_fp32_1.log"
# PaddlePaddle/models release/1.8 PaddleCV/image_classification utils/utility.py print_info ("batch", no mixup), through
# train.py's logging.basicConfig(level=logging.INFO), as the run printed it
PM18_LINE = re.compile(r"^INFO:utils\.utility:\[Pass 0, train batch (\d+)\] \tloss \d+\.\d{5}, acc1 \d\.\d{5}, "
                       r"acc5 \d\.\d{5}, lr 0\.00100, elapse (\d+\.\d{4}) sec$")


def pm18_lines() -> list[tuple[int, float]]:
    return [(int(m[1]), float(m[2])) for line in PM18_LOG.read_text().splitlines() if (m := PM18_LINE.match(line))]


def test_paddle_models18_real_log_is_read_as_printed_every_batch_to_max_iter():
    printed = pm18_lines()
    assert [step for step, _ in printed] == list(range(120))  # --print_step=1, --max_iter=120 (DLPerf's)
    parsed = parse_log(PM18_LOG, "auto")
    assert parsed.format.name == "paddle-models-1.8"
    assert [(r.step, r.value, r.epoch, r.unit) for r in parsed.records] == [(s, v, 0, "s") for s, v in printed]
    assert all(r.timestamp is None for r in parsed.records)  # its logger prints no time


def test_paddle_models18_real_log_derives_its_claim_by_dlperf_s_method():
    from kit.results.crosscheck import MATCH, check_claims

    seconds = [v for _, v in pm18_lines()]
    dlperf = round(statistics.fmean(round(4 / s, 4) for s in seconds[20:120]), 2)  # extract_paddle_logs.py, batch 4
    (verdict,) = check_claims(PM18_LOG.with_name("claims.yaml"))
    assert verdict.status == MATCH and verdict.recomputed == round(statistics.harmonic_mean(seconds[20:]), 4)
    assert round(4 / verdict.recomputed, 2) == dlperf == 0.62
    assert main(["extract", str(PM18_LOG), "--format", "paddle-models-1.8", "--skip", "20",
                 "--reduce", "harmonic_mean", "--round", "4"]) == 0


def test_paddle_models18_real_run_was_dlperf_s_line_on_the_release_1_8_code_with_no_shim():
    sidecar = json.loads(PM18_LOG.with_name("r50_b4_fp32_1.cmd.json").read_text())
    assert sidecar["code"]["commit"] == "b71cf6322ad8bd293c052cbbe45f7a382fcb73ae"  # release/1.8's head
    assert sidecar["exit_code"] == 0 and sidecar["argv"][:6] == ["taskset", "-c", "1", "python", "-u", "train.py"]
    assert {"--use_gpu=False", "--model=ResNet50", "--batch_size=4", "--max_iter=120"} <= set(sidecar["argv"])
    assert "PYTHONPATH" not in sidecar["environ"] and sidecar["environ"]["CPU_NUM"] == "1"
    assert sidecar["software"]["paddle"] == "1.8.5"
    assert PM18_LOG.read_text().splitlines()[0] == "INFO:utils.utility:-------------  Configuration Arguments -------------"


NVLOG_LOG = GENUINE / "nvlog-tf" / "resnet50_b4_fp32_1.log"
# dllogger 0.2.3 (DLE TensorFlow RN50v1.5 @ b1ae8dd4, dllogger/logger.py) of BenchmarkLoggingHook's values
NVLOG_LINE = re.compile(r"^:::NVLOGv0\.2\.3 resnet (\d+\.\d{9}) \(benchmark_hooks\.py:(\d+)\) "
                        r"(iteration|total_ips|Average total_ips): (\d+(?:\.\d+)?)$")


def nvlog_lines() -> list[tuple[float, int, str, float]]:
    return [(float(m[1]), int(m[2]), m[3], float(m[4])) for line in NVLOG_LOG.read_text().splitlines()
            if (m := NVLOG_LINE.match(line))]


def test_nvlog_tf_real_log_is_read_as_printed_every_10th_step_after_the_warm_up():
    printed = nvlog_lines()
    steps = [int(v) for _, _, key, v in printed if key == "iteration"]
    assert steps == list(range(20, 220, 10))  # --warmup_steps=20, --num_iter=220, --display_every 10 (its default)
    rates = [(secs, v) for secs, _, key, v in printed if key == "total_ips"]
    parsed = parse_log(NVLOG_LOG, "auto")
    assert parsed.format.name == "nvlog-tf"
    per_step = [r for r in parsed.records if r.metric == "total_ips"]
    assert [(r.step, r.value, r.timestamp) for r in per_step] == [(s, v, t) for s, (t, v) in zip(steps, rates,
                                                                                                  strict=True)]
    ((_, _, _, average),) = [p for p in printed if p[2] == "Average total_ips"]
    (summary,) = [r for r in parsed.records if r.metric == "Average total_ips"]
    assert summary.value == average


def test_nvlog_tf_real_log_derives_its_claim_the_program_s_average():
    from kit.results.crosscheck import MATCH, check_claims

    (verdict,) = check_claims(NVLOG_LOG.with_name("claims.yaml"))
    assert verdict.status == MATCH and verdict.recomputed == 1.7917150030045914
    assert main(["extract", str(NVLOG_LOG), "--format", "nvlog-tf", "--reduce", "last_summary"]) == 0


def test_nvlog_tf_real_run_was_the_benchmark_line_on_the_pinned_code_with_no_shim():
    sidecar = json.loads(NVLOG_LOG.with_name("resnet50_b4_fp32_1.cmd.json").read_text())
    assert sidecar["code"]["commit"] == "b1ae8dd47c0e1474741431ad7f0d7a14d6bd6210"  # kit/results/parsers/nvlog_tf.py's
    assert sidecar["exit_code"] == 0 and sidecar["argv"][:6] == ["taskset", "-c", "1", "python", "-u", "main.py"]
    assert {"--mode=training_benchmark", "--batch_size=4", "--data_format=NHWC"} <= set(sidecar["argv"])
    assert not any(a.startswith("--data_dir") for a in sidecar["argv"])  # the program's synthetic input
    assert "PYTHONPATH" not in sidecar["environ"]
    assert sidecar["software"]["tensorflow"] == "1.15.5" and sidecar["software"]["horovod"] == "0.22.1"
