"""The pinned images for real: the cpu image built from a debootstrap base, its self-check, a local registry,
delivery to SSH test hosts that each run their own Docker engine, verification, and cases run in containers."""

from __future__ import annotations

import dataclasses
import io
import json
import sys
import tarfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from nethosts import write_inventory

from kit.cli import main
from kit.config.hosts import load_hosts
from kit.images import build, deliver
from kit.images.spec import load_pins
from kit.run.command import RUN_LABEL

TINY_SUITE = """\
schema_version: 1
name: tiny
description: one small torch case
hardware: cpu
defaults: {warmup_steps: 1, measure_steps: 10, repeats: 1, batch_size: 2, image_size: 32, num_classes: 10,
           timeout_s: 300}
cases:
  - {framework: torch, model: resnet50}
"""


def run_containers(client, run_id: str) -> list:
    return client.containers.list(all=True, filters={"label": f"{RUN_LABEL}={run_id}"})


def host_containers(net, host: str, run_id: str) -> list[str]:
    out = net.run(host, ["docker", "ps", "-aq", "--filter", f"label={RUN_LABEL}={run_id}"])
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


@pytest.fixture(scope="module")
def inventory(docker_hosts, tmp_path_factory):
    root = tmp_path_factory.mktemp("imghosts")
    (root / "data").mkdir()
    path = write_inventory(docker_hosts, root, ssh={"connect_timeout": 5}, gpus=0, runtime="docker",
                           python=sys.executable)
    inv = load_hosts(path)
    return inv, path


@pytest.fixture(scope="module")
def small_image(docker_engine, cpu_image) -> SimpleNamespace:
    """The cpu image's own debootstrap base, a tenth of its size. Push, stream, pull and verify treat every image
    alike, so their tests move this one; the cpu image reaches the hosts in the tests that run a case in it."""
    base = load_pins().get("cpu").base
    ref = f"{base.image}:{base.tag}"
    image_id = build.image_id(docker_engine, ref)
    assert image_id, f"{ref} is missing although the cpu image was built from it"
    return SimpleNamespace(ref=ref, id=image_id)


def test_the_cpu_image_carries_and_proves_its_pins(docker_engine, cpu_image):
    spec = load_pins().get("cpu")
    labels = build.labels_of(docker_engine, cpu_image.ref)
    assert labels["io.kit.pins.hash"] == spec.pins_hash() == cpu_image.pins_hash
    assert labels["io.kit.pins.torch"] == "2.13.0+cpu" and labels["io.kit.pins.paddle"] == "3.3.1"
    assert labels["org.opencontainers.image.base.name"] == "kit/debian:bookworm-minbase"
    record = json.loads(docker_engine.containers.run(cpu_image.ref, ["cat", "/opt/kit/verified-pins.json"],
                                                     remove=True, network_mode="none"))
    assert record["ok"] is True
    reported = {c["key"]: c["reported"] for c in record["checks"]}
    assert reported["torch"] == "2.13.0+cpu" and reported["paddle"] == "3.3.1" and reported["python"] == "3.11.2"
    assert cpu_image.ref.startswith("kit/cpu:") and len(cpu_image.ref.split(":")[1]) == 12


def test_a_wrong_pin_fails_the_build_in_the_self_check(docker_engine, cpu_image):
    spec = load_pins().get("cpu")
    wrong = dataclasses.replace(spec, versions={**spec.versions, "torch": "2.13.0"})  # claims the CUDA build
    lines: list[str] = []
    with pytest.raises(build.ImageError) as err:
        build.build(docker_engine, wrong, lambda who, line: lines.append(line), tag="kit/cpu:wrong-pin-test")
    assert "MISMATCH version torch: pinned 2.13.0, the image reports 2.13.0+cpu" in str(err.value)
    assert any("verify_pins: ok       version paddle" in line for line in lines)  # the other pins were checked
    assert build.image_id(docker_engine, "kit/cpu:wrong-pin-test") is None


def test_push_to_a_local_registry_records_the_manifest_digest(docker_engine, small_image, registry):
    target, digest = build.push(docker_engine, small_image.ref, registry.address)
    repo, tag = small_image.ref.split(":")
    assert target == f"{registry.address}/{small_image.ref}"
    assert digest.startswith("sha256:") and registry.manifest_digest(repo, tag) == digest
    repo_digests = docker_engine.images.get(small_image.ref).attrs["RepoDigests"]
    assert f"{registry.address}/{repo}@{digest}" in repo_digests


def test_streamed_to_two_hosts_at_once_then_skipped(docker_engine, small_image, docker_hosts, inventory):
    inv, _ = inventory
    hosts = [inv.get("h1"), inv.get("h2")]
    for h in ("h1", "h2"):  # a clean start: neither engine holds the image
        docker_hosts.run(h, ["docker", "rmi", "-f", small_image.ref])
    seen: list[tuple[str, str]] = []
    first = deliver.deliver_stream(docker_engine, inv, hosts, small_image.ref, lambda who, line: seen.append((who, line)))
    assert {r.action for r in first.values()} == {"loaded"}, first
    assert {r.id for r in first.values()} == {small_image.id}
    assert any(who == "stream" and "to 2 host(s)" in line for who, line in seen)  # one save stream fed both
    assert deliver.verify_hosts(inv, hosts, small_image.ref, small_image.id) == {"h1": small_image.id, "h2": small_image.id}
    t0 = time.monotonic()
    second = deliver.deliver_stream(docker_engine, inv, hosts, small_image.ref)
    took = time.monotonic() - t0
    assert {r.action for r in second.values()} == {"skipped"}
    assert took <= 2.0, f"a delivery with nothing to send took {took:.2f} s"


def test_a_different_image_under_the_same_tag_is_detected_and_replaced(docker_engine, small_image, docker_hosts,
                                                                       inventory, tmp_path, capsys):
    inv, path = inventory
    hosts = [inv.get("h1"), inv.get("h2")]
    tiny = tmp_path / "tiny.tar"
    with tarfile.open(tiny, "w") as tar:
        info = tarfile.TarInfo("impostor.txt")
        data = b"not the pinned image\n"
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    made = docker_hosts.run("h2", ["sh", "-c", f"docker import {tiny} kit-impostor:1 >/dev/null && "
                                               f"docker tag kit-impostor:1 {small_image.ref}"])
    assert made.returncode == 0, made.stderr
    with pytest.raises(deliver.ImageMismatch) as err:
        deliver.verify_hosts(inv, hosts, small_image.ref, small_image.id)
    assert set(err.value.wrong) == {"h2"} and err.value.wrong["h2"] != small_image.id
    rc = main(["images", "verify", small_image.ref, "--hosts", "h1,h2", "--hosts-file", str(path)])
    assert rc == 2 and "h2: sha256:" in capsys.readouterr().err
    again = deliver.deliver_stream(docker_engine, inv, hosts, small_image.ref)
    assert (again["h1"].action, again["h2"].action) == ("skipped", "loaded")
    assert deliver.verify_hosts(inv, hosts, small_image.ref, small_image.id)["h2"] == small_image.id


def test_hosts_pull_through_the_registry(docker_engine, small_image, registry, docker_hosts, inventory):
    inv, _ = inventory
    build.push(docker_engine, small_image.ref, registry.address)
    docker_hosts.run("h1", ["docker", "rmi", "-f", small_image.ref])
    pull_ref = f"{docker_hosts.subnet}.254:{registry.port}/{small_image.ref}"
    result = deliver.deliver_registry(inv, [inv.get("h1"), inv.get("h2")], small_image.ref, pull_ref, small_image.id)
    assert (result["h1"].action, result["h2"].action) == ("pulled", "skipped"), result
    assert deliver.verify_hosts(inv, [inv.get("h1")], small_image.ref, small_image.id) == {"h1": small_image.id}


def test_kit_bench_runs_a_real_case_in_the_container(docker_engine, cpu_image, tmp_path):
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY_SUITE)
    runs = tmp_path / "runs"
    assert main(["bench", "--suite", str(suite), "--runs-dir", str(runs), "--runtime", "docker"]) == 0
    (run_dir,) = runs.iterdir()
    log = run_dir / "logs/torch/resnet50/bz2/1n1g/resnet50_b2_fp32_1.log"
    text = log.read_text()
    assert text.startswith("# kit bench: docker run --rm --init") and cpu_image.ref in text.splitlines()[0]
    assert '"event": "run_stop"' in text and '"status": "success"' in text
    results = json.loads((run_dir / "results.json").read_text())
    assert "torch" in json.dumps(results) and (run_dir / "report.md").is_file()
    recorded = json.loads((run_dir / "images.json").read_text())["images"][cpu_image.ref]
    assert recorded["id"] == cpu_image.id and recorded["hosts"] == {"localhost": cpu_image.id}
    assert run_containers(docker_engine, run_dir.name) == []


def test_a_timed_out_case_leaves_no_container(docker_engine, cpu_image, tmp_path):
    suite = tmp_path / "slow.yaml"
    suite.write_text(TINY_SUITE.replace("measure_steps: 10", "measure_steps: 100000").replace("timeout_s: 300",
                                                                                            "timeout_s: 15"))
    runs = tmp_path / "runs"
    assert main(["bench", "--suite", str(suite), "--runs-dir", str(runs), "--runtime", "docker"]) == 1
    (run_dir,) = runs.iterdir()
    (entry,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    assert entry["status"] == "timeout"
    assert run_containers(docker_engine, run_dir.name) == []


def test_kill_9_of_kit_bench_leaves_no_container(docker_engine, cpu_image, tmp_path):
    import subprocess

    suite = tmp_path / "slow.yaml"
    suite.write_text(TINY_SUITE.replace("measure_steps: 10", "measure_steps: 100000"))
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "kit", "bench", "--suite", str(suite), "--runs-dir", str(runs),
                             "--runtime", "docker"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline, logs = time.monotonic() + 180, []
        while time.monotonic() < deadline:  # until the container trains
            logs = list(runs.rglob("resnet50_b2_fp32_1.log")) if runs.exists() else []
            if logs and '"event": "step"' in logs[0].read_text(errors="replace"):
                break
            time.sleep(0.5)
        else:
            raise AssertionError("the container never trained")
        run_id = logs[0].relative_to(runs).parts[0]
        assert run_containers(docker_engine, run_id)
    finally:
        proc.kill()  # kill -9
        proc.wait()
    deadline = time.monotonic() + 60
    while run_containers(docker_engine, run_id) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert run_containers(docker_engine, run_id) == []


def test_multinode_runs_one_container_per_host(docker_engine, cpu_image, docker_hosts, inventory, tmp_path):
    _inv, path = inventory
    suite_file = tmp_path / "two.yaml"
    suite_file.write_text(TINY_SUITE.replace("{framework: torch, model: resnet50}",
                                             "{framework: torch, model: resnet50, nodes: 2}"))
    runs = tmp_path / "runs"
    rc = main(["multinode", "--hosts", "h1,h2", "--hosts-file", str(path), "--suite", str(suite_file),
               "--runs-dir", str(runs)])
    (run_dir,) = runs.iterdir()
    (entry,) = json.loads((run_dir / "run.json").read_text())["runs"].values()
    assert rc == 0 and entry["status"] == "ok", entry
    case = "torch/resnet50/bz2/2n1g/fp32/1/stdout.log"
    assert '"event": "run_stop"' in (run_dir / "hosts/h1" / case).read_text()  # rank 0 logs the steps
    assert (run_dir / "hosts/h2" / case).is_file()
    recorded = json.loads((run_dir / "images.json").read_text())["images"][cpu_image.ref]
    assert recorded["hosts"] == {"h1": cpu_image.id, "h2": cpu_image.id}
    assert host_containers(docker_hosts, "h1", run_dir.name) == host_containers(docker_hosts, "h2", run_dir.name) == []


def test_no_dangling_wrong_pin_layers_named(docker_engine):
    """The failed self-check build leaves no tagged image behind."""
    tags = [t for img in docker_engine.images.list() for t in img.tags]
    assert not any(t.startswith("kit/cpu:wrong-pin") for t in tags)


def test_record_merges_per_reference(tmp_path: Path):
    deliver.record(tmp_path, "kit/cpu:aaa", "sha256:1", spec_key="cpu", hosts={"h1": "sha256:1"})
    deliver.record(tmp_path, "kit/cpu:aaa", "sha256:1", repo_digest="sha256:d", hosts={"h2": "sha256:1"})
    data = json.loads((tmp_path / "images.json").read_text())
    entry = data["images"]["kit/cpu:aaa"]
    assert entry["hosts"] == {"h1": "sha256:1", "h2": "sha256:1"} and entry["repo_digest"] == "sha256:d"
    assert data["schema_version"] == 1


def test_fab_push_images_and_verify_images_on_all_hosts_at_once(small_image, docker_hosts, inventory):
    import subprocess

    _inv, path = inventory
    docker_hosts.run("h2", ["docker", "rmi", "-f", small_image.ref])  # h2 needs it whatever ran before
    fab = Path(sys.executable).parent / "fab"
    repo = Path(__file__).resolve().parent.parent
    for task in ("push_images", "verify_images"):
        out = subprocess.run([str(fab), "-H", "h1,h2", task, "--image", small_image.ref, "--hosts-file", str(path)],
                             cwd=repo, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
        assert f"{small_image.ref}: {small_image.id} on every host (h1, h2)" in out.stdout
        if task == "push_images":
            assert "h2: loaded" in out.stdout, out.stdout[-3000:]
    assert "h1: skipped" in subprocess.run(
        [str(fab), "-H", "h1,h2", "push_images", "--image", small_image.ref, "--hosts-file", str(path)],
        cwd=repo, capture_output=True, text=True, timeout=300).stdout


def test_reference_runs_in_the_image_with_the_hosts_model_code_mounted(docker_engine, cpu_image, docker_hosts,
                                                                        tmp_path, published):
    from test_reference_runs import models_tree

    root = models_tree(tmp_path, published)
    (tmp_path / "data" / "folder").mkdir(parents=True)
    path = write_inventory(docker_hosts, tmp_path, ssh={"connect_timeout": 5}, gpus=0, runtime="docker",
                           python=sys.executable, model_code=str(root))
    suite = tmp_path / "ngc.yaml"
    suite.write_text("schema_version: 1\nname: ngc\nhardware: cpu\ndefaults: {repeats: 1, timeout_s: 240}\ncases:\n"
                     "  - {framework: torch, impl: reference, model: resnet50, batch_size: 256, nodes: 2}\n")
    runs = tmp_path / "runs"
    rc = main(["multinode", "--hosts", "h1,h2", "--hosts-file", str(path), "--suite", str(suite), "--force",
               "--runs-dir", str(runs)])
    (run_dir,) = runs.iterdir()
    meta = json.loads((run_dir / "run.json").read_text())
    (entry,) = meta["runs"].values()
    assert rc == 0 and entry["status"] == "ok" and entry["figure"] == 10523.32, entry
    assert [m["host"] for m in meta["model_code_forced"]] == ["h1", "h2"]  # the mounted tree is no pinned checkout
    for rank, host in enumerate(("h1", "h2")):
        folder = run_dir / "hosts" / host / "ngc-pytorch/resnet50/bz256/2n1g/fp32/1"
        said = [json.loads(line.split(" ", 2)[2]) for line in (folder / "stdout.log").read_text().splitlines()
                if line.startswith("stand-in main.py ")]
        # the program runs in a scratch mirror of /opt/models/<ConvNets> (launch.py --scratch), not in the checkout
        assert [(s["rank"], s["world"], "/kit-scratch-" in s["cwd"]) for s in said] == [(rank, 2, True)]
        assert said[0]["argv"][-1] == str(tmp_path / "data" / "folder")  # the host's data, mounted read-only
        sidecar = json.loads((folder / "resnet50_b256_fp32_1.cmd.json").read_text())
        assert sidecar["argv"][:2] == ["python", "./multiproc.py"] and sidecar["code_root"] == "/opt/models"
    assert host_containers(docker_hosts, "h1", run_dir.name) == host_containers(docker_hosts, "h2", run_dir.name) == []
