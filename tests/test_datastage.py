"""stage_data on real SSH hosts (network namespaces, tests/nethosts.py): list + JPEG tree on every host, verified.

The test hosts share this machine's file system, so every host gets its own data_dir/work_dir, and a
host's copy can be changed (or checked) through the local path.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from kit.config.hosts import load_hosts
from kit.hosts.stage import DataStageError, compare, rsync_argv, stage_data, stage_format

REPO = Path(__file__).resolve().parent.parent
SYNTH = REPO / "data_prep" / "make_synthetic_imagenet.py"
HOSTS = ["h1", "h2"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A synthetic ImageNet tree (2 classes x 4 real JPEGs) and its train_list.txt; returns the list."""
    root = tmp_path_factory.mktemp("synthetic")
    subprocess.run([sys.executable, str(SYNTH), str(root), "--classes", "2", "--images-per-class", "4",
                    "--size", "32"], check=True, capture_output=True, text=True)
    assert len(list((root / "train").rglob("*.JPEG"))) == 8
    return root / "train_list.txt"


def inventory(ssh_hosts, tmp_path: Path, base: Path | None = None, known_hosts: Path | None = None):
    """hosts.yaml for the fixture hosts, each with its own data_dir and work_dir under base (default tmp_path)."""
    base = base or tmp_path
    hosts = [{"name": h.name, "address": h.address, "port": h.port, "user": h.user, "key_file": str(h.key_file),
              "data_dir": str(base / "data" / h.name), "work_dir": str(base / "work" / h.name),
              "runtime": "native", "python": sys.executable} for h in ssh_hosts.hosts]
    path = tmp_path / "hosts.yaml"
    path.write_text(yaml.safe_dump({"schema_version": 1, "hosts": hosts, "ssh": {
        "known_hosts": str(known_hosts or ssh_hosts.known_hosts), "connect_timeout": 5}}))
    inv = load_hosts(path, env={})
    return inv, inv.select(HOSTS)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_images_stages_list_and_jpegs_on_both_hosts(ssh_hosts, tmp_path, dataset):
    inv, hosts = inventory(ssh_hosts, tmp_path)
    events = []
    statuses = stage_data(inv, hosts, dataset, images=True, progress=lambda *e: events.append(e))
    assert [s.name for s in statuses] == HOSTS
    for s, host in zip(statuses, hosts, strict=True):
        assert s.error == "" and s.ok and s.verified and s.copied, s
        assert (s.images, s.classes, s.missing) == (8, 2, 0)
        assert s.list_sha256 == s.local_sha256 == sha(dataset)
        assert s.files_sent == 8
        data = Path(host.data_dir)
        assert (data / "train_list.txt").read_bytes() == dataset.read_bytes()
        for jpeg in (dataset.parent / "train").rglob("*.JPEG"):
            assert (data / jpeg.relative_to(dataset.parent)).read_bytes() == jpeg.read_bytes()
        assert (Path(host.work_dir) / "tools" / "verify_list.py").is_file()
        assert not list(data.glob(".*.tmp")), "temporary copies left behind"
    assert compare(statuses) == []
    assert {(h, what) for h, what, _ in events} >= {(h, w) for h in HOSTS for w in ("list-copied", "verified")}


def test_second_run_copies_nothing(ssh_hosts, tmp_path, dataset):
    inv, hosts = inventory(ssh_hosts, tmp_path)
    assert all(s.ok and s.copied for s in stage_data(inv, hosts, dataset, images=True))
    mtimes = [(Path(h.data_dir) / "train_list.txt").stat().st_mtime_ns for h in hosts]
    again = stage_data(inv, hosts, dataset, images=True)
    assert [(s.ok, s.copied, s.files_sent) for s in again] == [(True, False, 0)] * 2
    assert [(Path(h.data_dir) / "train_list.txt").stat().st_mtime_ns for h in hosts] == mtimes
    assert compare(again) == []


def test_missing_jpeg_on_one_host_is_reported(ssh_hosts, tmp_path, dataset):
    inv, hosts = inventory(ssh_hosts, tmp_path)
    stage_data(inv, hosts, dataset, images=True)
    gone = sorted((Path(hosts[1].data_dir) / "train").rglob("*.JPEG"))[0]
    gone.unlink()
    statuses = stage_data(inv, hosts, dataset)  # list only: nothing puts the file back
    h1, h2 = statuses
    assert h1.ok and h1.missing == 0
    assert not h2.ok and h2.error == "" and h2.missing == 1
    assert h2.missing_first == [str(gone.relative_to(hosts[1].data_dir))]
    problems = compare(statuses)
    assert len(problems) == 1 and problems[0].startswith("h2: 1 listed file(s) missing"), problems
    assert gone.name in problems[0]
    # images=True sends just that file back
    statuses = stage_data(inv, hosts, dataset, images=True)
    assert [s.files_sent for s in statuses] == [0, 1] and compare(statuses) == []


def test_changed_list_on_one_host_is_restaged(ssh_hosts, tmp_path, dataset):
    inv, hosts = inventory(ssh_hosts, tmp_path)
    stage_data(inv, hosts, dataset, images=True)
    remote = Path(hosts[0].data_dir) / "train_list.txt"
    lines = dataset.read_text().splitlines(keepends=True)
    remote.write_text("".join(lines[:-1]))  # one image fewer on h1
    edited = stage_data(inv, hosts, dataset, images=True)
    assert [s.copied for s in edited] == [True, False]  # stage_data already put it right
    assert remote.read_bytes() == dataset.read_bytes()
    assert all(s.ok and s.images == 8 for s in edited) and compare(edited) == []


def test_compare_names_the_host_whose_list_differs(ssh_hosts, tmp_path, dataset):
    inv, hosts = inventory(ssh_hosts, tmp_path)
    statuses = stage_data(inv, hosts, dataset, images=True)
    h1 = statuses[0]
    h1.list_sha256, h1.images, h1.ok = "0" * 64, 7, False
    problems = compare(statuses)
    assert any(p.startswith("h1: ") and "sha256" in p for p in problems), problems
    assert "h1: 7 images / 2 classes, other hosts 8 images / 2 classes" in problems  # h2 holds the local list
    assert not any(p.startswith("h2: ") for p in problems), problems
    assert all(p.startswith(("h1: ", "h2: ")) for p in problems)


def test_hostile_data_dir_works_and_runs_nothing(ssh_hosts, tmp_path, dataset):
    marker = tmp_path / "MARK"
    relative = f"kit-datastage-mark-{uuid.uuid4().hex[:12]}"  # a shell would make it in its cwd (home dir, repo, ...)
    base = tmp_path / f"it's a $(touch {marker}) `touch {marker}`; $(touch {relative}) dir"
    kh = tmp_path / "known hosts %d" / "kh"  # spaces and a %-token in the ssh option values too
    kh.parent.mkdir()
    shutil.copy(ssh_hosts.known_hosts, kh)
    inv, hosts = inventory(ssh_hosts, tmp_path, base=base, known_hosts=kh)
    statuses = stage_data(inv, hosts, dataset, images=True)
    assert all(s.ok and s.copied and s.files_sent == 8 and s.error == "" for s in statuses), statuses
    assert compare(statuses) == []
    for host in hosts:
        assert "$(touch" in host.data_dir
        assert (Path(host.data_dir) / "train_list.txt").read_bytes() == dataset.read_bytes()
        assert len(list((Path(host.data_dir) / "train").rglob("*.JPEG"))) == 8
    assert not marker.exists(), "a remote path was run by a shell"
    assert not [p for p in tmp_path.rglob("MARK") if p.is_file()]
    for where in (Path.home(), Path.cwd(), REPO, Path("/")):
        assert not (where / relative).exists(), f"a remote path was run by a shell (in {where})"


def test_missing_local_list_is_a_clear_error(ssh_hosts, tmp_path):
    inv, hosts = inventory(ssh_hosts, tmp_path)
    missing = tmp_path / "nowhere" / "train_list.txt"
    with pytest.raises(DataStageError, match=r"nowhere/train_list\.txt: no such file"):
        stage_data(inv, hosts, missing)
    for host in hosts:
        assert not Path(host.data_dir).exists(), "nothing is touched when the local list is unusable"


def test_images_without_a_local_tree_is_a_clear_error(ssh_hosts, tmp_path):
    inv, hosts = inventory(ssh_hosts, tmp_path)
    lone = tmp_path / "lone" / "train_list.txt"
    lone.parent.mkdir()
    lone.write_text("train/n01440764/a.JPEG 0\n")
    with pytest.raises(DataStageError, match="not a directory"):
        stage_data(inv, hosts, lone, images=True)


def test_unreachable_host_is_reported_and_the_others_go_on(ssh_hosts, tmp_path, dataset):
    inv, hosts = inventory(ssh_hosts, tmp_path)
    ghost = dataclasses.replace(hosts[1], name="ghost", address=hosts[1].address.rsplit(".", 1)[0] + ".99")
    statuses = stage_data(inv, [hosts[0], ghost], dataset, images=True)
    assert statuses[0].ok and not statuses[1].ok and statuses[1].error
    problems = compare(statuses)
    assert len(problems) == 1 and problems[0].startswith("ghost: "), problems


def test_rsync_argv_keeps_remote_path_one_word(tmp_path):
    from kit.config.inventory import HostConfig, Inventory

    host = HostConfig(name="n", address="fe80::1", port=2222, user="u", key_file="/k ey/id %h",
                      data_dir="/d a/$(x)/")
    argv = rsync_argv(host, Inventory(tmp_path / "h.yaml", [host], known_hosts="/kh"), tmp_path / "train")
    assert argv[0] == "rsync" and "-s" in argv and argv[-1] == "[fe80::1]:/d a/$(x)/"
    ssh = argv[argv.index("-e") + 1]
    assert "-p 2222" in ssh and "-l u" in ssh and "'IdentityFile=\"/k ey/id %%h\"'" in ssh


def test_fab_stage_data_puts_the_list_on_both_hosts(ssh_hosts, tmp_path):
    repo = Path(__file__).resolve().parent.parent
    made = subprocess.run([sys.executable, str(repo / "data_prep" / "make_synthetic_imagenet.py"), str(tmp_path / "src"),
                           "--classes", "2", "--images-per-class", "3", "--size", "32"], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    hosts = [{"name": h.name, "address": h.address, "port": h.port, "user": h.user, "key_file": str(h.key_file),
              "data_dir": str(tmp_path / "data" / h.name), "work_dir": str(tmp_path / "work" / h.name),
              "runtime": "native", "python": sys.executable} for h in ssh_hosts.hosts]
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(yaml.safe_dump({"schema_version": 1, "ssh": {"known_hosts": str(ssh_hosts.known_hosts)},
                                         "hosts": hosts}))
    out = subprocess.run([str(Path(sys.executable).parent / "fab"), "-H", "h1,h2", "stage_data", "--train-list",
                          str(tmp_path / "src" / "train_list.txt"), "--images", "--hosts-file", str(inventory)],
                         cwd=repo, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert out.stdout.count("6 images, 2 classes") == 2 and "NOT OK" not in out.stdout
    for name in ("h1", "h2"):
        assert len(list((tmp_path / "data" / name / "train").rglob("*.JPEG"))) == 6


def test_a_host_without_sftp_is_named_with_the_reason_not_channel_closed(ssh_hosts, tmp_path, dataset, capsys):
    """A second sshd on h2, port 2222, with no sftp Subsystem: stage-data says why, and prints no 'None images'."""
    from kit.cli import main

    h2 = ssh_hosts.host("h2")
    config = (ssh_hosts.workdir / "h2" / "sshd_config").read_text()
    config = config.replace(f"ListenAddress {h2.address}:{h2.port}", f"ListenAddress {h2.address}:2222")
    config = config.replace("Subsystem sftp internal-sftp\n", "").replace("sshd.pid", "sshd-nosftp.pid")
    assert "Subsystem" not in config and ":2222" in config
    (tmp_path / "sshd_config").write_text(config)
    known = [line.split(" ", 1) for line in ssh_hosts.known_hosts.read_text().splitlines()]
    (tmp_path / "known_hosts").write_text("".join(f"[{h2.address}]:2222 {key}\n" for who, key in known
                                                  if who == h2.address))
    started = ssh_hosts.run("h2", ["/usr/sbin/sshd", "-f", str(tmp_path / "sshd_config")])  # daemonizes
    assert started.returncode == 0, started.stderr
    pidfile = ssh_hosts.workdir / "h2" / "sshd-nosftp.pid"
    try:
        hosts = [{"name": "nosftp", "address": h2.address, "port": 2222, "user": h2.user, "key_file": str(h2.key_file),
                  "data_dir": str(tmp_path / "data"), "work_dir": str(tmp_path / "work"), "runtime": "native",
                  "python": sys.executable}]
        (tmp_path / "hosts.yaml").write_text(yaml.safe_dump({"schema_version": 1, "hosts": hosts, "ssh": {
            "known_hosts": str(tmp_path / "known_hosts"), "connect_timeout": 5}}))
        rc = main(["stage-data", "--hosts", "nosftp", "--hosts-file", str(tmp_path / "hosts.yaml"),
                   "--train-list", str(dataset)])
        out = capsys.readouterr().out
        assert rc == 1 and "None" not in out and "SSHException" not in out, out
        assert out.splitlines()[0] == "nosftp: NOT staged"
        assert "  problem: nosftp: its SSH server opens no SFTP session (Channel closed.); the kit copies files " \
               "over SFTP: enable it in the host's sshd_config (Subsystem sftp ...)" in out.splitlines()
    finally:
        ssh_hosts.run("h2", ["sh", "-c", f"kill $(cat {pidfile})"])


# --- a convert.py output to <data_dir>/<format>/ (stage_format, --format) ----------------------------------

CONVERT = REPO / "data_prep" / "convert.py"


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory, dataset: Path) -> dict[str, Path]:
    """Each format made from the synthetic tree by data_prep/convert.py (tfrecord in 3 shards)."""
    out = tmp_path_factory.mktemp("converted")
    made = {}
    for fmt in ("paddle", "fleetx", "folder", "tfrecord", "recordio"):
        extra = ["--shards", "3"] if fmt == "tfrecord" else []
        proc = subprocess.run([sys.executable, str(CONVERT), str(dataset.parent / "train"), str(out / fmt),
                               "--to", fmt, *extra], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        made[fmt] = out / fmt
    return made


def local_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("fmt", ["paddle", "fleetx", "folder", "tfrecord", "recordio"])
def test_format_is_staged_to_data_dir_format_on_both_hosts_and_verified(ssh_hosts, tmp_path, converted, fmt):
    from kit.config.programs import RefJob
    from kit.config.reference import data_path

    inv, hosts = inventory(ssh_hosts, tmp_path)
    events = []
    statuses = stage_format(inv, hosts, fmt, converted[fmt], progress=lambda *e: events.append(e))
    want = local_files(converted[fmt])
    manifest_sha = sha(converted[fmt] / "manifest.json")
    for s, host in zip(statuses, hosts, strict=True):
        assert s.error == "" and s.ok and s.verified and s.problems == [], s
        assert (s.format, s.images, s.classes, s.list_sha256, s.local_sha256) == (fmt, 8, 2, manifest_sha,
                                                                                  manifest_sha)
        assert s.files_sent == len(want)
        target = Path(host.data_dir) / fmt
        assert local_files(target) == want  # hard links locally, whole files there; nothing else (no partials)
        assert s.checked == str(target / "manifest.json")
    assert compare(statuses) == []
    assert {(h, what) for h, what, _ in events} >= {(h, w) for h in HOSTS for w in ("rsync", "rsynced", "verified")}
    # where the reference runs read this format under the host's data root
    framework, model = {"paddle": ("paddle", "resnet50"), "fleetx": ("paddle", "vgg16"), "folder": ("torch", "resnet50"),
                        "tfrecord": ("tensorflow", "resnet50"), "recordio": ("mxnet", "resnet50")}[fmt]
    job = RefJob(framework, model, "fp32", 64, 1)
    assert data_path(hosts[0].data_dir, job) == str(Path(hosts[0].data_dir) / fmt)


def test_format_rerun_sends_nothing_and_a_damaged_shard_is_named_then_repaired(ssh_hosts, tmp_path, converted):
    inv, hosts = inventory(ssh_hosts, tmp_path)
    assert all(s.ok for s in stage_format(inv, hosts, "tfrecord", converted["tfrecord"]))
    again = stage_format(inv, hosts, "tfrecord", converted["tfrecord"])
    assert [(s.ok, s.files_sent) for s in again] == [(True, 0), (True, 0)] and compare(again) == []

    shard = Path(hosts[1].data_dir) / "tfrecord" / "train-00001-of-00003"
    data, stat = shard.read_bytes(), shard.stat()
    shard.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # same size and mtime: rsync's quick check misses it
    os.utime(shard, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    statuses = stage_format(inv, hosts, "tfrecord", converted["tfrecord"])
    assert statuses[0].ok and not statuses[1].ok and statuses[1].error == ""
    problems = compare(statuses)
    assert problems and all(p.startswith("h2: ") for p in problems), problems
    assert any("train-00001-of-00003: sha256 differs from the manifest's" in p for p in problems), problems

    shard.write_bytes(data[: len(data) // 2])  # truncated: size differs, so the next run sends it again
    statuses = stage_format(inv, hosts, "tfrecord", converted["tfrecord"])
    assert [s.files_sent for s in statuses] == [0, 1] and all(s.ok for s in statuses) and compare(statuses) == []
    assert shard.read_bytes() == data


def test_stale_file_the_program_would_read_is_a_problem_until_delete(ssh_hosts, tmp_path, converted):
    inv, hosts = inventory(ssh_hosts, tmp_path)
    stage_format(inv, hosts, "tfrecord", converted["tfrecord"])
    stale = Path(hosts[0].data_dir) / "tfrecord" / "train-00007-of-01024"  # an older conversion's shard
    stale.write_bytes(b"old")
    statuses = stage_format(inv, hosts, "tfrecord", converted["tfrecord"])
    problems = compare(statuses)
    assert len(problems) == 1 and problems[0].startswith("h1: ") and "train-00007-of-01024" in problems[0], problems
    statuses = stage_format(inv, hosts, "tfrecord", converted["tfrecord"], delete=True)
    assert all(s.ok for s in statuses) and compare(statuses) == [] and not stale.exists()


def test_format_without_a_manifest_is_refused_before_any_host(ssh_hosts, tmp_path, dataset):
    inv, hosts = inventory(ssh_hosts, tmp_path)
    with pytest.raises(DataStageError, match=r"manifest .*manifest\.json: no such file"):
        stage_format(inv, hosts, "folder", dataset.parent)
    with pytest.raises(DataStageError, match="unknown data format 'jpeg'"):
        stage_format(inv, hosts, "jpeg", dataset.parent)
    for host in hosts:
        assert not Path(host.data_dir).exists()


def test_format_of_another_kind_is_refused(ssh_hosts, tmp_path, converted):
    inv, hosts = inventory(ssh_hosts, tmp_path)
    with pytest.raises(DataStageError, match="is not a recordio manifest"):
        stage_format(inv, hosts, "recordio", converted["tfrecord"])


def test_fab_stage_data_format_on_both_hosts(ssh_hosts, tmp_path, converted):
    hosts = [{"name": h.name, "address": h.address, "port": h.port, "user": h.user, "key_file": str(h.key_file),
              "data_dir": str(tmp_path / "data" / h.name), "work_dir": str(tmp_path / "work" / h.name),
              "runtime": "native", "python": sys.executable} for h in ssh_hosts.hosts]
    inventory_file = tmp_path / "hosts.yaml"
    inventory_file.write_text(yaml.safe_dump({"schema_version": 1, "ssh": {"known_hosts": str(ssh_hosts.known_hosts)},
                                              "hosts": hosts}))
    out = subprocess.run([str(Path(sys.executable).parent / "fab"), "-H", "h1,h2", "stage_data", "--format",
                          "recordio", "--source", str(converted["recordio"]), "--hosts-file", str(inventory_file)],
                         cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    manifest_sha = sha(converted["recordio"] / "manifest.json")
    for name in ("h1", "h2"):
        assert (f"{name}: recordio at {tmp_path / 'data' / name}/recordio/: 8 images, 2 classes, manifest sha256 "
                f"{manifest_sha}, ok (4 file(s) sent)") in out.stdout.splitlines()
        assert local_files(tmp_path / "data" / name / "recordio") == local_files(converted["recordio"])
    assert "rsynced" in out.stderr and "verified" in out.stderr  # progress, per host


def test_cli_refuses_mixed_modes(capsys, tmp_path):
    from kit.cli import main

    assert main(["stage-data", "--hosts", "h1", "--format", "folder"]) == 2
    assert "give --format F --source DIR" in capsys.readouterr().err
    assert main(["stage-data", "--hosts", "h1", "--format", "folder", "--source", str(tmp_path), "--train-list",
                 str(tmp_path / "l.txt")]) == 2
