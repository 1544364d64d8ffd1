"""A published program's real log as a run of a run directory, for tests: the log at its case's place with the command
record this kit's recipe writes for that case (program_run: what a rule alone judges), and that completed into a run
directory as kit bench records one (recorded_program_run: what a bundle holds and kit verify judges whole)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from conftest import PUBLISHED
from kitlogs import recorded_clean

from kit.config.programs import IMPLS
from kit.config.reference import Cluster, RefJob, build, record
from kit.core.layout import sidecar_name

VISIT = Path(__file__).resolve().parent / "fixtures" / "gpu-runs" / "h200-20261128" / "dle"  # a GPU host, captured
SUITE = """\
schema_version: 1
name: echo
hardware: gpu
defaults: {{repeats: 1, timeout_s: 120}}
cases:
  - {{framework: {framework}, impl: reference, model: {model}, precision: {precision}, batch_size: {batch},
      nodes: 1, gpus_per_node: {gpus}}}
"""


def program_run(tmp_path: Path, case: str, published: str, edit=lambda text: text) -> tuple[Path, str]:
    """CASE: 'framework/model/batch/precision/gpus'; PUBLISHED: a log under published-logs/ (or an absolute path: a
    genuine log kept elsewhere, tests/fixtures/genuine-cpu-logs/)."""
    framework, model, batch, precision, gpus = case.split("/")
    impl = IMPLS[(framework, model)]
    job = RefJob(framework, model, precision, int(batch), int(gpus))
    (tmp_path / "suite.yaml").write_text(SUITE.format(framework=framework, model=model, precision=precision,
                                                      batch=batch, gpus=gpus))
    rel = f"logs/{impl.name}/{model}/bz{batch}/1n{gpus}g/{model}_b{batch}_{precision}_1.log"
    log = tmp_path / rel
    log.parent.mkdir(parents=True)
    log.write_text(edit((PUBLISHED / published).read_text(errors="replace")))
    cluster = Cluster()
    meta = record(build(job, cluster, recipe_only=True), job, cluster)
    log.with_name(sidecar_name(log.name)).write_text(json.dumps(meta))
    return tmp_path, rel


def recorded_program_run(run_dir: Path, case: str, published: str) -> tuple[Path, str]:
    """program_run's run directory completed as kit bench records a run: run.json through kit.run.records (its
    provenance, the frozen suite, the planned and the finished run with the figure its log gives), the report through
    kit.run.bench.write_report. DERIVED, since the publisher's run was not made by this kit: the GPU host is the H200
    visit's, as it captured it (env/ and run.json's host; the published run's own host was never captured); its GPUs
    were not sampled (no run.json gpu_telemetry, as a run recorded before the sampler); its command record says it ran
    the checkout clean at docker/pins.yaml's pin (model_code_commit; kitlogs.recorded_clean)."""
    from kit.config.expansion import FROZEN_KEY, freeze
    from kit.config.suites import load_suite
    from kit.images.spec import pin_of
    from kit.run import bench, records
    from kit.run.plan import PlannedRun

    run_dir, rel = program_run(run_dir, case, published)
    suite = load_suite(run_dir / "suite.yaml")
    (planned,) = [PlannedRun(c, 1) for c in suite.cases]
    assert str(planned.log_rel) == rel
    sidecar = (run_dir / rel).with_name(sidecar_name(Path(rel).name))
    command = json.loads(sidecar.read_text())
    command["model_code_commit"] = pin_of(IMPLS[tuple(case.split("/")[:2])].code)
    sidecar.write_text(json.dumps(command))
    recorded_clean(run_dir)
    host = json.loads((VISIT / "run.json").read_text())["host"]
    meta = records.open_run_meta(run_dir, suite, host=host, **{FROZEN_KEY: freeze(suite)})
    del meta["gpu_telemetry"]
    shutil.copytree(VISIT / "env", run_dir / "env")
    records.note_planned(meta, [planned])
    figure = records.measure_of(run_dir / rel, run_dir / "logs")
    records.record_run(run_dir, meta, planned, "ok", figure.value, 0.0, "", figure.unit)
    records.finish_run_meta(run_dir, meta)
    bench.write_report(run_dir, suite, plots=False)
    return run_dir, rel
