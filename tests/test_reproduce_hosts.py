"""`kit reproduce BUNDLE --hosts hosts.yaml` on the real SSH test hosts (tests/nethosts.py): a two-host CPU run made by
`kit cluster`, bundled, then reproduced on the same hosts through kit cluster's own run path -> reproduced."""

from __future__ import annotations

import json
from pathlib import Path

from test_multinode import TWO_NODE_SUITE, hosts_yaml, write_suite

from kit.audit.verify import verify
from kit.cli import main

# the fewest steps a bundle verifies with (rule measured_steps: 10); one repeat: the point ratio decides
SUITE = TWO_NODE_SUITE
CASE = "paddle/resnet50/bz2/2n1g/fp32"


def only(folder: Path) -> Path:
    (found,) = folder.iterdir()
    return found


def bundled_and_reproduced(tmp_path: Path, capsys, *where: str) -> tuple[Path, dict, str]:
    """The one run under tmp_path/runs bundled (it verifies), then `kit reproduce` of the bundle WHERE (its hosts
    flags) with tolerance 2, which says reproduced: (its run directory, reproduction.json, what it wrote on stderr)."""
    packed = tmp_path / "original.tgz"
    assert main(["bundle", str(only(tmp_path / "runs")), "--out", str(packed), "--submitter", "t",
                 "--system-name", "t"]) == 0
    assert verify(packed).ok
    capsys.readouterr()
    code = main(["reproduce", str(packed), *where, "--runs-dir", str(tmp_path / "again"), "--tolerance", "2"])
    captured = capsys.readouterr()
    print(captured.out)
    run_dir = only(tmp_path / "again")
    said = json.loads((run_dir / "reproduction.json").read_text())
    (verdict,) = said["verdicts"]
    assert (code, verdict["case"], verdict["verdict"]) == (0, CASE, "reproduced"), (verdict, captured.err[-2000:])
    return run_dir, said, captured.err


def test_a_two_host_run_bundled_is_reproduced_on_the_ssh_hosts(ssh_hosts, tmp_path, capsys):
    inventory = hosts_yaml(ssh_hosts, tmp_path)
    assert main(["cluster", "--suite", str(write_suite(tmp_path, SUITE)), "--hosts-file", str(inventory),
                 "--runs-dir", str(tmp_path / "runs")]) == 0
    run_dir, said, err = bundled_and_reproduced(tmp_path, capsys, "--hosts", str(inventory))
    assert said["hosts"] == str(inventory) and said["scheduler"] == "ssh" and not any(said["system_differences"].values()) and said["time_limits"] and all(v >= 60 for v in said["time_limits"].values())
    assert "estimated time: " in err and "from the bundle's own runs of these cases" in err
    meta = json.loads((run_dir / "run.json").read_text())
    (entry,) = meta["runs"].values()
    assert set(entry["hosts"]) == {"h1", "h2"} and meta["selection"]["cases"] == [CASE]  # the SSH hosts ran it
