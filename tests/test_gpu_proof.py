"""bench/gpu_proof.sh dry-run on this CPU: the loader, suite and program stages end to end, as a new user would start
it on a GPU machine, with the two replayed boundaries: a STAND-IN nvidia-smi replaying the outputs recorded on one
H100 (tests/standin/nvidia-smi) and the DLE stand-in (tests/standin/dle_pytorch) in the model-code tree. Everything
else is real: the JPEG tree, the interleaved windows of bench/loader_interleave.py through the gpu loader's CPU twin,
kit check-env, kit bench of a small suite (the harness trains ResNet50 on this CPU), bundle, verify, kit bench of the
harness beside the DLE stand-in. Also: the plan and its budgets, a stage stopped at its timeout (the earlier stages'
figures kept, its own from the runs that finished), the telemetry slot, and the MLPerf figures re-derived."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import psutil
import pytest
from conftest import REPO, SHARED
from test_reference_native import model_code

sys.path.insert(0, str(REPO / "bench"))
import gpu_proof  # noqa: E402
import gpu_stages  # noqa: E402

STANDIN_SMI = REPO / "tests" / "standin" / "nvidia-smi"
VISIT = REPO / "tests" / "fixtures" / "gpu-runs" / "h200-20261128"
MLPERF = REPO / "tests" / "fixtures" / "mlperf-v4.0"
SUITE = """\
schema_version: 1
name: gpu-proof-cpu
hardware: cpu
defaults: {warmup_steps: 1, measure_steps: 10, repeats: 3, data: synthetic, timeout_s: 120}
cases:
  - {framework: torch, model: resnet50, precision: amp, layout: nhwc, batch_size: 2, image_size: 64}
"""
PROGRAM_SUITE = """\
schema_version: 1
name: gpu-proof-dle-cpu
hardware: cpu
defaults: {batch_size: 1, precision: amp, data: synthetic, repeats: 2, timeout_s: 120}
cases:
  - {framework: torch, model: resnet50, impl: harness, layout: nhwc, warmup_steps: 1, measure_steps: 10}
  - {framework: torch, model: resnet50, impl: reference}
"""


# more than the stopped stage below lets finish: 30 processes of ~4 s or more each, in its ~7 s after the first
MANY_RUNS = SUITE.replace("repeats: 3", "repeats: 30")


def proof_argv(tmp_path: Path, published: Path, *args: str) -> list[str]:
    root = model_code(tmp_path, published)
    (tmp_path / "bin").mkdir(exist_ok=True)
    if not (tmp_path / "bin" / "python").exists():  # DLE's recipe starts a bare `python`
        (tmp_path / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / "suite.yaml").write_text(SUITE)
    (tmp_path / "program.yaml").write_text(PROGRAM_SUITE)
    return ["bash", str(REPO / "bench" / "gpu_proof.sh"), "--device", "cpu", "--suite", str(tmp_path / "suite.yaml"),
            "--program-suite", str(tmp_path / "program.yaml"), "--model-code", str(root),
            "--runs-dir", str(tmp_path / "runs"), "--jpeg-dir", str(tmp_path / "jpegs"), "--images", "64",
            "--loader-batch", "4", "--loader-image-size", "64", "--loader-steps", "1,3", "--loader-pairs", "2",
            "--work", str(tmp_path / "work"), *args]


def returned(out: Path, into: Path, console: bool = True) -> Path:
    """What the GPU machine sends back of OUT, checked against its limits (at most 8 files, none more than 2 folders
    down, each under 16 MiB, 64 MiB in all): the four files (console.log from gpu_proof.sh, so not where main()
    ran in this process), the pack opened into INTO; the pack's root folder."""
    files = [p for p in out.rglob("*") if not p.is_dir()]
    assert sorted(p.name for p in files) == ["console.log"] * console + ["gpu-proof.tar.gz", "results.json",
                                                                         "summary.md"], files
    assert len(files) <= 8 and all(len(p.relative_to(out).parts) <= 3 for p in files)
    assert all(p.stat().st_size < 16 * 2**20 for p in files) and sum(p.stat().st_size for p in files) <= 64 * 2**20
    with tarfile.open(out / "gpu-proof.tar.gz") as tar:
        names = tar.getnames()
        tar.extractall(into, filter="data")
    assert names[0] == "gpu-proof/MANIFEST.json" and all(n.startswith("gpu-proof/") for n in names)
    manifest = json.loads((into / "gpu-proof" / "MANIFEST.json").read_text())
    assert sorted(f"gpu-proof/{f['path']}" for f in manifest["files"]) == sorted(names[1:])
    assert not [n for n in names if n.endswith((".html", ".png", ".svg"))]  # rebuilt: dropped, and listed
    assert all(d["why"] == "rebuilt (a plot or page)" for d in manifest["dropped"]), manifest["dropped"]
    return into / "gpu-proof"


def proof(tmp_path: Path, published: Path, *args: str, timeout: float = 600,
          prepare=None) -> tuple[subprocess.CompletedProcess, Path]:
    argv = proof_argv(tmp_path, published, *args)
    if prepare:
        prepare()
    out = tmp_path / "out"
    done = subprocess.run(argv, cwd=tmp_path, env=standin_env(tmp_path, out), capture_output=True, text=True,
                          timeout=timeout)
    return done, out


def standin_env(tmp_path: Path, out: Path) -> dict:
    return {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "GPU_PROOF_FORCE": "1",
            "STANDIN_SMI_DIR": str(SHARED / "fixtures" / "nvidia-smi"),
            "PATH": os.pathsep.join([str(STANDIN_SMI), str(tmp_path / "bin"), os.environ["PATH"]])}


def summary_rows(out: Path) -> list[list[str]]:
    lines = [x for x in (out / "summary.md").read_text().splitlines() if x.startswith("| ") and "---" not in x]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:]]


def measured_or_out_of_time(row: list[str]) -> bool:
    """A stage-1 row with a figure, or (a loaded machine fitted no pair in the stage's time) one that says so."""
    return row[2] != "—" or (row[4] == gpu_stages.stats.INCONCLUSIVE and "out of time" in row[5])


def windows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "windows.jsonl").read_text().splitlines()]


def logged_figures(run_dir: Path, pattern: str) -> list[float]:
    """The run_stop figures of a run directory's harness logs, read here without the stage's code."""
    out = []
    for log in sorted(run_dir.glob(f"logs/torch/*/*/1n1g/{pattern}")):
        stops = [json.loads(line.split(":::KITLOG ", 1)[1]) for line in log.read_text().splitlines()
                 if '"run_stop"' in line]
        out += [e["samples_per_sec"] for e in stops if e["status"] == "success"]
    return out


def test_the_dry_run_prints_its_plan_first_then_runs_loader_suite_program_in_order(tmp_path, published):
    began = time.monotonic()
    done, out = proof(tmp_path, published, "--stages", "3,1,2", "--budget-s", "700", "--margin-s", "0")
    print(f"gpu_proof.sh dry run: {time.monotonic() - began:.0f} s")
    text = done.stdout + done.stderr
    # what returns from the GPU machine: four files in OUT, the stages' work in the pack
    work = returned(out, tmp_path / "returned")
    for stage_log in ("1-loader/harness.log", "1-loader/interleave.stderr.log", "1-loader/windows.jsonl",
                      "1-loader/gpu.telemetry", "2-suite/run/run.json", "2-suite/verify.txt", "3-program/report.md"):
        assert (work / stage_log).is_file(), stage_log
    assert list((work / "2-suite" / "run" / "logs").rglob("*.log")) and list((work / "2-suite" / "run" / "env").iterdir())
    kept = json.loads((out / "results.json").read_text())
    assert [[r[k] for k in ("stage", "what", "figure", "target", "verdict", "detail")] for r in kept["rows"]] == \
        summary_rows(out)
    assert [t["stage"] for t in kept["timings"]] == ["1", "2", "3"] and kept["state"] == "done" and kept["exit"] == 1
    assert [(x["stage"], x["runs"]) for x in kept["plan"]["stages"]] == [("1", True), ("2", True), ("3", True)]
    console = (out / "console.log").read_text().splitlines()
    # the plan before anything runs: each stage asked for, its budget, what it runs and drops, in stage order
    assert console[1].startswith("gpu-proof plan: budget 700 s = preflight 15 s + planned stages 435 s"), console[:3]
    assert [line.split()[:3] for line in console[2:5]] == [["1", "loader", "85"], ["2", "suite", "350"],
                                                           ["3", "program", "110"]]
    assert "if short:" in console[2] and "only if time is left (100 s beyond the margin)" in console[4]
    assert (work / "plan.txt").read_text().splitlines() == console[1:6] == kept["plan"]["text"]
    stage_lines = [line for line in console if line.startswith("===== stage")]
    assert [line.split()[2] for line in stage_lines] == ["1:", "2:", "3:"]
    assert console.index(stage_lines[0]) > 5 and not any("$ " in line for line in console[:6])

    rows = summary_rows(out)
    assert [r[0] for r in rows] == ["1 loader"] * 3 + ["2 suite"] * 4 + ["3 program", "mlperf"], text[-4000:]
    by_what = {r[1]: r for r in rows}

    # stage 1: synthetic and real windows of ONE process, alternating, each window one run of the ratio
    got = windows(work / "1-loader")
    assert got[0]["kind"] == "start" and got[0]["device"] == "cpu" and got[0]["batch_size"] == 4
    timed = [w for w in got if w["kind"] in ("synthetic", "real")]
    pairs = len(timed) // 2  # 2 asked; a loaded machine fits fewer in the stage's time (on a loaded CI host: none)
    assert [w["kind"] for w in timed][: 2 * pairs] == (["synthetic", "real", "real", "synthetic"] * 2)[: 2 * pairs]
    assert all(w["images"] == 12 and w["images_per_sec"] == pytest.approx(12 / w["seconds"], rel=1e-3, abs=5e-4)
               for w in timed)  # written with 3 decimals: on a loaded host a window can be 0.14 images/s
    real = by_what["resnet50 bs4 amp-nhwc: real JPEGs (torchvision) / synthetic, windows of one process"]
    assert measured_or_out_of_time(real), real
    median = gpu_stages.stats.median  # also stage 2's below: a host too loaded for a pair of windows has none
    if pairs:  # what a pair of windows gives (a host loaded past fitting one in the stage says so above)
        ratio = median([w["images_per_sec"] for w in timed if w["kind"] == "real"]) / median(
            [w["images_per_sec"] for w in timed if w["kind"] == "synthetic"])
        kinds = [w["kind"] for w in timed]  # a stage that ends mid-pair leaves one window more of one kind
        assert real[2] == f"{ratio:.3f}" and real[3] == ">= 0.9"
        assert f"runs {kinds.count('real')} / {kinds.count('synthetic')}" in real[5], real
        assert real[4] in ("met", "missed", "inconclusive")
        counters = [w for w in got if w["kind"] == "counters"]
        for counts in counters:  # written when the decoder's windows end (the stage's timeout may come first)
            # one decode call a batch (all JPEGs the twin's stand-in decodes but the CMYK ones), none refused
            assert counts["refused_batches"] == 0 and 0 < counts["decode_calls"] <= counts["decoded_batches"]
            assert counts["decoded_batches"] >= counts["batches"]  # and those decoded ahead
            assert (f"{counts['decode_calls']} decode calls for {counts['decoded_batches']} batches decoded "
                    f"({counts['batches']} taken)") in real[5]
        assert len(counters) == 1 or (not counters and "no counters (the process ended first)" in real[5]), real
        alone = by_what["resnet50 bs4 amp-nhwc: the loader alone (torchvision) / synthetic training"]
        assert alone[3] == ">= 1.5" and (re.search(rf"runs [1-3] / {kinds.count('synthetic')};", alone[5]) or (
            alone[4] == gpu_stages.stats.INCONCLUSIVE and "no loader-alone window" in alone[5])), alone
        log = (work / "1-loader" / "harness.log").read_text()
        assert log.count('"event": "run_stop"') >= len(timed) + 1  # the harness's own loop, every window's lines
    skipped = by_what["resnet50 bs4 amp-nhwc: real JPEGs (nvimgcodec) / synthetic, windows of one process"]
    assert skipped[4] == "skipped" and "the CPU twin decodes with Pillow" in skipped[5]

    # stage 2: the suite, bundled and verified; this CPU venv has no torchvision: the yardstick's first process
    # says so and the setting is not started again; the stand-in nvidia-smi names an H100, so the H100 target
    # applies to a CPU's figure: missed (or, on a busy machine, too noisy to tell)
    assert by_what["kit bundle + kit verify"][4] == "met"
    stick = by_what["resnet50 bs2 amp-nhwc: harness / torchvision"]
    assert stick[4] == "failed" and "torchvision is not importable" in stick[5]
    (setting,) = json.loads((work / "2-suite" / "yardstick.json").read_text())
    assert len(setting["processes"]) == 1 and setting["repeats"] == [] and "error" in setting
    assert [p.name for p in (work / "2-suite" / "yardstick").iterdir()] == ["resnet50_amp-nhwc_1.log"]
    figure = by_what["resnet50 amp-nhwc: harness images/s"]
    assert figure[3] == ">= 4500" and figure[4] in ("missed", "inconclusive") and "NVIDIA H100 80GB HBM3; runs 3" in figure[5]
    logged = logged_figures(work / "2-suite" / "run", "*.log")
    assert len(logged) == 3 and float(figure[2]) == pytest.approx(median(logged), abs=0.05)
    assert list((work / "2-suite").glob("*.bundle.tar.gz")) and "CONSISTENT" in (work / "2-suite" / "verify.txt").read_text()

    # stage 3: the harness beside the DLE stand-in (its replayed 790 images/s): a ratio, two runs a side
    program = by_what["resnet50 bs1 amp-nhwc: harness / DLE"]
    assert program[4] in ("missed", "inconclusive") and "runs 2 / 2" in program[5]
    assert gpu_stages.PROGRAM_SECTION in (work / "3-program" / "report.md").read_text()

    # the MLPerf row from the suite's figure and the GPU the kit's capture names (no target)
    mlperf = by_what["the kit's best ResNet50 figure / MLPerf v4.0 per GPU (8-GPU result / 8)"]
    assert mlperf[4] == "no target" and f"/ {gpu_proof.MLPERF_V40['H100']:.0f} (NVIDIA H100 80GB HBM3" in mlperf[5]

    # the record: raw nvidia-smi outputs, the console, one verdict line per stage, the exit status
    fixture = SHARED / "fixtures" / "nvidia-smi" / "q-x_1xH100-80GB-HBM3_driver580.xml"
    assert (work / "nvidia-smi" / "q-x.xml").read_bytes() == fixture.read_bytes()
    assert all((work / d / "verdict.txt").is_file() for d in ("1-loader", "2-suite", "3-program"))
    assert done.returncode == 1, text[-3000:]  # a target missed (or the yardstick failed)


def test_the_default_plan_fits_8_5_minutes_with_60_s_unplanned_and_the_recorded_costs():
    assert gpu_proof.BUDGET_S == 510 and gpu_proof.MARGIN_S >= 60
    planned = [st for st in gpu_proof.STAGES.values() if st.planned]
    assert [st.title for st in planned] == ["loader", "suite"]
    assert gpu_proof.PREFLIGHT_S + sum(st.budget for st in planned) + gpu_proof.MARGIN_S <= gpu_proof.BUDGET_S
    # the suite holds the H200's recorded costs: check-env, 9 harness processes at 19 s, bundle + verify, and the
    # yardstick rounds it keeps time for (one process per setting and round)
    keep = gpu_stages.YARDSTICK_ROUNDS_KEPT * 3 * gpu_stages.YARDSTICK_PROCESS_S
    assert gpu_proof.STAGES["2"].budget >= 5 + 9 * 19 + gpu_stages.BUNDLE_S + keep
    a = gpu_proof.parse(["--out", "/nonexistent"])
    text = gpu_proof.plan(a).splitlines()
    assert text[0] == ("gpu-proof plan: budget 510 s = preflight 15 s + planned stages 435 s + 60 s unplanned "
                       "(margin kept: 60 s)")
    assert [line.split()[:2] for line in text[1:1 + len(gpu_proof.STAGES)]] == [[k, st.title] for k, st in
                                                                             gpu_proof.STAGES.items()]
    assert text[-1].endswith("the kit's best ResNet50 figure / MLPerf v4.0's per-GPU figure")


@pytest.mark.parametrize(("args", "running"), [
    ([], ["1", "2"]),  # the default budget: the "if time is left" stages do not run, and the plan says so
    (["--budget-s", "700", "--margin-s", "0"], ["1", "2", "3", "4", "6"]),  # 250 s spare: 3 (110), 4 (60), 6 (60)
    (["--stages", "3"], ["3"]),  # asked alone, the program runs
    (["--stages", "1", "--decoders", "nvimgcodec"], ["1"]),  # the second command
])
def test_the_plan_names_exactly_the_stages_that_run(args, running):
    a = gpu_proof.parse(["--out", "/nonexistent", *args])
    lines = {line.split()[0]: line for line in gpu_proof.plan(a).splitlines()[1:-1]}
    assert [k for k, line in lines.items() if " s  runs: " in line] == running
    assert all("will not run at this budget" in line for k, line in lines.items() if k not in running)
    assert [k for k, why in gpu_proof.schedule(a).items() if not why] == running
    if args == []:  # stage 1 names the second command for nvimgcodec, which gets the time torchvision leaves
        assert "then nvimgcodec in the time torchvision leaves" in lines["1"]
        assert f"{gpu_proof.SECOND_COMMAND}, ~4 min" in lines["1"]
        assert "--budget-s 610 would hold it, or --stages 3 alone" in lines["3"]
    if "--decoders" in args:  # alone, stage 1 gets 200 s: with preflight and start, about 4 minutes
        assert lines["1"].split()[2:4] == ["200", "s"] and "nvimgcodec: up to 6" in lines["1"]
        assert "torchvision" not in lines["1"]


def clock_after_first_run(runs_dir: Path, cap_s: float = 600) -> type:
    """Popen whose `kit bench` process starts its timeout's clock once one of its runs has finished (run.json says
    so) or it ended: on a loaded machine a run can take longer than the stage's whole share (CI: one ~6 s run took
    over 41 s), and a stage stopped before any run ended has no finished run to keep."""
    class Popen(subprocess.Popen):
        clock_started = False

        def communicate(self, input=None, timeout=None):
            if timeout is not None and not self.clock_started and "bench" in self.args:
                self.clock_started = True
                deadline = time.monotonic() + cap_s
                while self.poll() is None and time.monotonic() < deadline and not any(
                        entry.get("status") == "ok" for run in runs_dir.glob("*/run.json")
                        for entry in json.loads(run.read_text() or "{}").get("runs", {}).values()):
                    time.sleep(0.2)
            return super().communicate(input, timeout)
    return Popen


def test_a_stage_stopped_at_its_timeout_keeps_the_earlier_stages_and_its_finished_runs(tmp_path, published,
                                                                                      monkeypatch):
    """Stage 2's kit bench of thirty runs gets SIGINT at its share of a short stage: the loader's rows stay, and the
    suite's figure comes from the runs that finished (a partial results.json, or the logs where kit bench wrote
    none), equal to what their logs say."""
    (tmp_path / "many.yaml").write_text(MANY_RUNS)
    monkeypatch.setitem(gpu_proof.STAGES, "1", dataclasses.replace(gpu_proof.STAGES["1"], least=10))
    monkeypatch.setitem(gpu_proof.STAGES, "2", dataclasses.replace(gpu_proof.STAGES["2"], budget=42, least=10))
    # leaves kit bench ~42 - 5 - 10 - 20 = 7 s, counted from its first finished run
    monkeypatch.setattr(gpu_stages, "YARDSTICK_PROCESS_S", 5)
    out = tmp_path / "out"
    for key, value in standin_env(tmp_path, out).items():
        monkeypatch.setenv(key, value)
    (tmp_path / "bin").mkdir()
    monkeypatch.setattr(subprocess, "Popen", clock_after_first_run(tmp_path / "runs"))
    code = gpu_proof.main(["--device", "cpu", "--stages", "1,2", "--suite", str(tmp_path / "many.yaml"),
                           "--runs-dir", str(tmp_path / "runs"), "--jpeg-dir", str(tmp_path / "jpegs"),
                           "--images", "64", "--loader-batch", "4", "--loader-image-size", "64",
                           "--loader-steps", "1,3", "--loader-pairs", "1", "--budget-s", "400", "--margin-s", "0",
                           "--out", str(out), "--work", str(tmp_path / "work")])
    rows = {r[1]: r for r in summary_rows(out)}
    assert code == 1
    loader = rows["resnet50 bs4 amp-nhwc: real JPEGs (torchvision) / synthetic, windows of one process"]
    assert measured_or_out_of_time(loader), loader
    bench = rows[f"kit bench --suite {tmp_path / 'many.yaml'}"]
    assert bench[4] == "failed" and bench[5].startswith("timed out after"), bench
    assert "partial run:" in bench[5] or "no results.json: figures re-derived from the run's logs" in bench[5]
    # with a results.json, the runs run.json records as finished (a log the SIGINT caught between its last line and
    # its record is none); without one, every log's
    run_dir = returned(out, tmp_path / "returned", console=False) / "2-suite" / "run"
    finished = sorted(log for log, entry in json.loads((run_dir / "run.json").read_text())["runs"].items()
                      if entry.get("status") == "ok") if (run_dir / "results.json").is_file() else ["*.log"]
    logged = [figure for path in finished for figure in logged_figures(run_dir, Path(path).name)]
    assert 1 <= len(logged) < 30
    figure = rows["resnet50 amp-nhwc: harness images/s"]
    assert f"runs {len(logged)}" in figure[5] and float(figure[2]) == pytest.approx(
        gpu_stages.stats.median(logged), abs=0.05)
    assert "stage 2 (suite)" in (out / "summary.md").read_text()


def test_interleaved_windows_give_one_ratio_row_per_decoder_by_the_noise_rule():
    start = {"kind": "start", "model": "resnet50", "batch_size": 256, "precision": "amp", "layout": "nhwc"}
    synthetic, real = [5600.0, 5650.0, 5620.0, 5580.0], [5300.0, 5350.0, 5320.0, 5290.0]
    lines = [start, {"kind": "skipped", "decoder": "nvimgcodec", "why": "nvimgcodec not installed (ImportError)"}]
    for i, (s, r) in enumerate(zip(synthetic, real, strict=True), 1):
        lines += [{"kind": "synthetic", "decoder": "torchvision", "window": i, "images_per_sec": s},
                  {"kind": "real", "decoder": "torchvision", "window": i, "images_per_sec": r}]
    lines += [{"kind": "loader", "decoder": "torchvision", "window": w, "images_per_sec": v}
              for w, v in enumerate((9000.0, 9100.0, 9050.0), 1)]
    lines += [
              {"kind": "counters", "decoder": "torchvision", "batches": 120, "decode_calls": 122,
               "decoded_batches": 122, "refused_batches": 0}]
    rows = gpu_stages.interleave_rows("1 loader", lines)
    assert [(r.what.split(": ", 1)[1], r.verdict) for r in rows] == [
        ("real JPEGs (torchvision) / synthetic, windows of one process", "met"),
        ("the loader alone (torchvision) / synthetic training", "met"),
        ("real JPEGs (nvimgcodec) / synthetic, windows of one process", "skipped")]
    check = gpu_stages.stats.ratio_check(synthetic, real)
    assert rows[0].figure == f"{check.ratio:.3f}" and check.low >= 0.9
    assert "122 decode calls for 122 batches decoded (120 taken), 0 refused" in rows[0].detail
    assert rows[2].detail == "nvimgcodec not installed (ImportError)"
    # time ran out before the loader-alone windows: that row says so rather than go missing
    short = gpu_stages.interleave_rows("1 loader", [x for x in lines if x["kind"] != "loader"])
    assert [(r.what.split(": ", 1)[1], r.verdict, r.detail) for r in short[1:2]] == [
        ("the loader alone (torchvision) / synthetic training", gpu_stages.stats.INCONCLUSIVE,
         "no loader-alone window: the stage's time ran out before it")]
    # a process that died before its first window
    (dead,) = gpu_stages.interleave_rows("1 loader", [], "exit 1: CUDA error")
    assert (dead.verdict, dead.detail) == ("failed", "exit 1: CUDA error")


def test_run_figures_read_a_partial_results_json_and_the_logs_without_one(tmp_path):
    """The H200 visit's interrupted suite (eight runs recorded, nine logs, no results.json) from its logs; the same
    runs in a partial results.json as kit bench now writes it after every run."""
    run_dir = tmp_path / "run"
    shutil.copytree(VISIT / "suite-interrupted", run_dir)
    from_logs = gpu_stages.run_figures(run_dir)
    amp = from_logs[("torch", "resnet50", 256, "amp-nhwc")]
    assert amp == logged_figures(run_dir, "resnet50_b256_amp-nhwc_*.log")  # run_stop's figures, repeat order
    assert amp == pytest.approx([5642.44, 5574.83, 5693.92], rel=1e-5)  # what kit bench's console said of them
    assert from_logs[("torch", "vgg16", 128, "amp-nhwc")][2] == 3322.257  # the ninth, whole though unrecorded
    assert gpu_stages.completion_note(run_dir) == "no results.json: figures re-derived from the run's logs"
    groups = [{"framework": fw, "model": m, "batch_per_device": b, "precision": t,
               "cases": [{"case": "1n1g", "runs": [{"value": v} for v in values]}]}
              for (fw, m, b, t), values in from_logs.items()]
    missing = [{"case": "torch/vgg16/bz128/1n1g/amp-nhwc", "repeat": 3}]
    (run_dir / "results.json").write_text(json.dumps({"groups": groups, "completion": {
        "state": "partial", "planned": 9, "finished": [{}] * 8, "missing": missing}}))
    assert gpu_stages.run_figures(run_dir) == from_logs
    assert gpu_stages.completion_note(run_dir) == (
        "partial run: 8 of 9 runs finished; missing torch/vgg16/bz128/1n1g/amp-nhwc #3")


def test_the_mlperf_figures_are_re_derived_from_nvidias_logs_by_kit_extract():
    for gpu, name in (("H200", "h200"), ("H100", "eos")):
        log = MLPERF / f"{name}_ngc24.04_mxnet_resnet_result_0.txt"
        assert f'"accelerators_per_node":"{gpu_proof.MLPERF_GPUS}"' in log.read_text()
        done = subprocess.run([sys.executable, "-m", "kit", "extract", str(log), "--skip", "1", "--reduce", "median",
                               "--json"], capture_output=True, text=True, cwd=REPO, timeout=120)
        per_gpu = json.loads(done.stdout)["value"] / gpu_proof.MLPERF_GPUS
        assert per_gpu == pytest.approx(gpu_proof.MLPERF_V40[gpu], rel=1e-3), (gpu, per_gpu)
    row = gpu_proof.mlperf_row({"harness amp-nhwc bs256": 5650.0, "harness tf32 bs256": 2190.0}, "NVIDIA H200")
    assert (row.figure, row.verdict) == (f"{5650 / 7950:.3f}", "no target")
    assert row.detail.startswith("harness amp-nhwc bs256 5650.0 / 7950 (NVIDIA H200")
    assert gpu_proof.mlperf_row({"x": 1.0}, "NVIDIA A100-SXM4-80GB").figure == "—"


def test_the_telemetry_slot_ends_at_its_timeout_saying_how_far_it_got(tmp_path):
    a = gpu_proof.parse(["--device", "cpu", "--out", str(tmp_path), "--telemetry-pairs", "3,5"])
    began = time.monotonic()
    (row,) = gpu_proof.telemetry_rows(a, tmp_path / "4-telemetry", 8)
    assert time.monotonic() - began < 8 + gpu_stages.GRACE_S + 10
    assert row.verdict == "inconclusive" and row.target == "<= 1%", row
    assert re.fullmatch(r"stopped at its slot's end \(8 s\) after \d+ pairs, before a verdict", row.detail)
    assert (tmp_path / "4-telemetry" / "sampler_overhead.log").is_file()


def test_the_host_stage_gives_the_loaders_cost_to_a_small_op_thread_and_this_hosts_wake_up(tmp_path):
    a = gpu_proof.parse(["--device", "cpu", "--out", str(tmp_path), "--jpeg-dir", str(tmp_path / "jpegs"),
                         "--host-pairs", "2,2", "--host-images", "256"])
    (row,) = gpu_proof.host_rows(a, tmp_path / "6-host", 240)
    assert row.stage == "6 host" and row.target == ">= 0.97", row
    assert row.verdict in ("met", "missed", "inconclusive") and float(row.figure) > 0, row
    said = re.fullmatch(r"95% interval \[([\d.]+), ([\d.]+)\], 2 pairs; a wake-up costs (-?\d+) us here, the "
                        r"loader (-?\d+) us a batch \((-?[\d.]+|inf) wake-ups\); it waited (-?[\d.]+) times a batch more "
                        r"than alone; the decode process used (\d+) us of CPU a batch", row.detail)
    assert said and float(said[1]) <= float(row.figure) <= float(said[2]), row.detail
    kept = json.loads((tmp_path / "6-host" / "decode_overlap.log").read_text().splitlines()[-1])
    assert kept["ratios"]["3 step"]["pairs"] == kept["ratios"]["wake"]["pairs"] == 2
    assert float(said[6]) == pytest.approx(kept["host"]["step_waits_per_batch"], abs=0.05)
    assert int(said[7]) == round(kept["host"]["decode_cpu_us_per_batch"]) > 0
    assert (tmp_path / "jpegs-host-small" / "train_list.txt").is_file()


def test_a_stage_the_budget_cannot_hold_is_skipped_with_a_message(tmp_path, published):
    done, out = proof(tmp_path, published, "--stages", "1,3", "--budget-s", "100", timeout=120)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "stage 1 (loader) skipped: " in done.stdout and "beyond the 60 s margin, it needs 45 s" in done.stdout
    # stage 3 will not run at this budget: the plan says so, and it is not started (no row)
    assert "  3 program      —    will not run at this budget: it needs 100 s beyond the margin" in done.stdout
    assert [(r[0], r[4]) for r in summary_rows(out)] == [("1 loader", "skipped"), ("mlperf", "no target")]
    returned(out, tmp_path / "returned")


def test_a_harness_case_of_other_settings_than_the_programs_is_no_ratio(tmp_path, published):
    """The program stage takes the kit's own pairing: a harness case at another image size is other work."""
    done, out = proof(tmp_path, published, "--stages", "3", "--program-suite", str(tmp_path / "other.yaml"),
                      prepare=lambda: (tmp_path / "other.yaml").write_text(
                          PROGRAM_SUITE.replace("measure_steps: 10}", "measure_steps: 10, image_size: 64}")))
    row, mlperf = summary_rows(out)
    assert done.returncode == 1 and row[4] == "failed", done.stdout[-3000:]
    assert "the report pairs no harness case with the program at the same setting" in row[5]
    assert mlperf[0] == "mlperf" and mlperf[5] == "no ResNet50 figure measured"


def test_bad_stages_are_refused(tmp_path, published):
    done, _ = proof(tmp_path, published, "--stages", "1,8", timeout=60)
    assert done.returncode == 2 and "--stages: pick from 1, 2, 3, 4, 5, 6, 7, got 1,8" in done.stdout  # the console, via tee


def test_a_command_past_its_timeout_is_stopped_with_its_whole_process_group(monkeypatch):
    monkeypatch.setattr(gpu_stages, "GRACE_S", 2)  # sh's background sleep ignores SIGINT: SIGKILL comes GRACE_S later
    began = time.monotonic()
    held = "sleep 299.25"  # no other test's: pgrep sees every test's processes on this machine
    done = gpu_stages.run(["sh", "-c", f"{held} & {held}; echo never"], 1, capture=True)
    assert done.returncode is None and "never" not in done.stdout and time.monotonic() - began < 30
    assert done.why() == f"timed out after {done.seconds:.0f} s"
    assert subprocess.run(["pgrep", "-f", held], capture_output=True).returncode == 1  # none left


def test_a_pipe_held_by_a_process_outside_the_group_does_not_hold_the_stage(monkeypatch):
    monkeypatch.setattr(gpu_stages, "GRACE_S", 1)
    began = time.monotonic()
    done = gpu_stages.run([sys.executable, "-c", "import signal, subprocess, sys, time\n"
                           "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                           "held = subprocess.Popen(['sleep', '301'], start_new_session=True)\n"
                           "print('started', held.pid, flush=True); time.sleep(300)"], 1, capture=True)
    held = int(re.search(r"started (\d+)", done.stdout)[1])
    try:
        assert done.returncode is None and time.monotonic() - began < 15
        assert psutil.pid_exists(held)  # outside the group: the stage moved on while it still held the pipe
    finally:
        os.kill(held, signal.SIGKILL)


def test_a_held_sampler_ends_with_the_process_that_started_it_however_that_ends():
    """bench/sampler_overhead.py starts its samplers so (dies_with_kit, SIGKILL): SIGSTOP'd between blocks, a
    pending SIGTERM would leave them, and the pipes they inherited, to outlive a killed bench."""
    starter = subprocess.Popen([sys.executable, "-c", "import signal, subprocess, sys, time\n"
                                "from kit.run.runner import dies_with_kit\n"
                                "held = subprocess.Popen(dies_with_kit(['sleep', '302'], signal.SIGKILL), "
                                "start_new_session=True)\n"
                                "print(held.pid, flush=True); time.sleep(300)"],
                               stdout=subprocess.PIPE, text=True, cwd=REPO)
    sampler = psutil.Process(int(starter.stdout.readline()))
    while "sleep" not in sampler.name():
        time.sleep(0.05)
    sampler.suspend()
    starter.kill()
    starter.wait()
    gone, alive = psutil.wait_procs([sampler], timeout=10)
    for p in alive:
        p.kill()
    assert not alive, "a held process outlived the one that started it"
    assert "dies_with_kit([sys.executable, str(SAMPLER)" in (REPO / "bench" / "sampler_overhead.py").read_text()


def test_sigterm_mid_run_leaves_a_whole_pack_of_the_stages_done_so_far(tmp_path, published):
    """SIGTERM to gpu_proof.sh once stage 2 has started: stage 1's rows and files come back whole in the four
    files of OUT, the stopped stage says so and its kit bench run directory comes back too, the exit status is
    128 + 15, and no process of the run is left."""
    argv = proof_argv(tmp_path, published, "--stages", "1,2", "--loader-pairs", "1")
    out = tmp_path / "out"
    proc = subprocess.Popen(argv, cwd=tmp_path, env=standin_env(tmp_path, out), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 400
        while time.monotonic() < deadline and proc.poll() is None and not list(tmp_path.glob("runs/*/run.json")):
            time.sleep(0.5)  # kit bench of stage 2 has made its run directory
        assert proc.poll() is None, proc.stdout.read()[-3000:]
        proc.send_signal(signal.SIGTERM)
        said, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, said[-3000:]
    work = returned(out, tmp_path / "returned")
    assert windows(work / "1-loader")[0]["kind"] == "start" and (work / "1-loader" / "verdict.txt").is_file()
    assert json.loads((work / "2-suite" / "run" / "run.json").read_text())  # the stopped kit bench's, packed
    kept = json.loads((out / "results.json").read_text())
    assert kept["state"] == "stopped by SIGTERM during stage 2" and kept["exit"] == 128 + signal.SIGTERM
    rows = summary_rows(out)
    assert [r[0] for r in rows] == ["1 loader"] * 3 + ["2 suite"], rows
    loader = next(r for r in rows if "real JPEGs (torchvision)" in r[1])  # its place: first once it has a window
    assert measured_or_out_of_time(loader), rows
    assert rows[-1][4] == "stopped" and "stopped by a signal after" in rows[-1][5]
    assert "gpu-proof: stopped by SIGTERM during stage 2: packing" in (out / "console.log").read_text()
    time.sleep(1)
    left = [p.info for p in psutil.process_iter(["pid", "cmdline"]) if str(tmp_path) in " ".join(p.info["cmdline"] or [])]
    assert not left, left


def test_a_decoder_left_no_time_for_a_pair_is_inconclusive_out_of_time_not_failed(tmp_path):
    """bench/loader_interleave.py on this CPU with a budget no pair fits: the decoder says out_of_time, the process
    ends 0, and its rows are inconclusive, out of time; a later decoder whose first pair the time left cannot hold
    is not opened."""
    listing = gpu_stages.jpeg_tree(tmp_path / "jpegs", 32, 2)
    done = subprocess.run([sys.executable, str(gpu_stages.INTERLEAVE), "--list", str(listing), "--device", "cpu",
                           "--decoders", "torchvision", "--budget-s", "1", "--window-steps", "2",
                           "--window-warmup", "1", "--warmup-steps", "1"], capture_output=True, text=True,
                          timeout=300, cwd=REPO)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(x) for x in done.stdout.splitlines()]
    assert [x["kind"] for x in lines] == ["start", "out_of_time", "counters"], lines
    assert lines[1]["why"].startswith("no pair of windows fitted its ") and all("t" in x for x in lines)
    rows = gpu_stages.interleave_rows("1 loader", lines, decoders=["torchvision"])
    assert [(r.verdict, r.detail.split(";")[0]) for r in rows] == [
        ("inconclusive", f"out of time: {lines[1]['why']}"),
        ("inconclusive", "no loader-alone window: the stage's time ran out before it")]
    assert not any(r.bad for r in rows)  # so gpu_proof's exit status is 3 for it, not 1

    # torchvision paired; nvimgcodec then had too little time to open: its own verdict, inconclusive
    start = {"kind": "start", "model": "resnet50", "batch_size": 256, "precision": "amp", "layout": "nhwc"}
    paired = [{"kind": k, "decoder": "torchvision", "window": i, "images_per_sec": v, "seconds": 1.0, "t": 100.0 + i}
              for i in range(1, 5) for k, v in (("synthetic", 5600.0 + i), ("real", 5400.0 + i))]
    later = [{"kind": "out_of_time", "decoder": "nvimgcodec", "why": "3 s of the stage left for it, a first pair "
              "took 20 s"}]
    rows = gpu_stages.interleave_rows("1 loader", [start, *paired, *later], decoders=["torchvision", "nvimgcodec"])
    assert [(r.what.split(": ", 1)[1], r.verdict) for r in rows] == [
        ("real JPEGs (torchvision) / synthetic, windows of one process", "met"),
        ("the loader alone (torchvision) / synthetic training", "inconclusive"),
        ("real JPEGs (nvimgcodec) / synthetic, windows of one process", "inconclusive"),
        ("the loader alone (nvimgcodec) / synthetic training", "inconclusive")]
    assert rows[2].detail == "out of time: 3 s of the stage left for it, a first pair took 20 s"
    # stopped at the stage's timeout before nvimgcodec said anything: out of time too; a decoder that raised: failed
    rows = gpu_stages.interleave_rows("1 loader", [start, *paired], "timed out after 85 s",
                                      decoders=["torchvision", "nvimgcodec"], timed_out=True)
    assert (rows[2].verdict, rows[2].detail) == ("inconclusive", "out of time: the stage's timeout came first")
    raised = {"kind": "failed", "decoder": "nvimgcodec", "why": "DataError: 400x350 expected, got 350x400"}
    rows = gpu_stages.interleave_rows("1 loader", [start, *paired, raised], decoders=["torchvision", "nvimgcodec"])
    assert [(r.verdict, r.detail) for r in rows[2:]] == [("failed", raised["why"]), ("failed", raised["why"])]


def test_the_decoders_row_gives_the_decode_processs_phases_and_the_jpeg_engines_utilisation(tmp_path):
    start = {"kind": "start", "model": "resnet50", "batch_size": 256, "precision": "amp", "layout": "nhwc"}
    lines = [start] + [{"kind": k, "decoder": "torchvision", "window": i, "images_per_sec": v, "seconds": 2.0,
                        "t": 1000.0 + 10 * i + (k == "real") * 5} for i in range(1, 4)
                       for k, v in (("synthetic", 5600.0 + i), ("real", 5000.0 + i))]
    counters = {"kind": "counters", "decoder": "torchvision", "batches": 60, "decode_calls": 60,
                "decoded_batches": 60, "refused_batches": 0, "process_s": 12.5,
                "phases_s": {"read": 1.25, "decode": 6.0, "crop_resize": 2.5, "copy_back": 0.5, "slot_wait": 2.0}}
    header = {"telemetry": 1, "source": "nvml", "host": "h", "interval_ms": 200, "started": 990.0,
              "gpus": [{"index": 0, "name": "NVIDIA H200", "uuid": "GPU-1", "max_sm_mhz": 1980, "max_mem_mhz": 3201,
                        "limit_w": 700}]}
    sample = {"gpu": 0, "sm_mhz": 1980, "mem_mhz": 3201, "power_w": 600, "limit_w": 700, "energy_mj": 1,
              "temp_c": 50, "util_gpu": 90, "util_mem": 40, "mem_used_mib": 1000, "reasons": 0}
    # in the real windows (t 1013-1015, 1023-1025, 1033-1035): 40, 60; outside: 99 (not counted)
    with_jpeg = [{**sample, "t": t, "energy_mj": t, "util_jpeg": u} for t, u in ((1014.0, 40), (1024.0, 60),
                                                                                  (1019.0, 99))]
    recorded = tmp_path / "gpu.telemetry"
    recorded.write_text("\n".join(json.dumps(x) for x in [header, *with_jpeg]) + "\n")
    (row, _alone) = gpu_stages.interleave_rows("1 loader", [*lines, counters], telemetry=recorded)
    assert ("; decode process: read 1.25 s, decode 6.00 s, crop/resize 2.50 s, copy back 0.50 s, waiting for a "
            "slot 2.00 s of 12.50 s; JPEG engines 50.0% busy (mean of 2 samples over its real-JPEG windows)") in row.detail
    # samples without the field (an older sampler), and counters without phases: said, or left out
    recorded.write_text("\n".join(json.dumps(x) for x in [header, *[{**sample, "t": t, "energy_mj": t}
                                                                      for t in (1014.0, 1024.0)]]) + "\n")
    plain = {k: v for k, v in counters.items() if k not in ("phases_s", "process_s")}
    (row, _alone) = gpu_stages.interleave_rows("1 loader", [*lines, plain], telemetry=recorded)
    assert row.detail.endswith("0 refused; JPEG engine utilisation not recorded (nvml samples have no util_jpeg)")


def test_a_failure_names_the_exception_not_the_noise_printed_after_it():
    """A real Python process that prints nvImageCodec's import noise before and after (atexit) its traceback."""
    noise = "[nvjpeg2k_ext] Failed to load"
    script = ("import atexit, sys\n"
              f"atexit.register(lambda: print({noise!r}, file=sys.stderr))\n"
              f"print({noise!r}, file=sys.stderr)\n"
              "try:\n    {}['size']\n"
              "except KeyError as exc:\n    raise ValueError('the size table has 400x350, got 350x400') from exc\n")
    done = gpu_stages.run([sys.executable, "-c", script], 60, capture=True)
    assert done.stderr.strip().splitlines()[-1] == noise and done.stderr.count("Traceback") == 2
    assert done.why() == "exit 1: ValueError: the size table has 400x350, got 350x400"
    quiet = gpu_stages.run([sys.executable, "-c", f"import sys; print({noise!r}); sys.exit('no GPU here')"], 60,
                           capture=True)
    assert quiet.why() == "exit 1: no GPU here"  # no traceback: the last line
    mute = gpu_stages.run([sys.executable, "-c", "import sys; sys.exit(4)"], 60, capture=True)
    assert mute.why() == "exit 4 (its output is above)"


def test_the_pack_drops_what_is_rebuilt_then_the_largest_files_and_lists_them(tmp_path):
    work = tmp_path / "work"
    (work / "1-loader").mkdir(parents=True)
    (work / "1-loader" / "windows.jsonl").write_text('{"kind": "start"}\n')
    (work / "2-suite" / "run" / "plots").mkdir(parents=True)
    (work / "2-suite" / "run" / "report.html").write_text("<html></html>")
    (work / "2-suite" / "run" / "plots" / "a.png").write_bytes(b"png")
    (work / "2-suite" / "big.bin").write_bytes(os.urandom(300_000))  # does not compress
    (work / "2-suite" / "small.bin").write_bytes(os.urandom(50_000))
    packed = gpu_proof.pack(work, tmp_path / "gpu-proof.tar.gz", limit=200_000)
    assert packed["bytes"] <= 200_000 and packed["files"] == 2
    assert [(d["path"], d["why"]) for d in packed["dropped"]] == [
        ("2-suite/run/report.html", "rebuilt (a plot or page)"), ("2-suite/run/plots/a.png", "rebuilt (a plot or page)"),
        ("2-suite/big.bin", "over the pack's 0.2 MiB")]
    with tarfile.open(tmp_path / "gpu-proof.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["gpu-proof/1-loader/windows.jsonl", "gpu-proof/2-suite/small.bin",
                                          "gpu-proof/MANIFEST.json"]
        manifest = json.loads(tar.extractfile("gpu-proof/MANIFEST.json").read())
    assert manifest["dropped"] == packed["dropped"] and not list(tmp_path.glob("*.part"))


def test_the_hardware_stage_runs_kit_yardstick_and_reports_each_measure(tmp_path, monkeypatch):
    """Stage 7 on this CPU (the dry run): kit yardstick for real at small sizes, a row per measure and its verdict's
    line; a CPU has no datasheet, so no target (the H200's own rows: tests/test_yardstick.py)."""
    out = tmp_path / "out"
    for key, value in standin_env(tmp_path, out).items():
        monkeypatch.setenv(key, value)
    code = gpu_proof.main(["--device", "cpu", "--stages", "7", "--out", str(out), "--work", str(tmp_path / "work")])
    rows = {r[1]: r for r in summary_rows(out)}
    assert code == 0  # nothing missed, failed or inconclusive
    assert {"gemm fp32", "gemm bf16", "memory copy", "kit yardstick's verdict"} <= set(rows)
    assert rows["kit yardstick's verdict"][2:5] == ["not judged", "healthy", "no target"]
    assert rows["gemm fp32"][2].endswith(" GFLOP/s") and rows["gemm fp32"][4] == "no target"
    kept = list((tmp_path / "work" / "7-hardware" / "runs" / "yardstick").glob("*/*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["device"] == "cpu"
