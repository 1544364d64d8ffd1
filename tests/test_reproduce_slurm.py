"""`kit reproduce BUNDLE --hosts hosts.yaml --scheduler slurm` on the real Slurm test cluster (tests/slurmhosts.py):
a two-node case run by `kit cluster --scheduler slurm`, bundled, then reproduced through the same Slurm path ->
reproduced. One unit with test_slurm.py (conftest SHARED_UNITS): the cluster's ports are fixed."""

from __future__ import annotations

import json

from test_reproduce_hosts import CASE, SUITE, bundled_and_reproduced
from test_slurm import kit_cluster, nothing_left, slurm_yaml

from kit.cli import main


def test_a_slurm_case_bundled_is_reproduced_on_the_test_cluster(slurm_cluster, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    assert main(kit_cluster(tmp_path, SUITE)) == 0
    run_dir, said, _err = bundled_and_reproduced(tmp_path, capsys, "--hosts", str(slurm_yaml(tmp_path)),
                                                 "--scheduler", "slurm")
    assert said["scheduler"] == "slurm" and not any(said["system_differences"].values()) and said["time_limits"] and all(v >= 60 for v in said["time_limits"].values())
    meta = json.loads((run_dir / "run.json").read_text())
    (entry,) = meta["runs"].values()
    assert meta["scheduler"] == "slurm" and entry["slurm"]["step_state"] == "COMPLETED"  # a job step ran it
    assert set(entry["hosts"]) == {"h2", "h3"} and meta["selection"]["cases"] == [CASE]
    nothing_left(slurm_cluster)
