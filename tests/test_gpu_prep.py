"""bench/gpu_prep.py (make gpu-prep): .whl/ and .models/ made from local mirrors, offline, then checked; each broken
part is named. The wheels are small but real (zip, dist-info); the mirrors of DLE and dllogger are git repositories
made here, whose commits the runs take with --pin (a SHA cannot be forged)."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import gpu_prep  # noqa: E402

TOOL = [sys.executable, str(REPO / "bench" / "gpu_prep.py")]
PINNED = gpu_prep.read_wheel_list(REPO / "bench" / "gpu_wheels.txt")
BINARY = {"cffi", "cryptography"}  # built as cp312 / abi3 manylinux wheels, the rest as py3-none-any
# nvImageCodec and nvJPEG as PyPI tags them: Python-version-free, but manylinux x86_64 only
NVIDIA_TAGS = {"nvidia-nvimgcodec-cu13": "py3-none-manylinux_2_28_x86_64",
               "nvidia-nvjpeg": "py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64"}
CONVNETS_MAIN = "DeepLearningExamples/PyTorch/Classification/ConvNets/main.py"


def offline_env() -> dict[str, str]:
    """No pip configuration of this machine (its find-links, indexes, constraints) reaches the runs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1"}


def run(*args: str | Path, tool: list[str] = TOOL) -> subprocess.CompletedProcess:
    return subprocess.run([*tool, *map(str, args)], capture_output=True, text=True, env=offline_env(), timeout=300)


def make_wheel(folder: Path, name: str, version: str, tag: str = "py3-none-any", payload: bytes = b"") -> Path:
    """A valid wheel: a zip holding <dist>.dist-info/{METADATA,WHEEL,RECORD} and one module (PAYLOAD: bytes in
    a data file beside it)."""
    dist = f"{name.replace('-', '_')}-{version}"
    files = {f"{dist.split('-')[0]}_stub.py": "VALUE = 1\n",
             f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
             f"{dist}.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: {tag}\n"}
    if payload:
        files[f"{dist.split('-')[0]}_data.bin"] = payload
    blobs = {path: text if isinstance(text, bytes) else text.encode() for path, text in files.items()}
    record = [f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(blob).digest()).rstrip(b'=').decode()},"
              f"{len(blob)}" for path, blob in blobs.items()]
    files[f"{dist}.dist-info/RECORD"] = "\n".join([*record, f"{dist}.dist-info/RECORD,,"]) + "\n"
    path = folder / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as archive:  # stored: a flipped byte is a CRC error, whatever zlib
        for member, text in files.items():
            archive.writestr(member, text)
    return path


def git(where: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(where), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, text=True, check=True).stdout.strip()


def git_mirror(where: Path, files: dict[str, str]) -> str:
    """A git repository at `where` holding `files`; its commit."""
    for rel, text in files.items():
        (where / rel).parent.mkdir(parents=True, exist_ok=True)
        (where / rel).write_text(text)
    subprocess.run(["git", "init", "-q", str(where)], check=True)
    git(where, "add", "-A")
    git(where, "commit", "-qm", "mirror")
    return git(where, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def mirrors(tmp_path_factory) -> dict:
    """A wheel folder with every pinned wheel (and a macOS decoy pip must pass over) and git mirrors of DLE and
    dllogger; the options that make a root from them."""
    top = tmp_path_factory.mktemp("mirrors")
    wheels = top / "wheels"
    wheels.mkdir()
    for name, version in PINNED.items():
        tag = {"cffi": "cp312-cp312-manylinux_2_17_x86_64", "cryptography": "cp311-abi3-manylinux_2_28_x86_64",
               **NVIDIA_TAGS}
        make_wheel(wheels, name, str(version), tag.get(name, "py3-none-any"))
    make_wheel(wheels, "cffi", str(PINNED["cffi"]), "cp312-cp312-macosx_11_0_arm64")
    dle = git_mirror(top / "dle", {"PyTorch/Classification/ConvNets/main.py": "print('DLE')\n",
                                   "TensorFlow/Classification/ConvNets/main.py": "print('not checked out')\n"})
    dllogger = git_mirror(top / "dllogger", {"dllogger/__init__.py": "", "setup.py": ""})
    return {"wheels": wheels, "dle": dle, "dllogger": dllogger,
            "options": ["--with-program", "--wheels-from", wheels, "--from", f"dle={top / 'dle'}", "--from",
                        f"dllogger={top / 'dllogger'}", "--pin", f"dle={dle}", "--pin", f"dllogger={dllogger}"]}


@pytest.fixture(scope="module")
def prepared(mirrors, tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A root made by a full run; each test takes a copy of it (root())."""
    root = tmp_path_factory.mktemp("prepared")
    return root, run("--root", root, *mirrors["options"])


@pytest.fixture
def root(prepared, tmp_path) -> Path:
    shutil.copytree(prepared[0], tmp_path / "root", symlinks=True)
    return tmp_path / "root"


def test_a_full_run_makes_both_folders_checks_them_and_says_what_travels(prepared, mirrors):
    root, done = prepared
    assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in (root / ".whl").iterdir())
    assert len(names) == len(PINNED) and "cffi-2.1.1-cp312-cp312-manylinux_2_17_x86_64.whl" in names
    assert not any("macosx" in n for n in names)
    for folder, commit in (("DeepLearningExamples", mirrors["dle"]), ("dllogger", mirrors["dllogger"])):
        assert git(root / ".models" / folder, "rev-parse", "HEAD") == commit
    assert (root / ".models" / CONVNETS_MAIN).is_file()
    assert not (root / ".models/DeepLearningExamples/TensorFlow").exists()  # sparse: the program's folder only
    lines = done.stdout.splitlines()
    assert any(line.split()[0] == ".whl" and line.endswith("MiB") for line in lines), done.stdout
    assert any(line.split()[0] == ".models" and line.endswith("MiB") for line in lines), done.stdout
    assert any(line.startswith("total") and "of the 64 MiB" in line for line in lines), done.stdout
    assert lines[-4:] == ["carry: .whl .models", "on the GPU machine, in the checkout: bash bench/gpu_proof.sh",
                          "  then, where nvimgcodec got no time and the machine is still warm: "
                          "bash bench/gpu_proof.sh --stages 1 --decoders nvimgcodec",
                          "  and for NVIDIA DLE's ResNet50 beside the harness: bash bench/gpu_proof.sh --stages 3"]


def test_a_second_run_downloads_and_fetches_nothing_and_succeeds(root, tmp_path, mirrors):
    before = {p.name: p.stat().st_mtime_ns for p in (root / ".whl").iterdir()}
    empty = tmp_path / "empty"
    empty.mkdir()
    # sources that could give nothing: all is there already
    again = run("--root", root, "--with-program", "--wheels-from", empty, "--from", f"dle={empty}", "--from",
                f"dllogger={empty}",
                "--pin", f"dle={mirrors['dle']}", "--pin", f"dllogger={mirrors['dllogger']}")
    assert again.returncode == 0, again.stderr
    assert f".whl: the {len(PINNED)} wheels of gpu_wheels.txt are there already" in again.stdout
    assert f"DeepLearningExamples: at {mirrors['dle']} already" in again.stdout
    assert "carry: .whl .models" in again.stdout
    assert {p.name: p.stat().st_mtime_ns for p in (root / ".whl").iterdir()} == before
    check = run("--root", root, "--check", "--with-program", "--pin", f"dle={mirrors['dle']}", "--pin", f"dllogger={mirrors['dllogger']}")
    assert check.returncode == 0 and "carry: .whl .models" in check.stdout, check.stderr


def drop(root: Path, name: str) -> Path:
    (path,) = (root / ".whl").glob(f"{name}-*.whl")
    path.unlink()
    return path


def missing(root: Path) -> str:
    drop(root, "fabric")
    return f"gpu_prep: {root / '.whl'}: no wheel of fabric==3.2.3 (pinned in gpu_wheels.txt)"


def macos(root: Path) -> str:
    drop(root, "cffi")
    path = make_wheel(root / ".whl", "cffi", "2.1.1", "cp312-cp312-macosx_11_0_arm64")
    return f"gpu_prep: {path}: for cp312-cp312-macosx_11_0_arm64, not CPython 3.12 on manylinux x86_64"


def cp311(root: Path) -> str:
    drop(root, "cffi")
    path = make_wheel(root / ".whl", "cffi", "2.1.1", "cp311-cp311-manylinux_2_17_x86_64")
    return f"gpu_prep: {path}: for cp311-cp311-manylinux_2_17_x86_64, not CPython 3.12 on manylinux x86_64"


def corrupt(root: Path) -> str:
    (path,) = (root / ".whl").glob("docker-*.whl")
    path.write_bytes(path.read_bytes()[:100])
    return f"gpu_prep: {path}: not a sound zip (File is not a zip file)"


def damaged_member(root: Path) -> str:
    (path,) = (root / ".whl").glob("invoke-*.whl")
    data = path.read_bytes()
    at = data.index(b"VALUE = 1")  # the first member's bytes
    path.write_bytes(data[:at] + b"X" + data[at + 1:])
    return f"gpu_prep: {path}: corrupt zip (member invoke_stub.py fails its CRC)"


def encrypted_member(root: Path) -> str:
    (path,) = (root / ".whl").glob("invoke-*.whl")
    data = bytearray(path.read_bytes())
    for signature, flags_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):  # the local and the central header
        at = data.index(signature) + flags_at
        data[at] |= 0x01  # "encrypted"
    path.write_bytes(bytes(data))
    return f"gpu_prep: {path}: not a wheel pip can install (File 'invoke_stub.py' is encrypted"


def stray(root: Path) -> str:
    path = make_wheel(root / ".whl", "fabric", "3.2.2")
    return (f"gpu_prep: {path}: not a wheel gpu_wheels.txt pins (gpu_wheels.txt pins fabric==3.2.3): remove it "
            "(bench/kit_deps.sh installs every .whl/*.whl)")


def off_pin(root: Path) -> str:
    where = root / ".models" / "dllogger"
    git(where, "commit", "-q", "--allow-empty", "-m", "not the pin")
    return f"gpu_prep: {where}: at {git(where, 'rev-parse', 'HEAD')}, the pin is "


def dirty(root: Path) -> str:
    (root / ".models" / CONVNETS_MAIN).write_text("print('changed')\n")
    return (f"gpu_prep: {root / '.models/DeepLearningExamples'}: changed or untracked files: "
            "PyTorch/Classification/ConvNets/main.py")


def no_main(root: Path) -> str:
    shutil.rmtree(root / ".models" / "dllogger" / "dllogger")
    return f"gpu_prep: no {root / '.models/dllogger/dllogger/__init__.py'} (bench/dle_native_check.sh needs it)"


@pytest.mark.parametrize("spoil", [missing, macos, cp311, corrupt, damaged_member, encrypted_member, stray, off_pin, dirty, no_main])
def test_the_check_fails_naming_what_is_wrong(root, mirrors, spoil):
    said = spoil(root)
    done = run("--root", root, "--check", "--with-program", "--pin", f"dle={mirrors['dle']}", "--pin", f"dllogger={mirrors['dllogger']}")
    assert done.returncode == 1, done.stdout
    assert any(line.startswith(said) for line in done.stderr.splitlines()), done.stderr
    assert "carry:" not in done.stdout


def test_over_the_carry_limit_fails_with_the_sizes(root, mirrors):
    with open(root / ".models" / "big.bin", "wb") as big:  # sparse: takes no disk
        big.truncate(64 * 2**20)
    done = run("--root", root, "--check", "--with-program", "--pin", f"dle={mirrors['dle']}", "--pin", f"dllogger={mirrors['dllogger']}")
    assert done.returncode == 1
    (total,) = [line for line in done.stdout.splitlines() if line.startswith("total")]
    assert total.split()[1] == done.stderr.split(" make ")[1].split()[0]  # the same figure in both
    assert done.stderr.startswith("gpu_prep: the checkout's tracked files and .whl and .models make 8")
    tracked = next(line for line in done.stdout.splitlines() if line.startswith("tracked")).split()[1]
    assert f"MiB, over the 64 MiB that may travel with the checkout (tracked files {tracked} MiB, .whl " in done.stderr


def test_a_pin_the_wheel_mirror_lacks_is_named(mirrors, tmp_path):
    partial = tmp_path / "partial"
    shutil.copytree(mirrors["wheels"], partial)
    (partial / "fabric-3.2.3-py3-none-any.whl").unlink()
    done = run("--root", tmp_path / "root", mirrors["options"][0], *mirrors["options"][3:], "--wheels-from", partial)
    assert done.returncode == 1
    assert done.stderr.strip() == (f"gpu_prep: fabric==3.2.3: no CPython 3.12 manylinux x86_64 or pure-Python wheel "
                                   f"in {partial}")


def test_a_source_without_the_pin_is_named_and_leaves_nothing_half_made(mirrors, tmp_path):
    elsewhere = tmp_path / "other"
    git_mirror(elsewhere, {"README.md": "another repository\n"})
    done = run("--root", tmp_path / "root", *mirrors["options"][:5], "--from", f"dllogger={elsewhere}",
               *mirrors["options"][7:])
    where = tmp_path / "root" / ".models" / "dllogger"
    assert done.returncode == 1
    assert done.stderr.startswith(f"prepare_models: {where}: fetching {mirrors['dllogger']} from {elsewhere}: ")
    assert len(done.stderr.strip().splitlines()) == 1
    assert not where.exists()  # so that a run with the right source starts afresh


@pytest.mark.parametrize(("args", "said"), [
    (["--from", "dle"], "argument --from: 'dle': expected KEY=SOURCE, e.g. dle=/path/to/a/mirror"),
    (["--pin", "dle=4a15e914"], "argument --pin: 'dle=4a15e914': the commit must be 40 lowercase hex digits"),
    (["--from", "dl=/x"], "gpu_prep: --from dl: not needed by torch/resnet50 (keys: dle, dllogger)"),
    (["--wheels-from", "/no/such/folder"], "gpu_prep: --wheels-from /no/such/folder: no such folder"),
])
def test_bad_input_exits_2_naming_it(tmp_path, args, said):
    done = run("--root", tmp_path, *args)
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].endswith(said), done.stderr
    assert not (tmp_path / ".whl").exists()


def test_a_bad_wheel_list_line_exits_2_naming_it(tmp_path):
    listed = tmp_path / "wheels.txt"
    listed.write_text("# the wheels\nfabric==3.2.3\nparamiko>=5\n")
    done = run("--root", tmp_path, "--wheels", listed)
    assert done.returncode == 2
    assert done.stderr.strip() == f"gpu_prep: {listed}:3: expected NAME==VERSION, got 'paramiko>=5'"


def test_a_wheel_list_not_utf8_or_not_a_file_exits_2_naming_it(tmp_path):
    listed = tmp_path / "wheels.txt"
    listed.write_bytes(b"fabric==3.2.3\n# caf\xe9\n")
    done = run("--root", tmp_path, "--wheels", listed)
    assert (done.returncode, done.stderr.strip()) == (2, f"gpu_prep: {listed}:2: not UTF-8 (byte 0xe9 at column 6)")
    fifo = tmp_path / "fifo.txt"
    os.mkfifo(fifo)  # read as a file, it would block
    done = run("--root", tmp_path, "--wheels", fifo)
    assert (done.returncode, done.stderr.strip()) == (
        2, f"gpu_prep: {fifo}: not a regular file (a pipe, socket or device), so not a wheel list")
    assert not (tmp_path / ".whl").exists()


def test_prepare_models_from_without_equals_is_an_argparse_error(tmp_path):
    done = run("--dest", tmp_path / "models", "--from", "dle", tool=[sys.executable, str(REPO / "bench" /
                                                                                          "prepare_models.py")])
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "prepare_models.py: error: argument --from: 'dle': expected KEY=SOURCE, e.g. dle=/path/to/a/mirror")


def test_the_shipped_wheel_list_pins_requirements_lock_versions_and_nvidia_ml_py():
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    lock = {canonicalize_name(n): Version(v) for n, _, v in (line.partition("==") for line in
            (REPO / "requirements.lock").read_text().splitlines()) if v and not n.startswith("#")}
    assert "nvidia-ml-py" in PINNED
    assert {n: v for n, v in PINNED.items() if n in lock} == {n: lock[n] for n in PINNED if n in lock}
    # beyond the lock: the GPU machine's own (nvImageCodec is in the lock too, for its CPU backend's tests)
    assert set(PINNED) - set(lock) == {"nvidia-ml-py", "nvidia-nvjpeg"}
    assert lock["nvidia-nvimgcodec-cu13"] == PINNED["nvidia-nvimgcodec-cu13"]


def test_nvimgcodec_for_cuda_13_travels_pinned_with_the_nvjpeg_it_loads():
    """The gpu loader's second decoder: nvImageCodec's CUDA 13 build and the real nvJPEG wheel its [nvjpeg] extra
    names (nvidia-nvjpeg; nvidia-nvjpeg-cu13 on PyPI is an empty 0.0.0a0 placeholder), both CUDA 13.x."""
    assert PINNED["nvidia-nvimgcodec-cu13"].release[:2] == (0, 9)
    assert PINNED["nvidia-nvjpeg"].major == 13
    assert "nvidia-nvjpeg-cu13" not in PINNED


def test_the_nvidia_wheels_pass_the_platform_check_and_a_macos_one_does_not(root, mirrors):
    names = {p.name for p in (root / ".whl").iterdir()}
    assert f"nvidia_nvimgcodec_cu13-{PINNED['nvidia-nvimgcodec-cu13']}-py3-none-manylinux_2_28_x86_64.whl" in names
    drop(root, "nvidia_nvimgcodec_cu13")
    path = make_wheel(root / ".whl", "nvidia-nvimgcodec-cu13", str(PINNED["nvidia-nvimgcodec-cu13"]),
                      "py3-none-macosx_11_0_arm64")
    done = run("--root", root, "--check", "--with-program", "--pin", f"dle={mirrors['dle']}", "--pin", f"dllogger={mirrors['dllogger']}")
    assert done.returncode == 1
    assert f"gpu_prep: {path}: for py3-none-macosx_11_0_arm64, not CPython 3.12 on manylinux x86_64" in done.stderr


def test_each_wheel_of_a_mib_or_more_is_listed_with_its_size_under_the_folders(root, mirrors):
    (old,) = (root / ".whl").glob("nvidia_nvjpeg-*.whl")
    old.unlink()
    big = make_wheel(root / ".whl", "nvidia-nvjpeg", str(PINNED["nvidia-nvjpeg"]), NVIDIA_TAGS["nvidia-nvjpeg"],
                     payload=os.urandom(3 * 2**19))  # 1.5 MiB that do not compress
    done = run("--root", root, "--check", "--with-program", "--pin", f"dle={mirrors['dle']}", "--pin", f"dllogger={mirrors['dllogger']}")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(".whl"))
    assert lines[at + 1].split() == [f"{big.stat().st_size / 2**20:.1f}", "MiB", big.name]
    assert lines[at + 2].startswith(".models")  # the small wheels are not listed
    (total,) = [line for line in lines if line.startswith("total")]
    left = 64 - float(total.split()[1])
    assert total.endswith(f"of the 64 MiB that may travel with the checkout ({left:.1f} MiB left)")


def test_check_alone_fetches_nothing_and_names_the_missing_folders(tmp_path):
    done = run("--root", tmp_path, "--check")
    assert done.returncode == 1 and not (tmp_path / ".whl").exists() and not (tmp_path / ".models").exists()
    assert done.stderr.splitlines() == [
        f"gpu_prep: no {tmp_path / '.whl'}: run bench/gpu_prep.py where PyPI or a wheel mirror (--wheels-from) is "
        "reachable"]  # .models is not checked without the program (stage 3)
    done = run("--root", tmp_path, "--check", "--with-program")
    assert done.returncode == 1 and not (tmp_path / ".whl").exists() and not (tmp_path / ".models").exists()
    assert done.stderr.splitlines()[:2] == [
        f"gpu_prep: no {tmp_path / '.whl'}: run bench/gpu_prep.py where PyPI or a wheel mirror (--wheels-from) is "
        "reachable",
        f"gpu_prep: no {tmp_path / '.models'}: run bench/gpu_prep.py where the sources (or --from mirrors) are "
        "reachable"]


def tracked_bytes() -> int:
    """The bytes of the checkout's tracked files (git ls-files), each as it is on disk."""
    names = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z"], capture_output=True, check=True).stdout
    paths = [REPO / os.fsdecode(n) for n in names.split(b"\0") if n]
    return sum(p.lstat().st_size for p in paths if p.is_symlink() or p.is_file())


def test_without_the_program_models_is_not_made_nor_carried_and_the_tracked_tree_is_counted(mirrors, tmp_path):
    """The default budget does not run stage 3: only .whl travels, beside the checkout's tracked files, and the
    total that travels is the two together."""
    root = tmp_path / "root"
    done = run("--root", root, "--wheels-from", mirrors["wheels"])
    assert done.returncode == 0, done.stderr
    assert not (root / ".models").exists() and (root / ".whl").is_dir()
    lines = done.stdout.splitlines()
    sizes = {line.split()[0]: float(line.split()[1]) for line in lines if line.split()[0] in
             ("tracked", ".whl", ".models", "total")}
    assert set(sizes) == {"tracked", ".whl", "total"}
    assert sizes["tracked"] == pytest.approx(tracked_bytes() / 2**20, abs=0.051)
    assert sizes["total"] == pytest.approx(sizes["tracked"] + sizes[".whl"], abs=0.11)
    assert "the checkout's tracked files (git ls-files, as checked out)" in done.stdout
    assert lines[-3:] == ["carry: .whl", "on the GPU machine, in the checkout: bash bench/gpu_proof.sh",
                          "  then, where nvimgcodec got no time and the machine is still warm: "
                          "bash bench/gpu_proof.sh --stages 1 --decoders nvimgcodec"]


def test_the_tracked_tree_with_the_wheels_over_64_mib_is_refused(mirrors, tmp_path):
    root = tmp_path / "root"
    assert run("--root", root, "--wheels-from", mirrors["wheels"]).returncode == 0
    room = 64 * 2**20 - tracked_bytes() - gpu_prep.size_of(root / ".whl")
    (old,) = (root / ".whl").glob("nvidia_nvjpeg-*.whl")  # a heavier nvJPEG wheel: what is left, and a MiB more
    with open(old, "ab") as wheel:
        wheel.truncate(old.stat().st_size + room + 2**20)  # sparse: takes no disk
    done = run("--root", root, "--check")
    assert done.returncode == 1 and "carry:" not in done.stdout
    (total,) = [line for line in done.stdout.splitlines() if line.startswith("total")]
    assert 65.0 <= float(total.split()[1]) <= 65.1 and total.endswith("(0.0 MiB left)")
    assert done.stderr.splitlines()[-1].startswith(
        f"gpu_prep: the checkout's tracked files and .whl make {total.split()[1]} MiB, over the 64 MiB that may "
        "travel with the checkout (tracked files ")
