"""FleetX's saved program staged beforehand (issue 58): bench/prepare_models.py --saved-program checks the archive by
sha256 (pins.yaml's, else the operator's), unpacks it where FleetX's VGG16() looks, records each file's sha256; the
kit's driver re-checks it and points FleetX there; a copy that is not the staged one, and a hostile archive, are
refused naming why, and nothing half-made is left."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from conftest import REPO, SHARED

from kit.config.programs import implementation
from kit.config.reference import RefJob, build
from kit.core.catalogue import load
from kit.images.spec import current_pins

saved_programs = load("saved_programs", "reference")
PREPARE = REPO / "bench" / "prepare_models.py"
FLEETX = SHARED / "programs" / "FleetX-296e0d71a33a.tar.gz"
STANDIN = REPO / "tests" / "standin"
(SAVED,) = implementation("paddle", "vgg16").saved_programs


def prepare(dest: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(PREPARE), "--dest", str(dest), "--from", f"fleetx={FLEETX}", *args,
                           "paddle/vgg16"], capture_output=True, text=True, timeout=300)


def staged_dir(dest: Path) -> Path:
    return dest / "saved-programs" / SAVED.into / SAVED.name


def test_pins_record_no_sha256_yet_so_the_operator_states_it(tmp_path, vgg16_saved_program):
    """pins.yaml records no sha256 (no host of the kit's reached the server): without --sha256 the archive is refused,
    naming its sha256 to check; a wrong one is refused; the right one stages it, recorded as the operator's."""
    archive, sha256 = vgg16_saved_program
    (pin,) = current_pins().model_code["fleetx"].saved_programs
    assert pin.sha256 is None and pin.url == "https://fleet.bj.bcebos.com/models/0.0.5/vgg16_nchw.tar.gz"
    dest = tmp_path / "models"
    unstated = prepare(dest, "--saved-program", f"vgg16_nchw={archive}")
    assert unstated.returncode != 0
    assert (f"docker/pins.yaml records no sha256 for vgg16_nchw ({pin.url}): check where {archive} came from, "
            f"then state its sha256 ({sha256}) with --sha256 vgg16_nchw=SHA256") in unstated.stderr
    assert not (dest / "saved-programs").exists()
    wrong = prepare(dest, "--saved-program", f"vgg16_nchw={archive}", "--sha256", f"vgg16_nchw={'0' * 64}")
    assert wrong.returncode != 0 and f"sha256 {sha256}, not the {'0' * 64} of the operator" in wrong.stderr
    assert not staged_dir(dest).exists() and not list((dest / "saved-programs").rglob("*.part"))

    done = prepare(dest, "--saved-program", f"vgg16_nchw={archive}", "--sha256", f"vgg16_nchw={sha256}")
    assert done.returncode == 0, done.stderr
    record = json.loads((staged_dir(dest).parent / "vgg16_nchw.json").read_text())
    assert record["archive_sha256"] == sha256 and record["sha256_from"].startswith("the operator (--sha256")
    assert sorted(record["files"]) == sorted([*SAVED.reads, "acc"])
    assert (staged_dir(dest) / "loss_name").read_text() == "softmax_with_cross_entropy_0.tmp_1"
    assert (dest / "FleetX" / "python" / "fleetx" / "applications" / "model.py").is_file()  # the code, from its archive
    assert f"{staged_dir(dest)}: vgg16_nchw.tar.gz (sha256 {sha256} from the operator" in done.stdout

    again = prepare(dest)  # staged: re-checked, kept
    assert again.returncode == 0 and f"{staged_dir(dest)}: vgg16_nchw.tar.gz (sha256 {sha256}" in again.stdout
    (staged_dir(dest) / "main_program").write_text("edited")
    changed = prepare(dest, "--saved-program", f"vgg16_nchw={archive}", "--sha256", f"vgg16_nchw={sha256}")
    assert changed.returncode != 0 and "main_program changed" in changed.stderr
    assert (staged_dir(dest) / "main_program").read_text() == "edited"  # never overwritten


def test_unstaged_is_named_with_its_url_and_unknown_names_are_refused(tmp_path, vgg16_saved_program):
    archive, sha256 = vgg16_saved_program
    done = prepare(tmp_path / "models")
    assert done.returncode == 0, done.stderr
    assert ("FleetX VGG16 (fleet collective) loads its saved program vgg16_nchw, which is not staged (vgg16_nchw: not "
            "staged") in done.stdout
    assert "download https://fleet.bj.bcebos.com/models/0.0.5/vgg16_nchw.tar.gz, then --saved-program" in done.stdout
    other = subprocess.run([sys.executable, str(PREPARE), "--dest", str(tmp_path / "m2"), "--saved-program",
                            f"resnet50={archive}", "--sha256", f"resnet50={sha256}", "paddle/vgg16"],
                           capture_output=True, text=True, timeout=300)
    assert other.returncode != 0
    assert "--saved-program/--sha256 resnet50: not loaded by paddle/vgg16 (saved programs: vgg16_nchw)" in other.stderr


def hostile(path: Path, members: dict[str, bytes]) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, body in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return path


@pytest.mark.parametrize("members, said", [
    ({"vgg16_nchw/loss_name": b"x", "other/loss_name": b"x"}, "expected one top folder vgg16_nchw/, found other"),
    ({"vgg16_nchw/loss_name": b"x"}, "vgg16_nchw/ lacks startup_program, main_program"),
    ({"vgg16_nchw/../../escape": b"x"}, "which is outside the destination"),
    ({"/abs/vgg16_nchw": b"x"}, "expected one top folder vgg16_nchw/, found /"),
])
def test_a_hostile_or_wrong_archive_is_refused_and_nothing_is_left(tmp_path, members, said):
    archive = hostile(tmp_path / "bad.tar.gz", members)
    root = tmp_path / "root"
    with pytest.raises(saved_programs.SavedProgramError, match="bad.tar.gz: ") as caught:
        saved_programs.stage(archive, root, SAVED.into, SAVED.name, SAVED.reads,
                             saved_programs.sha256_of(archive), "this test")
    assert said in str(caught.value)
    assert [p for p in root.rglob("*") if p.is_file()] == [] and not (tmp_path / "escape").exists()


def test_check_names_what_differs_from_the_record(tmp_path, vgg16_saved_program):
    archive, sha256 = vgg16_saved_program
    record = saved_programs.stage(archive, tmp_path, SAVED.into, SAVED.name, SAVED.reads, sha256, "this test")
    assert saved_programs.check(tmp_path, SAVED.into, SAVED.name) == record
    folder = tmp_path / SAVED.into / SAVED.name
    (folder / "para_info").unlink()
    (folder / "extra").write_text("x")
    (folder / "loss_name").write_text("other")
    with pytest.raises(saved_programs.SavedProgramError) as caught:
        saved_programs.check(tmp_path, SAVED.into, SAVED.name)
    assert str(caught.value).endswith("para_info missing; extra not staged; loss_name changed")
    (tmp_path / SAVED.into / "vgg16_nchw.json").write_text("{")
    with pytest.raises(saved_programs.SavedProgramError, match="vgg16_nchw.json: unreadable"):
        saved_programs.check(tmp_path, SAVED.into, SAVED.name)


def test_the_driver_refuses_a_staged_program_changed_since_before_fleetx_looks(tmp_path, vgg16_saved_program):
    """The kit's FleetX driver (with the stand-in fleetx package, which looks where the real one does) stops with the
    file that changed, before any step: FleetX never gets to download anything."""
    archive, sha256 = vgg16_saved_program
    saved_programs.stage(archive, tmp_path / "staged", SAVED.into, SAVED.name, SAVED.reads, sha256, "this test")
    (tmp_path / "staged" / SAVED.into / SAVED.name / "main_program").write_text("edited")
    cmd = build(RefJob("paddle", "vgg16", "fp32", 2, 1, 1), scripts_dir=str(REPO / "scripts"), data_dir=str(tmp_path))
    argv = [sys.executable if a == "python" else a for a in cmd.argv]
    out = subprocess.run([*argv, "--saved-programs", str(tmp_path / "staged")], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300, env={**cmd.env, "PYTHONPATH": str(STANDIN / "fleetx"),
                                                      "PATH": "/usr/bin:/bin"})
    assert out.returncode == 1 and "epoch id" not in out.stdout
    assert (f"vgg16_benchmark.py: FleetX's saved program {tmp_path / 'staged' / SAVED.into / SAVED.name}: not the "
            f"program staged from vgg16_nchw.tar.gz (sha256 {sha256}): main_program changed (FleetX would download it "
            "now; stage it first") in out.stderr
