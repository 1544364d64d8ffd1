"""`kit reproduce BUNDLE --hosts hosts.yaml --scheduler slurm` on the real Slurm test cluster (tests/slurmhosts.py):
a two-node case run by `kit cluster --scheduler slurm`, bundled, then reproduced through the same Slurm path ->
reproduced. One unit with test_slurm.py (conftest SHARED_UNITS): the cluster's ports are fixed."""

from __future__ import annotations

import json

from test_reproduce_hosts import CASE, SUITE, only
from test_slurm import kit_cluster, nothing_left, slurm_yaml

from kit.audit.verify import verify
from kit.cli import main


def test_a_slurm_case_bundled_is_reproduced_on_the_test_cluster(slurm_cluster, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    assert main(kit_cluster(tmp_path, SUITE)) == 0
    packed = tmp_path / "slurm.tgz"
    assert main(["bundle", str(only(tmp_path / "runs")), "--out", str(packed), "--submitter", "t",
                 "--system-name", "t"]) == 0
    assert verify(packed).ok
    capsys.readouterr()
    code = main(["reproduce", str(packed), "--hosts", str(slurm_yaml(tmp_path)), "--scheduler", "slurm",
                 "--runs-dir", str(tmp_path / "again"), "--tolerance", "2"])
    captured = capsys.readouterr()
    print(captured.out)
    run_dir = only(tmp_path / "again")
    said = json.loads((run_dir / "reproduction.json").read_text())
    (verdict,) = said["verdicts"]
    assert (code, verdict["case"], verdict["verdict"]) == (0, CASE, "reproduced"), (verdict, captured.err[-2000:])
    assert said["scheduler"] == "slurm" and said["system_differences"] == []
    meta = json.loads((run_dir / "run.json").read_text())
    (entry,) = meta["runs"].values()
    assert meta["scheduler"] == "slurm" and entry["slurm"]["step_state"] == "COMPLETED"  # a job step ran it
    assert set(entry["hosts"]) == {"h2", "h3"} and meta["selection"]["cases"] == [CASE]
    nothing_left(slurm_cluster)
