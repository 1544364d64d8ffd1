"""bench/scale.py's generated run directory, at a tiny size, is one the kit accepts as a real run: `kit report`,
`kit bundle` and `kit verify` read it, and every rule that generated data can satisfy holds (every file intact,
every rank logged, each command record the recipe's, results and report recomputed from the logs)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from kit.cli.main import main

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import scale  # noqa: E402

# Rules no replayed real log of a published program can satisfy (see bench/scale.py's docstring): the suite's
# harness step counts (warm-up 20, measured 100) are applied to the publishers' own reductions, and PLSC's
# references are in samples/s where its parser reports images/s.
# program_figure_agrees_with_its_clock: the generator replays real logs of another GPU count or batch for some cases
# (a 32-GPU DLE log on N nodes, a bs256 TF log for bz128), whose rates their own clock shows for that other job
UNSATISFIABLE = {"warmup_skipped", "measured_steps", "references_hold", "program_figure_agrees_with_its_clock"}


def test_generated_run_is_read_by_report_bundle_and_verify(tmp_path, capsys):
    run_dir, counts = scale.generate(tmp_path, nodes=2, repeats=1, trim=True)
    assert counts["runs"] >= 20 and counts["rank_logs"] > counts["runs"]
    hosts = {p.name for p in (run_dir / "hosts").iterdir()}
    assert hosts == {"h01", "h02"} and (run_dir / "env" / "h02" / "capture.json").is_file()
    assert list(run_dir.glob("hosts/h02/*/*/bz*/2n8g/*/1/launcher/workerlog.7")), "every rank's log on every host"

    assert main(["report", str(run_dir), "--out", str(tmp_path / "report")]) == 0
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    assert sum(len(c["runs"]) for g in results["groups"] for c in g["cases"]) == counts["runs"]
    capsys.readouterr()

    bundle = tmp_path / "run.bundle.tar.gz"
    main(["bundle", str(run_dir), "--out", str(bundle), "--submitter", "bench", "--system-name", "scale"])
    assert bundle.is_file()
    capsys.readouterr()
    main(["verify", str(bundle)])
    out = capsys.readouterr().out
    failed = {line.split()[1].rstrip(":") for line in out.splitlines() if line.startswith("  FAIL ")}
    assert failed <= UNSATISFIABLE, out[-3000:]
    for rule in ("program_as_published", "program_code_at_pin", "program_every_rank_logged", "repeats_as_declared",
                 "every_rank_logged", "no_nan_or_failed_step", "same_global_batch", "environment_consistent",
                 "results_recomputed", "report_recomputed"):
        assert f"OK   {rule}:" in out, (rule, out[-3000:])
    assert "integrity" not in out and "system_description_recomputed" not in out and "[readable]" not in out
