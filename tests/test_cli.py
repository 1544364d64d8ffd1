"""The `kit` command as a user runs it: exit codes, last-line figures, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def kit(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "kit", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def test_extract_prints_the_figure_last(published):
    r = kit(
        "extract",
        published / "perf-v100/mxnet/mxnet_gpu8_fp32_bs128.txt",
        "--skip",
        "1",
        "--reduce",
        "harmonic_mean",
        "--sig",
        "5",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[-1] == "2957.8"
    assert "format: dle-mxnet (auto)" in r.stdout


def test_extract_metric_and_json(published):
    log = published / "perf-v100/pytorch/pytorch_gpu32_amp_bs256.txt"
    r = kit("extract", log, "--reduce", "last_summary", "--metric", "compute_ips", "--json")
    data = json.loads(r.stdout)
    assert r.returncode == 0 and data["metric"] == "train.compute_ips" and data["kind"] == "summary"
    assert data["value"] == pytest.approx(21259.81, rel=0.02) and data["file"] == str(log)


def test_report_prints_dlperf_table_and_writes_outputs(published, tmp_path):
    r = kit(
        "report", published / "dlperf-tf2-resnet50", "--skip", "1", "--count", "5", "--round", "2", "--out", tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert "| 4 | 32 | 9418.44 | 29.27 |" in r.stdout
    assert {p.name for p in tmp_path.iterdir()} == {"report.md", "report.html", "results.json", "results.csv",
                                                    "scaling.png", "throughput.png"}


def test_report_of_read_only_tree_writes_under_cwd(published, tmp_path):
    r = kit("report", published / "dlperf-tf2-resnet50", "--skip", "1", "--count", "5", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "reports/dlperf-tf2-resnet50/results.json").is_file()


def test_crosscheck_exit_status_and_summary(published):
    # the one figure the claims file declares 'derives: false' is a finding (flagged), not a failure
    r = kit("crosscheck", published / "expected.yaml")
    assert r.returncode == 0
    assert "33 match, 1 flagged (published figures that do not derive from their logs, as the claims file " \
           "declares), 0 mismatch, 0 error of 34 claims" in r.stdout
    flagged = [l for l in r.stdout.splitlines() if "flagged" in l and "pure_fp16_DP_N1C1" in l]
    assert len(flagged) == 1 and "1432.066966" in flagged[0] and "1438.518" in flagged[0]
    data = json.loads(kit("crosscheck", published / "expected.yaml", "--json").stdout)
    assert data["counts"] == {"match": 33, "flagged": 1, "mismatch": 0, "error": 0}


def _bad_inputs(tmp_path, published):
    (tmp_path / "empty.log").write_bytes(b"")
    (tmp_path / "binary.log").write_bytes(bytes(range(256)) * 20)
    text = (published / "perf-v100/paddle/PaddleClas_ResNet50_bs256_fp32_DP_N1C1_log").read_text()
    (tmp_path / "cut.log").write_text(text[: text.index("ips: 394.43388") + 9])
    (tmp_path / "none.log").write_text("Epoch 1 done\nloss 6.9\n")
    (tmp_path / "claims.yaml").write_text("logs:\n  - {file: a.log, published: [1}\n")
    return [
        (["extract", tmp_path / "empty.log"], "empty.log: empty file"),
        (["extract", tmp_path / "binary.log"], "binary.log: binary file"),
        (["extract", tmp_path / "cut.log"], "cut.log:152: log cut mid-line"),
        (["extract", tmp_path / "none.log"], "none.log: no throughput line of any known format"),
        (["extract", tmp_path / "none.log", "--format", "oneflow-classic"], "unknown format 'oneflow-classic'"),
        (["extract", tmp_path / "missing.log"], "missing.log: no such file"),
        (
            ["extract", published / "dlperf-tf2-resnet50/1n1g/rn50_b128_fp32_1.log", "--skip", "9"],
            "no value left after skipping 9 of 6",
        ),
        (["crosscheck", tmp_path / "claims.yaml"], "claims.yaml:2: malformed YAML"),
        (["crosscheck", tmp_path / "binary.log"], "binary.log: not UTF-8 text"),
        (["report", tmp_path / "none.log"], "none.log: not a directory"),
        (["report", tmp_path], "no logs in the DLPerf layout"),
    ]


def test_every_bad_input_is_one_line_exit_2_no_traceback(published, tmp_path):
    for args, expected in _bad_inputs(tmp_path, published):
        r = kit(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0], (args, r.stderr)
        assert "Traceback" not in r.stderr and r.stdout.strip().splitlines()[-1:] != ["0"]


def test_console_script_and_module_agree(published):
    from pathlib import Path

    script = Path(sys.executable).with_name("kit")
    assert script.exists(), "console script `kit` not installed in this environment (make setup)"
    args = ["extract", published / "perf-v100/tensorflow/tf_gpu8_amp_bs256.txt", "--skip", "5"]
    a = subprocess.run([script, *map(str, args)], capture_output=True, text=True)
    assert a.returncode == 0 and a.stdout == kit(*args).stdout


def test_formats_lists_every_parser():
    r = kit("formats")
    names = [line.split()[0] for line in r.stdout.splitlines()]
    assert {"tf2-keras-timehistory", "dle-pytorch", "dle-tf1", "dle-mxnet", "paddleclas"} <= set(names)


def _hostile_inputs(tmp_path, published):
    (tmp_path / "hosts.yaml").write_text("schema_version: 1\nhosts:\n  - {name: a, address: 192.0.2.1}\n"
                                         "  - {name: b, address: 192.0.2.2}\n")
    hosts = ["--hosts-file", tmp_path / "hosts.yaml"]
    (tmp_path / "a-file").write_text("x\n")
    (tmp_path / "digits.log").write_text(':::KITLOG {"event": "step", "global_batch": ' + "1" * 5000
                                         + ', "seconds": 1}\n')
    (tmp_path / "deep.json").write_text('{"schema_version": 1, "groups": ' + "[" * 100000 + "]" * 100000 + "}\n")
    os.mkfifo(tmp_path / "fifo.log")
    runs = tmp_path / "runs"
    return [
        (["check-env", "--hosts", "", *hosts, "--runs-dir", runs], "--hosts '': no host named"),
        (["check-env", "--hosts", "a,b,a", *hosts, "--runs-dir", runs], "--hosts 'a,b,a': a named twice"),
        (["gather-logs", "--hosts", " , ", *hosts, "--run-dir", runs], "--hosts ' , ': no host named"),
        (["stage-data", "--hosts", "b,b", *hosts, "--train-list", tmp_path / "a-file"], "b named twice"),
        (["report", published / "dlperf-tf2-resnet50", "--out", tmp_path / "a-file"],
         "a-file: exists and is not a folder"),
        (["extract", tmp_path / "digits.log"], "digits.log:1: no figure: :::KITLOG line is not valid JSON (Exceeds the limit"),
        (["compare", tmp_path / "deep.json", tmp_path / "deep.json"], "deep.json: not JSON (nested too deeply)"),
        (["extract", "/dev/zero"], "/dev/zero: not a regular file (a pipe, socket or device)"),
        (["extract", tmp_path / "fifo.log"], "fifo.log: not a regular file (a pipe, socket or device)"),
    ]


def test_hostile_inputs_are_one_line_exit_2_not_an_internal_error(published, tmp_path):
    """Issue 15, item 9: each of these was exit 3 (or a hang, or unbounded memory)."""
    for args, expected in _hostile_inputs(tmp_path, published):
        r = subprocess.run([sys.executable, "-m", "kit", *map(str, args)], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert r.stderr.count("\n") == 1 and expected in r.stderr and "internal error" not in r.stderr, (args, r.stderr)
    assert not (tmp_path / "runs").exists()  # check-env made no empty folder


def test_scale_must_be_finite(published):
    log = published / "dlperf-tf2-resnet50/1n1g/rn50_b128_fp32_1.log"
    for scale, said in (("inf", "argument --scale: must be a finite number > 0, got inf"),
                        ("1e308", "288.272 x scale 1e+308 is past the largest number")):
        r = kit("extract", log, "--scale", scale)
        assert r.returncode == 2 and said in r.stderr.splitlines()[-1] and "inf" not in r.stdout, r.stderr


def test_a_runs_dir_the_file_system_refuses_is_one_line_exit_2(tmp_path):
    (tmp_path / "a-file").write_text("")
    for runs_dir in (tmp_path / "a-file" / "runs", "/proc/kit-runs"):
        done = subprocess.run([sys.executable, "-m", "kit", "bench", "--suite", "local", "--runs-dir", str(runs_dir)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done.stderr  # was 3, an "internal error"
        assert done.stderr.count("\n") == 1 and str(runs_dir) in done.stderr and "internal" not in done.stderr
