"""The closed world of a harness log (rule set v3): consistent forgeries of a REAL CPU run, each with its report,
results and bundle rebuilt to agree with the forged log, fail verify by the rule that names them; rule set v2,
which checked only what its rules named, passes the ones it missed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import SHARED, redeclare_suite
from kitlogs import rewrite_kitlog

from kit.audit import bundle as bd
from kit.audit import rules as rl
from kit.audit.verify import verify
from kit.config.suites import load_suite
from kit.run import bench, records

SUITE = """\
schema_version: 1
name: closed
description: one case, two repeats, for the closed-world forgeries
hardware: cpu
defaults: {warmup_steps: 2, measure_steps: 10, repeats: 2, batch_size: 2, image_size: 32, num_classes: 10,
           timeout_s: 300}
cases:
  - framework: torch
    model: resnet50
"""
LOG = "logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_{}.log"


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("closed")
    (base / "closed.yaml").write_text(SUITE)
    run_dir, suite = records.start(base / "closed.yaml", base / "runs")
    result = bench.run_bench(run_dir, suite)
    assert not result.failed, [o.reason for o in result.failed]
    return run_dir


def forged(real_run: Path, tmp_path: Path, edit) -> Path:
    """A copy of the run, EDIT(run_dir) applied to it, its report and results written again from the logs: a
    forger who keeps every derived file consistent."""
    run = tmp_path / "runs" / real_run.name
    shutil.copytree(real_run, run)
    edit(run)
    bench.write_report(run, load_suite(run / "suite.yaml"))
    return bd.make_bundle(run, submitter="Lab", system_name="box")


def on_steps(change):
    return lambda d: change(dict(d)) if d.get("event") == "step" else d


def on_start(**fields):
    return lambda d: d | fields if d.get("event") == "run_start" else d


def on_stop(**fields):
    return lambda d: d | fields if d.get("event") == "run_stop" else d


def log_edit(edit, repeat: int = 1):
    return lambda run: rewrite_kitlog(run / LOG.format(repeat), edit)


def copy_repeat(run: Path) -> None:
    """Repeat 2 replaced by repeat 1 with one byte changed (a space): not a byte copy, the same run."""
    text = (run / LOG.format(1)).read_text()
    (run / LOG.format(2)).write_text(text.replace('"step", ', '"step",  ', 1))


def shift_repeat(run: Path) -> None:
    """Repeat 2 replaced by repeat 1 moved on the clock to where repeat 2 ran: a near copy, inside the run's window."""
    def start_ms(path: Path) -> int:
        return next(json.loads(line.split(":::KITLOG ", 1)[1])["time_ms"] for line in path.read_text().splitlines()
                    if '"event": "run_start"' in line)

    shift = start_ms(run / LOG.format(2)) - start_ms(run / LOG.format(1))
    (run / LOG.format(2)).write_text((run / LOG.format(1)).read_text())
    rewrite_kitlog(run / LOG.format(2), lambda d: d | {"time_ms": d["time_ms"] + shift} if "time_ms" in d else d)


def faster_by(factor: float):
    """Every step's seconds x FACTOR, its rate and run_stop's seconds and figure written to agree: the grammar holds."""
    def edit(d: dict) -> dict:
        if d.get("event") == "step":
            seconds = round(d["seconds"] * factor, 6)
            return d | {"seconds": seconds, "samples_per_sec": round(d["global_batch"] / seconds, 3)}
        if d.get("event") == "run_stop":
            seconds = round(d["seconds"] * factor, 6)
            figure = round(d["samples_per_sec"] / factor, 3)
            return d | {"seconds": seconds, "samples_per_sec": figure, "throughput": figure}
        return d
    return edit


def append_mllog(run: Path) -> None:
    log = run / LOG.format(1)
    lines = log.read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if '"event": "run_stop"' in line)
    mllog = [':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "tracked_stats", '
             f'"value": {{"throughput": 9999.0}}, "metadata": {{"step": {50 + i}}}}}\n' for i in range(10)]
    log.write_text("".join(lines[:at] + mllog + lines[at:]))


def text_edit(change, repeat: int = 1):
    def edit(run: Path) -> None:
        log = run / LOG.format(repeat)
        log.write_text(change(log.read_text()))
    return edit


def halved_behind_bare_cr(run: Path) -> None:
    """Every step twice as fast (grammar-consistent), and bare carriage returns on the log's first line: a reader
    splitting there numbered the lines apart from the figure's, so the clock found no step in the window."""
    rewrite_kitlog(run / LOG.format(1), faster_by(0.5))
    text_edit(lambda t: t.replace("\n", "\r\r\r\n", 1))(run)


def hidden_fragment_steps(text: str) -> str:
    """Ten 1 ms steps behind mpirun's tags before run_stop (a parser joining fragments counted them, the rules
    skipped them)."""
    lines = text.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if '"event": "run_stop"' in line)
    step = json.loads(next(line for line in lines if '"event": "step"' in line).split(":::KITLOG ", 1)[1])
    extra = ["[1,0]<stdout>::::KITLOG " + json.dumps(step | {"seconds": 0.001, "samples_per_sec": 2000.0}) + "\n"
             for _ in range(10)]
    return "".join(lines[:at] + extra + lines[at:])


def untimed_head(d: dict) -> dict:
    return {k: v for k, v in d.items() if k != "time_ms"} if d.get("event") in ("run_start", "warmup_end") else d


def epochs_in_an_image_log(d: dict):
    """An epoch record (an NLP model's, timed by epochs) after every step of a ResNet50 log."""
    if d.get("event") != "step":
        return d
    return [d, {"kit": 1, "event": "epoch", "time_ms": d["time_ms"], "epoch": d["step"], "steps": 1,
                "sequences": 4 * d["global_batch"], "tokens": 0, "seconds": d["seconds"], "unit": "sequences/s",
                "throughput": 4 * d["global_batch"] / d["seconds"]}]


def corpus_before_each_step(d: dict):
    """A corpus record half a step before each step (it reset the clock each step was measured from)."""
    if d.get("event") != "step":
        return d
    return [{"kit": 1, "event": "corpus", "time_ms": d["time_ms"] - round(d["seconds"] * 500), "batches_per_epoch": 1,
             "sequences_per_epoch": 2, "tokens_per_epoch": 0}, d]


FORGERIES = {  # name: (edit, the rule that fails it, a piece of its message, v2 passes it (the one reader refuses a
    # log outside the harness's grammar under every rule set: only v6 names why, every_log_read))
    "steps-of-a-larger-global-batch": (
        log_edit(on_steps(lambda d: d | {"global_batch": 8, "samples_per_sec": 8 / d["seconds"]})),
        "every_log_read", "global_batch 8 (run_start: 2)", False),
    "steps-without-their-clock": (
        log_edit(on_steps(lambda d: {k: v for k, v in d.items() if k != "time_ms"})),
        "every_log_read", "a 'step' record without its clock", False),
    "mllog-records-in-a-harness-log": (append_mllog, "every_log_read", "an MLLOG record in a harness log", False),
    "every-step-x0.74": (
        log_edit(on_steps(lambda d: d | {"seconds": round(d["seconds"] * 0.74, 6)})),
        "every_log_read", "samples_per_sec", False),
    "every-step-x0.74-rates-and-run_stop-too": (log_edit(faster_by(0.74)), "steps_agree_with_their_clock",
                                                "less than 97%", True),
    "loader-only": (log_edit(on_start(loader_only=True)), "every_log_read", "where train.py writes 'input_rate'",
                    False),
    "images-outside-the-data-root": (log_edit(on_start(allow_outside_root=True, outside_root=3)),
                                     "log_is_the_harness_own", "it read 3 image(s) outside its data root", True),
    "decode-counts-of-a-loader-it-did-not-run": (
        log_edit(on_stop(decode_calls=3, decoded_batches=3, refused_batches=0)), "log_is_the_harness_own",
        "decode counts 3/3/0 (calls/batches/refused) from loader 'synthetic'", True),
    "a-gpu-loader-decoding-with-an-unknown-decoder": (
        log_edit(on_start(loader="gpu", decode_device="gpu", decoder="fast-magic")), "every_log_read",
        "a 'warmup_end' record where train.py writes 'input_rate'", False),  # a real-data run probes its input
    "two-classes": (log_edit(on_start(num_classes=2)), "log_states_its_case", "num_classes 2 (the case: 10)", True),
    "fewer-warm-up-steps": (log_edit(on_start(warmup_steps=0)), "every_log_read",
                            "a 'warmup_end' record where train.py writes 'step'", False),
    "a-gpu-log-on-a-cpu-suite": (
        log_edit(on_start(device="gpu", device_name="NVIDIA H100 80GB HBM3")),
        "log_is_the_harness_own", "device 'gpu' on a cpu suite", True),
    "another-host": (log_edit(on_start(host="elsewhere")), "log_is_the_harness_own", "host 'elsewhere'", True),
    "an-unknown-record": (
        log_edit(lambda d: [d, {"kit": 1, "event": "bonus", "time_ms": d["time_ms"]}]
                 if d.get("event") == "warmup_end" else d),
        "every_log_read", "a 'bonus' record where train.py writes 'step'", False),
    "halved-behind-bare-carriage-returns": (halved_behind_bare_cr, "every_log_read",
                                            "a stray control character '\\r'", False),
    "ten-hidden-steps-behind-mpirun-tags": (text_edit(hidden_fragment_steps), "every_log_read",
                                            "a :::KITLOG record behind '[1,0]<stdout>:'", False),
    "untimed-run_start-and-warmup_end-halved-steps": (
        lambda run: rewrite_kitlog(run / LOG.format(1), lambda d: untimed_head(faster_by(0.5)(d))),
        "every_log_read", "a 'run_start' record without its clock", False),
    "nlp-epoch-records-in-a-resnet50-log": (log_edit(epochs_in_an_image_log), "every_log_read",
                                            "an 'epoch' record where train.py writes 'step'", False),
    "a-corpus-record-before-each-step": (log_edit(corpus_before_each_step), "every_log_read",
                                         "a 'corpus' record where train.py writes 'step'", False),
    "a-repeat-copied-plus-one-byte": (copy_repeat, "repeats_are_separate_runs", "ran at the same time", False),
    "a-repeat-copied-later-on-the-clock": (shift_repeat, "repeats_are_separate_runs", "the same 10 step seconds",
                                           True),
}


@pytest.mark.parametrize("name", sorted(FORGERIES))
def test_a_consistent_forgery_fails_the_closed_world(real_run, tmp_path, name):
    edit, rule, says, v2_passes = FORGERIES[name]
    bundle = forged(real_run, tmp_path, edit)
    result = verify(bundle)
    said = [v.message for v in result.violations if v.rule == rule]
    assert said, [(v.rule, v.message) for v in result.violations]
    assert any(says in message for message in said), said
    if v2_passes:  # the hole was real: the rules before v3 let it through
        assert verify(bundle, rules_version="v2").ok, name


def test_genuine_repeats_lie_far_above_the_affine_copy_bound(real_run):
    """The bound repeats_are_separate_runs@2 draws, measured: every pair of genuine repeats the kit holds (the H200
    visit's ResNet50 and VGG16 runs, 20-100 steps; this CPU run's pair) leaves a residual of 5.5e-05 s or more
    (4.7e-04 of the mean step) after the best straight line, over 25x AFFINE_COPY_S and 9x AFFINE_COPY_SHARE."""
    from kit.audit.rules.closed import AFFINE_COPY_S, AFFINE_COPY_SHARE, AFFINE_MIN_STEPS, affine_residual
    from kit.results.parsers import harnesslog

    visit = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128"
    cases: dict[str, list[tuple[float, ...]]] = {}
    for log in sorted([*visit.rglob("logs/torch/*/*/1n1g/*.log"), *real_run.rglob("logs/*/*/*/1n1g/*.log")]):
        seconds = tuple(e.data["seconds"] for e in harnesslog.read(log).of("step"))
        if len(seconds) >= AFFINE_MIN_STEPS:
            cases.setdefault(str(log.parent / log.stem.rsplit("_", 1)[0]), []).append(seconds)
    pairs = [(a, b) for runs in cases.values() for i, a in enumerate(runs) for b in runs[i + 1:] if len(a) == len(b)]
    assert len(pairs) >= 10, sorted(cases)
    residuals = [affine_residual(a, b) for a, b in pairs]
    shares = [r / (sum(b) / len(b)) for r, (_a, b) in zip(residuals, pairs, strict=True)]
    assert min(residuals) >= 25 * AFFINE_COPY_S, min(residuals)  # 5.5e-5
    assert min(shares) >= 9 * AFFINE_COPY_SHARE, min(shares)  # 4.7e-4
    copy = pairs[0][0]
    assert affine_residual(copy, tuple(round(x * 0.97 + 5e-6, 6) for x in copy)) < AFFINE_COPY_S


def shift_repeat_by(extra_s: float, scale: float = 1.0):
    """Repeat 2 replaced by repeat 1 moved on the clock to where repeat 2 ran, each step's seconds x SCALE + EXTRA_S
    (its rate, run_stop and clock written to agree): a copy no field equals."""
    def edit(run: Path) -> None:
        shift_repeat(run)
        log = run / LOG.format(2)

        def steps(d: dict) -> dict:
            if d.get("event") == "step":
                seconds = round(d["seconds"] * scale + extra_s, 6)
                return d | {"seconds": seconds, "samples_per_sec": round(d["global_batch"] / seconds, 3)}
            return d
        rewrite_kitlog(log, steps)
        total = round(sum(json.loads(line.split(":::KITLOG ", 1)[1])["seconds"] for line in log.read_text().splitlines()
                          if '"event": "step"' in line), 6)
        figure = round(2 * 10 / total, 3)  # batch 2, 10 steps
        rewrite_kitlog(log, lambda d: d | {"seconds": total, "samples_per_sec": figure, "throughput": figure}
                       if d.get("event") == "run_stop" else d)
    return edit


@pytest.mark.parametrize(("extra_s", "scale"), [(5e-6, 1.0), (0.0, 0.97), (-2e-4, 0.99)])  # shorter: within the clock
def test_a_repeat_copied_and_shifted_or_scaled_is_one_run_s_clock(real_run, tmp_path, extra_s, scale):
    """Rule set v6 (repeats_are_separate_runs@2): a straight line maps the copy's step seconds onto the original's;
    v5 compared them only for equality within 1 us. (A copy 3% faster sits at the edge of v9's 97% fill of its clock,
    steps_agree_with_their_clock@3: that rule may name it too.)"""
    bundle = forged(real_run, tmp_path, shift_repeat_by(extra_s, scale))
    said = {v.rule: v.message for v in verify(bundle).violations}
    assert "repeats_are_separate_runs" in said and set(said) <= {"repeats_are_separate_runs"} | (
        {"steps_agree_with_their_clock"} if scale < 0.98 else set()), said
    assert "have step seconds one straight line maps onto each other" in said["repeats_are_separate_runs"], said
    assert verify(bundle, rules_version="v5").ok


def test_a_bundle_made_under_an_older_rule_set_is_told_which_failing_rules_are_newer(real_run, tmp_path, capsys):
    """The shifted copy, bundled by a kit whose rule set was v5: the newest set fails it, and says that the rule failing came
    after v5, which the bundle passes (the verdict stays NOT OK)."""
    from kit.cli import main

    root = bd.unpack(forged(real_run, tmp_path, shift_repeat_by(5e-6)), tmp_path / "open")
    provenance = json.loads((root / "provenance.json").read_text())
    (root / "provenance.json").write_text(json.dumps(provenance | {"rules_version": "v5"}, indent=2))
    bd.write_manifest(root)
    result = verify(root)
    assert (result.ok, result.newer_rules_failed) == (False, ["repeats_are_separate_runs"])
    assert main(["verify", str(root)]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(f": rule set {rl.newest()}; the bundle was made under 'v5': another rule set judges it")
    assert "  FAIL repeats_are_separate_runs: 1 checked  (recorded before repeats_are_separate_runs@2; passes v5, " \
           "the rule set the bundle was made under)" in out
    assert "  recorded before repeats_are_separate_runs (added or tightened after v5); the bundle passes it as v5 " \
           "judges: `kit verify --rules v5`" in out
    assert main(["verify", str(root), "--rules", "v5"]) == 0
    assert verify(root, rules_version="v5").newer_rules_failed == []


def test_the_genuine_run_holds_every_rule_of_the_closed_world(real_run, tmp_path, capsys):
    from kit.cli import main

    bundle = bd.make_bundle(real_run, tmp_path / "genuine.tar.gz", submitter="Lab", system_name="box")
    result = verify(bundle)
    assert result.ok, [(v.rule, v.message) for v in result.violations]
    checked = {f.rule.name: f.checked for f in result.findings}
    assert checked["log_is_the_harness_own"] == 2 and checked["repeats_are_separate_runs"] == 1
    main(["verify", str(bundle), "--json"])
    said = json.loads(capsys.readouterr().out)
    assert said["consistent"] is True and {r["rule"]: r["predicate"] for r in said["rules"]}[
        "log_is_the_harness_own"] == "harness_log_closed@2"


GPU_RUN = SHARED / "fixtures" / "gpu-runs" / "h100-one-20261126-175228"  # a real H100 run (recorded)


def test_the_recorded_h100_run_holds_and_filed_as_this_cpu_hosts_it_fails(real_run, tmp_path):
    def edit_suite(run: Path, old: str, new: str) -> None:
        redeclare_suite(run, (run / "suite.yaml").read_text().replace(old, new))

    def layout_said(run: Path) -> None:  # the layout it ran in said (today's GPU suites default amp to nhwc)
        edit_suite(run, "defaults:\n", "defaults:\n  layout: nchw\n")

    genuine = verify(forged(GPU_RUN, tmp_path / "genuine", layout_said))
    assert not genuine.violations, genuine.violations
    assert {f.rule.name: f.checked for f in genuine.findings}["log_is_the_harness_own"] == 4

    def as_this_cpu_host(run: Path) -> None:  # this CPU host's captures swapped in, the suite said to be a CPU's
        layout_said(run)
        shutil.rmtree(run / "env" / "vm")
        (captured,) = (real_run / "env").iterdir()
        shutil.copytree(captured, run / "env" / "vm")
        edit_suite(run, "hardware: gpu", "hardware: cpu")

    result = verify(forged(GPU_RUN, tmp_path / "swapped", as_this_cpu_host))
    said = [v.message for v in result.violations if v.rule == "log_is_the_harness_own"]
    assert len(said) == 4 and all("device 'gpu' on a cpu suite" in m for m in said), result.violations


def test_verify_checks_the_recorded_code_and_says_when_it_is_not_this_kits(real_run, tmp_path):
    def meta_edit(change):
        def edit(run: Path) -> None:
            meta = json.loads((run / "run.json").read_text())
            change(meta)
            (run / "run.json").write_text(json.dumps(meta, indent=2))
        return edit

    def other_harness(meta: dict) -> None:
        meta["kit_commit"] = {"commit": "0" * 40, "dirty": True}
        meta["harness_sha256"]["train.py"] = "f" * 64

    noted = verify(forged(real_run, tmp_path / "other", meta_edit(other_harness)))
    finding = next(f for f in noted.findings if f.rule.name == "code_that_ran_recorded")
    assert not finding.violations and "uncommitted changes at 000000000000" in finding.note
    assert "its harness differs from this kit's in train.py" in finding.note
    report = tmp_path / "other" / "runs" / real_run.name / "report.md"
    assert "**The kit's checkout had uncommitted changes**" in report.read_text()

    gone = verify(forged(real_run, tmp_path / "gone", meta_edit(lambda m: m.pop("harness_sha256"))))
    assert [v.message for v in gone.violations if v.rule == "code_that_ran_recorded"] == [
        "run.json's harness_sha256 is not the sha256 of each harness file (train.py among them)"]
