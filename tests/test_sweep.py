"""`kit sweep` on real SSH hosts (network namespaces): every host its own runs at once, the held-back host named."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from nethosts import hold_cpu, release_cpu
from test_multinode import FAB, REPO, harness_on, hosts_yaml, wait_for_training

from kit.cli import main
from kit.core import rundir
from kit.results import stats

SUITE = """\
schema_version: 1
name: tiny
description: torch ResNet50 on CPU, tiny
hardware: cpu
defaults: {warmup_steps: 1, measure_steps: 10, repeats: REPEATS, batch_size: 2, image_size: 32, num_classes: 10,
           timeout_s: 240}
cases:
  - {framework: torch, model: resnet50, nodes: 1, gpus_per_node: 1}
"""
# the peers h1 and h2 half of CPU 0 each, h3 held to a quarter of CPU 1 (peers on two CPUs differed by 19% beside the
# suite's other workers: a vCPU's speed is not its neighbour's; the peers share one)
SHARES = {"h1": (0.5, "0"), "h2": (0.5, "0"), "h3": (0.25, "1")}


def write_suite(where: Path, repeats: int) -> Path:
    path = where / "tiny.yaml"
    path.write_text(SUITE.replace("REPEATS", str(repeats)))
    return path


def kitlog_events(log: Path) -> list[dict]:
    return [json.loads(line.split(" ", 1)[1]) for line in log.read_text().splitlines() if line.startswith(":::KITLOG")]


@pytest.fixture(scope="module")
def held_sweep(ssh_hosts, tmp_path_factory):
    """One fab sweep over h1, h2, h3 with h3's sessions held to a quarter of a core: (exit code, stdout, run dir)."""
    tmp = tmp_path_factory.mktemp("sweep")
    inventory = hosts_yaml(ssh_hosts, tmp)
    made = []
    try:
        for name, (cores, cpus) in SHARES.items():
            made += hold_cpu(ssh_hosts, name, cores, cpus)
        out = subprocess.run([str(FAB), "-H", "h1,h2,h3", "sweep", "--suite", str(write_suite(tmp, 3)),
                              "--hosts-file", str(inventory), "--runs-dir", str(tmp / "runs")],
                             cwd=REPO, capture_output=True, text=True, timeout=600)
    finally:
        release_cpu(made)
    (run_dir,) = list((tmp / "runs").iterdir())
    return out.returncode, out.stdout + out.stderr, run_dir


def test_held_back_host_is_named_with_its_quota_and_the_others_within_noise(held_sweep):
    rc, output, run_dir = held_sweep
    assert rc == 1, output[-4000:]  # an outlier: the fleet is not healthy
    fleet = rundir.read_results(run_dir)["fleet"]
    worst, *others = fleet["hosts"]
    assert worst["host"] == "h3" and worst["differs"] and worst["worst_ratio"] < 1, fleet
    assert worst["evidence"][0]["what"] == "CPU quota", worst["evidence"]
    assert worst["evidence"][0]["host"].startswith("0.25 of a core"), worst["evidence"]
    assert worst["evidence"][0]["peers"] == ["0.5 of a core (cgroup cpu.cfs_quota_us)"] or \
        worst["evidence"][0]["peers"] == ["0.5 of a core (cgroup cpu.max)"]
    assert sorted(h["host"] for h in others) == ["h1", "h2"]
    assert all(h["status"] == "ok" and not h["differs"] for h in others), others
    verdict = fleet["verdict"]
    assert verdict.startswith("2 of 3 hosts within noise of the fleet's median") and "; h3 \u2212" in verdict
    assert "CPU quota 0.25 of a core" in verdict, verdict
    assert verdict in output and verdict in (run_dir / "report.md").read_text()
    page = (run_dir / "report.html").read_text()
    assert verdict in page and "<table>" in page and "<script" not in page  # one self-contained page


def test_every_host_ran_its_own_runs_at_the_same_time(held_sweep):
    _rc, _output, run_dir = held_sweep
    assert rundir.read_sweep(run_dir)["hosts"] == ["h1", "h2", "h3"]
    spans = {}
    for host in ("h1", "h2", "h3"):
        part = rundir.sweep_host_dir(run_dir, host)
        record = rundir.read_run(part)
        assert record.hosts == [host] and record.finished
        assert [(e.repeat, e.status) for e in record.runs.values()] == [(1, "ok"), (2, "ok"), (3, "ok")]
        assert rundir.capture_path(run_dir / "env", host).is_file()  # captured first, at the sweep's top
        logs = sorted((part / "logs").rglob("*.log"))
        events = [kitlog_events(log) for log in logs]
        assert all(e[0]["host"] == host for e in events)
        spans[host] = (events[0][0]["time_ms"], events[-1][-1]["time_ms"])
    # each host's first run started before every other host's last run ended: the hosts ran at once
    assert all(start < end for host, (start, _) in spans.items() for other, (_, end) in spans.items())
    for host in ("h1", "h2", "h3"):
        assert f"[hosts/{host}/report.md]" in (run_dir / "report.md").read_text()


def test_a_host_lost_mid_sweep_is_a_row_and_resume_redoes_only_its_runs(ssh_hosts, tmp_path, capsys):
    inventory = hosts_yaml(ssh_hosts, tmp_path)
    runs = tmp_path / "runs"
    argv = ["sweep", "--suite", str(write_suite(tmp_path, 1)), "--hosts", "h1,h2", "--hosts-file", str(inventory),
            "--runs-dir", str(runs)]  # one run a host: what is tested is the lost host's row and its resume
    result = {}
    worker = threading.Thread(target=lambda: result.setdefault("rc", main(argv)))
    worker.start()
    try:
        wait_for_training(tmp_path / "work" / "h2")
        ssh_hosts.stop_host("h2")
        worker.join(timeout=300)
        assert not worker.is_alive()
    finally:
        ssh_hosts.start_host("h2")
    assert result["rc"] == 1
    (run_dir,) = list(runs.iterdir())
    rows = rundir.read_sweep(run_dir)["rows"]
    assert rows["h1"]["status"] == "ok" and rows["h2"]["status"] == "unreachable", rows
    assert rows["h2"]["reason"].startswith("lost mid-sweep (") and "#1: failed" in rows["h2"]["reason"], rows
    fleet = rundir.read_results(run_dir)["fleet"]
    assert fleet["hosts"][0]["host"] == "h2" and fleet["hosts"][0]["status"] == "unreachable"
    assert "h2 unreachable: lost mid-sweep" in fleet["verdict"] and fleet["verdict"].startswith("1 of 2 hosts within")
    # bundled as it is: the lost host a named row (its records carried and shown), not a bundle that fails
    assert main(["bundle", str(run_dir), "-o", str(tmp_path / "lost.tar.gz")]) == 0
    assert main(["verify", str(tmp_path / "lost.tar.gz")]) == 0
    said = capsys.readouterr().out
    assert re.search(r"\n  h1 +OK +every rule holds, 1 figure\(s\)", said), said
    assert re.search(r"\n  h2 +n/a .* not counted: it gives no figure.*\[unreachable: lost mid-sweep \(", said), said
    assert "\nCONSISTENT, authenticity NOT checked" in said and "but for the records of h2" in said
    h1_runs = {log: e.fields for log, e in rundir.read_run(rundir.sweep_host_dir(run_dir, "h1")).runs.items()}
    assert [e["status"] for e in h1_runs.values()] == ["ok"]
    # resume: h2's runs without a figure again, h1's left as they were
    assert main(["sweep", "--resume", str(run_dir), "--hosts-file", str(inventory)]) == 0
    again = {log: e.fields for log, e in rundir.read_run(rundir.sweep_host_dir(run_dir, "h1")).runs.items()}
    assert again == h1_runs
    h2 = rundir.read_run(rundir.sweep_host_dir(run_dir, "h2"))
    assert [e.status for e in h2.runs.values()] == ["ok"]
    assert rundir.read_sweep(run_dir)["rows"]["h2"]["status"] == "ok"
    fleet = rundir.read_results(run_dir)["fleet"]
    assert [h["status"] for h in fleet["hosts"]] == ["ok", "ok"] and "untested (one run on a side" in fleet["verdict"]


def test_ctrl_c_ends_the_sweep_and_every_hosts_run(ssh_hosts, tmp_path):
    import signal

    suite = write_suite(tmp_path, 1)
    suite.write_text(suite.read_text().replace("measure_steps: 10", "measure_steps: 1000000"))
    proc = subprocess.Popen([sys.executable, "-m", "kit", "sweep", "--suite", str(suite), "--hosts", "h1,h2",
                             "--hosts-file", str(hosts_yaml(ssh_hosts, tmp_path)), "--runs-dir", str(tmp_path / "runs")],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        for host in ("h1", "h2"):
            wait_for_training(tmp_path / "work" / host)
        assert harness_on(ssh_hosts, "h1") and harness_on(ssh_hosts, "h2")
    finally:
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "kit sweep --resume" in err
    deadline = time.monotonic() + 60  # each host's watcher stops its run as its connection closes
    while (left := harness_on(ssh_hosts, "h1") + harness_on(ssh_hosts, "h2")) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert left == [], f"Ctrl-C left harness processes: {left}"


def test_report_and_standing_of_a_sweep(held_sweep, capsys):
    _rc, _output, run_dir = held_sweep
    verdict = rundir.read_results(run_dir)["fleet"]["verdict"]
    assert main(["report", str(run_dir)]) == 0
    assert capsys.readouterr().out.splitlines()[0] == verdict  # the fleet table again, from the run's records
    assert main(["standing", str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert [line for line in out.splitlines() if line.startswith("## h")] == ["## h1", "## h2", "## h3"]
    assert out.count("| torch/resnet50/bz2/1n1g/fp32 |") == 3  # each host's own figure on the ladder


def test_a_sweep_bundles_whole_and_each_host_verifies_where_it_ran(held_sweep, tmp_path, capsys):
    from kitlogs import rewrite_kitlog

    from kit.audit import bundle as bd
    from kit.audit.verify import verify_tree

    _rc, _output, run_dir = held_sweep
    bundle = tmp_path / "sweep.tar.gz"
    assert main(["bundle", str(run_dir), "-o", str(bundle)]) == 0
    capsys.readouterr()
    assert main(["verify", str(bundle)]) == 0
    said = capsys.readouterr().out
    verdict = rundir.read_results(run_dir)["fleet"]["verdict"]
    assert [line.split()[:2] for line in said.splitlines() if re.match(r"  h\d ", line)] == \
        [["h1", "OK"], ["h2", "OK"], ["h3", "OK"]], said
    assert f"  fleet table, recomputed from the rows' logs: {verdict}\n" in said
    assert "\nCONSISTENT, authenticity NOT checked: every file intact, every rule holds; 9 figure(s)" in said
    assert main(["reproduce", str(bundle)]) == 2  # not yet: one host's run directory bundled is reproduced
    assert "a sweep's bundle; kit reproduce re-runs a run's bundle" in capsys.readouterr().err

    root = bd.unpack(bundle, tmp_path / "open")
    top = f"run/{run_dir.name}"
    sweep = root / top
    assert {"sweep.json", "suite.yaml", "results.json", "report.md"} <= {p.name for p in sweep.iterdir()}
    assert not list(root.rglob("report.html"))  # renderings of the files bundled, as in a run's bundle
    for host in ("h1", "h2", "h3"):  # each host's own records, where they were made: its capture, logs, run.json
        assert (sweep / "hosts" / host / "run.json").is_file() and (sweep / "env" / host / "probes.json").is_file()
        assert len(list((sweep / "hosts" / host / "logs").rglob("*.log"))) == 3
    assert sorted(json.loads((root / "system.json").read_text())) == ["h1", "h2", "h3"]
    assert sorted(json.loads((root / "commands.json").read_text())) == ["h1", "h2", "h3"]

    # a fleet figure edited (the manifest rebuilt, as a forger without the signing key would): named with its line
    results = json.loads((sweep / "results.json").read_text())
    h3 = next(h for h in results["fleet"]["hosts"] if h["host"] == "h3")
    h3["cases"]["torch/resnet50/bz2/1n1g/fp32"]["median"] *= 2
    (sweep / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    bd.write_manifest(root)
    found = verify_tree(root).violations
    assert [(v.rule, v.file) for v in found] == [("fleet_recomputed", f"{top}/results.json")], found
    assert found[0].line and "fleet.hosts[0].cases.torch/resnet50/bz2/1n1g/fp32.median: written" in found[0].message

    # a host's log edited to a faster run: its own rules name the log, and the fleet table no longer holds
    log = sweep / "hosts/h3/logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_2.log"
    rewrite_kitlog(log, lambda e: {**e, "seconds": e["seconds"] / 2, "samples_per_sec": e["samples_per_sec"] * 2}
                   if e.get("event") == "step" else e)
    bd.write_manifest(root)
    result = verify_tree(root)
    where = {v.file for v in result.violations}
    assert f"{top}/hosts/h3/logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_2.log" in where, where
    assert f"{top}/hosts/h3/results.json" in where and f"{top}/results.json" in where
    assert not any(v.file.startswith((f"{top}/hosts/h1/", f"{top}/hosts/h2/")) for v in result.violations)
    assert [r.name for r in result.rows if r.violations] == ["h3"] and not result.ok


def test_a_sweep_bundle_refuses_an_unfinished_sweep_and_records_it_cannot_judge(held_sweep, tmp_path):
    import shutil

    from kit.audit import bundle as bd
    from kit.audit.verify import verify_tree

    _rc, _output, run_dir = held_sweep
    copy = tmp_path / run_dir.name
    shutil.copytree(run_dir, copy)
    record = json.loads((copy / "sweep.json").read_text())
    (copy / "sweep.json").write_text(json.dumps({k: v for k, v in record.items() if k != "finished"}))
    with pytest.raises(bd.BundleError, match=rf"{copy}: an unfinished sweep .*`kit sweep --resume {copy}`"):
        bd.make_bundle(copy, tmp_path / "b.tar.gz")
    (copy / "sweep.json").write_text(json.dumps(record))
    root = bd.unpack(bd.make_bundle(copy, tmp_path / "b.tar.gz"), tmp_path / "open")
    sweep, top = root / "run" / copy.name, f"run/{copy.name}"
    shutil.copytree(sweep / "hosts/h2", sweep / "hosts/h9")  # records of a host the sweep does not name
    said = json.loads((sweep / "sweep.json").read_text())
    said["hosts"].append("h4")  # a host the sweep names, of which the bundle holds nothing
    (sweep / "sweep.json").write_text(json.dumps(said))
    bd.write_manifest(root)
    found = {(v.rule, v.file, v.message) for v in verify_tree(root).violations}
    assert ("sweep_recorded", f"{top}/hosts/h9", "h9 is no host of sweep.json: its records are judged by nothing") \
        in found, found
    assert ("sweep_recorded", f"{top}/sweep.json", "row h4: sweep.json records no row of it, but the bundle holds "
            f"no run directory of it ({top}/hosts/h4/run.json)") in found, found


def test_sweep_bundle_parts_pure():
    from kit.audit.bundle import _describes_system
    from kit.audit.rules import Violation
    from kit.audit.sweep import Row, rules_of_sweep
    from kit.audit.verify import Compliance

    assert rules_of_sweep({"h1": {"rules_version": "v10"}, "h2": {"rules_version": "v11"}})[0] == "v11"
    assert rules_of_sweep({})[1] == "the newest: no row has a run.json"
    parts = ("hosts/h1/", "hosts/h1/gpu0/")
    assert _describes_system("hosts/h1/gpu0/logs/torch/x.log", parts) and _describes_system("hosts/h1/run.json", parts)
    assert not _describes_system("env/h1/capture.json", parts)  # the sweep's own capture: no row's system
    assert not _describes_system("hosts/h1/hosts/h1/torch/1/stdout.log", parts)  # a rank's gathered output

    judged = Compliance("h2", extra=[Violation("repeats_as_declared", "2 of 3 repeats", "run/s/hosts/h2/suite.yaml")])
    lost = Row("h2", "run/s/hosts/h2", "unreachable", "lost mid-sweep (refused)", judged, counted=False)
    assert lost.line() == ("  h2         n/a     1 violation(s) not counted: it gives no figure, nothing of it enters "
                           "the fleet table but its name and why (repeats_as_declared)  [unreachable: lost mid-sweep "
                           "(refused)]")
    sweep = Compliance("b", rows=[lost, Row("h1", "run/s/hosts/h1", "ok", "", Compliance("h1"))])
    assert sweep.ok and sweep.rows[1].line().split() == ["h1", "OK", "every", "rule", "holds,", "0", "figure(s)",
                                                         "recomputed"]
    lost.counted = True  # a row with a figure is held to every rule
    assert not sweep.ok and lost.line().split()[:4] == ["h2", "NOT", "OK", "1"]
    assert Row("h4", "", "unreachable", "check-env could not capture it").line() == \
        "  h4         no run directory  [unreachable: check-env could not capture it]"


def test_cpu_quota_and_cpus_read_from_what_the_probes_print():
    from kit.hosts.capture import parse_cpu_quota, parse_cpus_allowed

    v1 = ("/sys/fs/cgroup/cpu/a/b/cpu.cfs_quota_us: 50000\n/sys/fs/cgroup/cpu/a/b/cpu.cfs_period_us: 100000\n"
          "/sys/fs/cgroup/cpu/a/cpu.cfs_quota_us: 20000\n/sys/fs/cgroup/cpu/a/cpu.cfs_period_us: 100000\n"
          "/sys/fs/cgroup/cpu//cpu.cfs_quota_us: -1\n/sys/fs/cgroup/cpu//cpu.cfs_period_us: 100000\n")
    assert parse_cpu_quota(v1) == {"cores": 0.2, "file": "/sys/fs/cgroup/cpu/a/cpu.cfs_quota_us"}  # the tightest
    assert parse_cpu_quota("/sys/fs/cgroup/u/cpu.max: 150000 100000\n/sys/fs/cgroup/cpu.max: max 100000\n") == \
        {"cores": 1.5, "file": "/sys/fs/cgroup/u/cpu.max"}
    assert parse_cpu_quota("/sys/fs/cgroup/u/cpu.max: max 100000\n") is None
    assert parse_cpus_allowed("Name:\tgrep\nCpus_allowed_list:\t0-3,8,10-11\n") == 7


def _entries(figures: dict[str, list[float]], failed: tuple[str, ...] = ()):
    from kit.core.rundir import RunEntry

    out = {host: [RunEntry(f"{host}/{i}", {"case": "torch/resnet50/bz2/1n1g/fp32", "repeat": i + 1, "status": "ok",
                                          "figure": v, "unit": "images/s"}) for i, v in enumerate(values)]
           for host, values in figures.items()}
    for host in failed:
        out[host] = [RunEntry(f"{host}/0", {"case": "torch/resnet50/bz2/1n1g/fp32", "repeat": 1, "status": "failed"})]
    return out


def test_fleet_table_names_what_differs_from_the_peers_only():
    from kit.results.fleet import fleet_table

    def capture(model: str, quota: float | None) -> dict:
        return {"cpu": {"model_name": model, "logical_cpus": 8}, "cpu_quota": quota and {"cores": quota, "file":
                "/sys/fs/cgroup/x/cpu.max"}, "cpus_allowed": 8, "kernel": "6.1", "memory_bytes": 2**34}

    runs = _entries({"n1": [100, 101, 99], "n2": [98, 99, 100], "n3": [101, 100, 102], "n4": [60, 61, 59]}, ("n5",))
    captures = {"n1": capture("EPYC", None), "n2": capture("EPYC", None), "n3": capture("EPYC", None),
                "n4": capture("Xeon", None), "n5": capture("EPYC", None)}
    rows = {"n5": {"status": "unreachable", "reason": "lost mid-sweep (connection refused)"}}
    fleet = fleet_table(["n1", "n2", "n3", "n4", "n5"], rows, runs, captures)
    assert [h["host"] for h in fleet["hosts"]][:2] == ["n5", "n4"]  # worst first: the lost host, then the slowest
    n4 = fleet["hosts"][1]
    assert n4["differs"] and n4["evidence"] == [{"what": "CPU model", "host": "Xeon", "peers": ["EPYC"]}]
    # the fleet's median: 99.5 (of the hosts' medians 100, 99, 101, 60); n3 is 1.5% above it
    assert fleet["verdict"] == ("3 of 5 hosts within noise of the fleet's median (\u00b11.5%); n5 unreachable: lost "
                                "mid-sweep (connection refused); n4 \u221240%: CPU model Xeon against EPYC on its peers")
    assert not any(h["differs"] for h in fleet["hosts"] if h["host"] != "n4")


def test_a_row_whose_interval_excludes_1_differs_however_widely_its_runs_spread():
    """The held sweep's h3 as it came out on a loaded 2-core host (a quarter core: its runs spread CV 11%, past the
    noise rule's 10%): its interval [0.27, 0.77] excludes 1, so it differs (the interval holds the spread); a peer
    whose interval reaches 1 stays within noise however it spreads."""
    from kit.results.fleet import _case

    h3 = [3.7908705601560926, 3.8111549838569, 3.116532284391674]
    case = _case({"h1": [7.797608395529007, 7.958694376187586, 7.519317125695912], "h3": h3,
                  "h2": [8.141605312885963, 7.675669203219482, 7.0720282541672805]})
    assert case["baseline"] == "h2" and stats.cv(h3) > stats.NOISE_MAX_CV
    row = case["hosts"]["h3"]
    assert row["differs"] and row["noise"] == "differs" and row["interval"][1] < 1, row
    assert [case["hosts"][h]["noise"] for h in ("h1", "h2")] == ["within noise", "the fleet's median"]
    wide = _case({"a": [100.0, 101.0, 99.0], "b": [95.0, 70.0, 125.0], "c": [100.5, 101.0, 100.0]})["hosts"]["b"]
    assert not wide["differs"] and wide["noise"] == "within noise"


def test_a_throttled_gpu_host_is_named_by_its_telemetry_not_by_its_peers_jitter():
    from kit.results.fleet import fleet_table

    def tele(sm: float, temp: float, throttled: dict) -> dict:
        return {"telemetry": {"throttled": throttled, "hosts": {"x": {"sm_mhz_median": sm, "limit_w": 700.0,
                                                                      "temp_peak_c": temp}}}}

    runs = _entries({"g1": [3000, 3010, 2990], "g2": [2980, 3000, 2995], "g3": [2100, 2110, 2090]})
    for host, sm, temp, throttled in (("g1", 1980, 61, {}), ("g2", 1965, 63, {}),
                                      ("g3", 1410, 62, {"hw_slowdown": 0.38, "sw_power_cap": 0.01})):
        runs[host] = [type(e)(e.log, {**e.fields, **tele(sm, temp, throttled)}) for e in runs[host]]
    captures = {h: {"cpu": {"model_name": "Xeon"}, "smi": {"driver_version": "580.1", "gpus": [{"product_name": "H200"}]}}
                for h in ("g1", "g2", "g3")}
    fleet = fleet_table(["g1", "g2", "g3"], {}, runs, captures)
    g3 = fleet["hosts"][0]
    assert g3["host"] == "g3" and g3["differs"]
    assert [(e["what"], e["host"]) for e in g3["evidence"]] == [
        ("GPU throttled during the runs", "hw_slowdown 38% of the window"),
        ("GPU SM clock during the runs (MHz, median)", "1410")]  # 1.5% of temperature and clock jitter: no evidence
    assert "g3 \u221230%: GPU throttled during the runs hw_slowdown 38% of the window against none" in fleet["verdict"]
