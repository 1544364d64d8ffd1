"""data_prep/make_train_list.py and data_prep/verify_list.py, run as the user runs them."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAKE = REPO / "data_prep" / "make_train_list.py"
VERIFY = REPO / "data_prep" / "verify_list.py"

EXPECTED_LINES = [
    "train/n01440764/n01440764_10026.JPEG 0",
    "train/n01440764/n01440764_18.jpg 0",
    "train/n01443537/n01443537_2.png 1",
    "train/n01443537/n01443537_7.PNG 1",
    "train/n15075141/n15075141_5.jpeg 2",
]


def run(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.fixture
def dataset(tmp_path: Path) -> Path:
    """An ImageNet-shaped tree: root/train/<wnid>/<image>, plus things that must be ignored."""
    root = tmp_path / "ILSVRC2012"
    files = {
        # created out of order on purpose: the list must not depend on directory order
        "train/n15075141/n15075141_5.jpeg": b"\xff\xd8c",
        "train/n01443537/n01443537_7.PNG": b"\x89PNGb",
        "train/n01440764/n01440764_18.jpg": b"\xff\xd8a2",
        "train/n01440764/n01440764_10026.JPEG": b"\xff\xd8a1",
        "train/n01443537/n01443537_2.png": b"\x89PNGa",
        "train/n01440764/notes.txt": b"not an image",
        "train/n01440764/.n01440764_1.JPEG.swp": b"editor junk",
        "train/LOC_synset_mapping.txt": b"n01440764 tench\n",
    }
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root


def make_list(dataset: Path) -> tuple[Path, subprocess.CompletedProcess]:
    out = dataset / "train_list.txt"
    proc = run(MAKE, dataset / "train", "--out", out)
    assert proc.returncode == 0, proc.stderr
    return out, proc


def test_make_train_list_exact_contents_labels_and_counts(dataset: Path) -> None:
    out, proc = make_list(dataset)
    data = out.read_bytes()
    assert data.decode() == "".join(line + "\n" for line in EXPECTED_LINES)
    assert f"wrote {out}: 5 images, 3 classes" in proc.stdout
    assert f"sha256 {hashlib.sha256(data).hexdigest()}" in proc.stdout
    assert "skipped 2 non-image entries" in proc.stdout
    assert "ignored 1 non-directory entries" in proc.stdout
    # atomic write leaves no temporary file behind
    assert sorted(p.name for p in dataset.iterdir()) == ["train", "train_list.txt"]


def test_make_train_list_is_deterministic(dataset: Path, tmp_path: Path) -> None:
    out, _ = make_list(dataset)
    first = out.read_bytes()
    # a second run replaces the file with identical bytes
    out2, _ = make_list(dataset)
    assert out2.read_bytes() == first


def test_make_train_list_labels_follow_sorted_wnids_including_empty_class(
    dataset: Path,
) -> None:
    (dataset / "train" / "n01443000").mkdir()  # sorts between the first two classes
    out, proc = make_list(dataset)
    lines = out.read_text().splitlines()
    assert [line.rsplit(" ", 1)[1] for line in lines] == ["0", "0", "2", "2", "3"]
    assert "5 images, 4 classes" in proc.stdout
    assert "1 class directories have no images: n01443000" in proc.stdout


def test_make_train_list_rejects_bad_input(tmp_path: Path) -> None:
    proc = run(MAKE, tmp_path / "absent", "--out", tmp_path / "list.txt")
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"make_train_list.py: error: {tmp_path / 'absent'}: not a directory"

    (tmp_path / "train").mkdir()
    proc = run(MAKE, tmp_path / "train", "--out", tmp_path / "list.txt")
    assert proc.returncode == 2
    assert "no class directories" in proc.stderr
    assert not (tmp_path / "list.txt").exists()


def test_make_train_list_refuses_whitespace_in_paths(dataset: Path) -> None:
    (dataset / "train" / "n01440764" / "has space.jpg").write_bytes(b"x")
    out = dataset / "train_list.txt"
    proc = run(MAKE, dataset / "train", "--out", out)
    assert proc.returncode == 2
    assert "has space.jpg: path contains whitespace" in proc.stderr
    assert not out.exists()


def test_verify_list_ok_with_counts_and_sha256(dataset: Path) -> None:
    out, _ = make_list(dataset)
    sha = hashlib.sha256(out.read_bytes()).hexdigest()
    proc = run(VERIFY, out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert f"sha256  {sha}" in lines
    assert "images  5" in lines
    assert "classes 3" in lines
    assert "full ImageNet-1k train (1281167 images / 1000 classes): no" in lines
    assert "missing files: 0" in lines
    assert lines[-1] == "OK"


def test_verify_list_json(dataset: Path) -> None:
    out, _ = make_list(dataset)
    proc = run(VERIFY, out, "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["images"] == 5
    assert result["classes"] == 3
    assert result["missing"] == 0
    assert result["missing_first"] == []
    assert result["duplicates"] == 0
    assert result["label_conflicts"] == []
    assert result["full_imagenet"] is False
    assert result["ok"] is True
    assert result["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert result["root"] == str(dataset)


def test_verify_list_expect_full_fails_on_partial_dataset(dataset: Path) -> None:
    out, _ = make_list(dataset)
    proc = run(VERIFY, out, "--expect-full", "--json")
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["full_imagenet"] is False
    assert result["ok"] is False


def test_verify_list_reports_first_ten_missing_and_count(dataset: Path) -> None:
    out, _ = make_list(dataset)
    extra = [f"train/n01440764/gone_{i:02d}.JPEG 0" for i in range(12)]
    with out.open("a") as fh:
        fh.write("".join(line + "\n" for line in extra))
    (dataset / "train" / "n15075141" / "n15075141_5.jpeg").unlink()

    proc = run(VERIFY, out)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert "missing files: 13 (first 10):" in lines
    start = lines.index("missing files: 13 (first 10):") + 1
    # in list order: the deleted image (line 5) comes before the appended lines
    first_ten = ["train/n15075141/n15075141_5.jpeg"] + [e.split()[0] for e in extra[:9]]
    assert lines[start : start + 11] == ["  " + p for p in first_ten] + ["FAILED"]

    result = json.loads(run(VERIFY, out, "--json").stdout)
    assert result["missing"] == 13
    assert result["missing_first"] == first_ten
    assert result["ok"] is False


def test_verify_list_malformed_line_names_file_and_line(tmp_path: Path) -> None:
    lst = tmp_path / "train_list.txt"
    lst.write_text("train/a/1.jpg 0\ntrain/a/2.jpg\ntrain/a/3.jpg x\n")
    proc = run(VERIFY, lst)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        f"verify_list.py: error: {lst}:2: expected '<path> <label>', got 'train/a/2.jpg' (and 1 more malformed lines)"
    ]


def test_verify_list_bad_label_and_tab_separator(tmp_path: Path) -> None:
    lst = tmp_path / "l.txt"
    lst.write_text("train/a/1.jpg -1\n")
    proc = run(VERIFY, lst, "--json")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"verify_list.py: error: {lst}:1: label must be a non-negative integer, got '-1'")
    lst.write_text("train/a/1.jpg 0\ntrain/a/2.jpg\t0\n")
    proc = run(VERIFY, lst)
    assert proc.returncode == 2
    assert f"{lst}:2: expected '<path> <label>'" in proc.stderr


def harness_data():
    """The harness's data.py (its modules import each other by name)."""
    sys.path.insert(0, str(REPO / "scripts" / "harness"))
    import data

    return data


def test_verify_list_and_the_harness_share_the_list_rules() -> None:
    """verify_list.py travels alone to hosts, the harness into containers: each holds a copy, the same text."""
    import importlib.util
    import inspect

    spec = importlib.util.spec_from_file_location("verify_list_copy", VERIFY)
    checker = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(checker)
    data = harness_data()
    for name in ("label_out_of_range", "outside_root"):
        assert inspect.getsource(getattr(checker, name)) == inspect.getsource(getattr(data, name)), name
    assert checker.INT64_MAX == data.INT64_MAX == 2**63 - 1


def test_verify_list_labels_beyond_int64_or_the_classes_as_the_harness(dataset: Path) -> None:
    out, _ = make_list(dataset)
    lines = out.read_text().splitlines()
    data = harness_data()
    for label, extra, words in (("9223372036854775808", [], "label 9223372036854775808 does not fit in int64"),
                                ("3", ["--num-classes", "3"], "label 3 is out of range: the run has 3 classes "
                                                              "(labels 0 to 2)")):
        out.write_text("\n".join([*lines[:-1], f"train/n15075141/n15075141_5.jpeg {label}"]) + "\n")
        proc = run(VERIFY, out, *extra)
        assert proc.returncode == 2 and proc.stderr.strip() == f"verify_list.py: error: {out}:5: {words}"
        with pytest.raises(data.DataError) as err:
            data.load_list(out, num_classes=3 if extra else None)
        assert str(err.value) == f"{out}:5: {words}"


def test_verify_list_refuses_paths_outside_the_root_as_the_harness(dataset: Path, tmp_path: Path) -> None:
    out, _ = make_list(dataset)
    lines = out.read_text().splitlines()
    secret = tmp_path / "secret.jpg"
    secret.write_bytes(b"\xff\xd8x")
    (dataset / "train" / "link.jpg").symlink_to(secret)
    (dataset / "train" / "inside.jpg").symlink_to(dataset / "train" / "n01440764" / "n01440764_18.jpg")
    data = harness_data()
    for path, outside in ((str(secret), True), ("../secret.jpg", True), ("train/link.jpg", True),
                          ("train/inside.jpg", False), ("train/../train/n01440764/n01440764_18.jpg", False)):
        out.write_text("\n".join([*lines, f"{path} 3"]) + "\n")  # a label of its own: no label conflict
        result = json.loads(run(VERIFY, out, "--json").stdout)
        assert result["outside_root"] == int(outside) and result["ok"] is not outside, path
        if not outside:
            assert data.load_list(out).outside == 0
            continue
        said = f"{out}:6: {path} resolves to {secret.resolve()}, outside the data root {dataset.resolve()}"
        assert result["outside_root_first"] == [said]
        with pytest.raises(data.DataError) as err:  # the harness refuses the same line in the same words
            data.load_list(out)
        assert str(err.value) == f"{said}; --allow-outside-root reads such paths"
        proc = run(VERIFY, out)
        assert proc.returncode == 1 and f"  {said}" in proc.stdout.splitlines()
        proc = run(VERIFY, out, "--allow-outside-root")
        assert proc.returncode == 0 and "paths outside the data root: 1 (allowed: --allow-outside-root):" in proc.stdout
        assert data.load_list(out, allow_outside_root=True).outside == 1


def test_verify_list_unreadable_and_empty(tmp_path: Path) -> None:
    proc = run(VERIFY, tmp_path / "absent.txt")
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"verify_list.py: error: cannot read {tmp_path / 'absent.txt'}: No such file or directory"
    )
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    proc = run(VERIFY, empty)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"verify_list.py: error: {empty}: empty list"


def test_verify_list_duplicates_and_label_conflicts(dataset: Path) -> None:
    out, _ = make_list(dataset)
    with out.open("a") as fh:
        fh.write("train/n01440764/n01440764_18.jpg 0\n")  # duplicate path (line 6)
        fh.write("train/n01443537/n01443537_2.png 0\n")  # dir n01443537 now has labels 0 and 1
    result = json.loads(run(VERIFY, out, "--json").stdout)
    assert result["ok"] is False
    assert result["duplicates"] == 2
    assert result["duplicates_first"][0] == (f"{out}:6: train/n01440764/n01440764_18.jpg (first at line 2)")
    assert "directory 'train/n01443537' has labels [0, 1]" in result["label_conflicts"]
    assert "label 0 is used by directories ['train/n01440764', 'train/n01443537']" in (result["label_conflicts"])
    assert run(VERIFY, out).returncode == 1


def test_verify_list_root_option(dataset: Path, tmp_path: Path) -> None:
    out, _ = make_list(dataset)
    moved = tmp_path / "elsewhere" / "list.txt"
    moved.parent.mkdir()
    moved.write_bytes(out.read_bytes())
    assert run(VERIFY, moved).returncode == 1  # relative to the list's own directory: missing
    proc = run(VERIFY, moved, "--root", dataset)
    assert proc.returncode == 0, proc.stdout


# -- make_synthetic_imagenet.py ------------------------------------------------------------------

SYNTH = REPO / "data_prep" / "make_synthetic_imagenet.py"


def synth_tree(out: Path, *args: object) -> subprocess.CompletedProcess:
    proc = run(SYNTH, out, *args)
    assert proc.returncode == 0, proc.stderr
    return proc


def tree_digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_make_synthetic_imagenet_tree_list_and_summary(tmp_path: Path) -> None:
    from PIL import Image

    out = tmp_path / "synth"
    proc = synth_tree(out, "--classes", 3, "--images-per-class", 16, "--size", "80x64")
    lst = out / "train_list.txt"
    data = lst.read_bytes()
    lines = data.decode().splitlines()
    assert len(lines) == 48
    assert lines[0] == "train/n01440764/n01440764_1.JPEG 0"
    assert lines[1] == "train/n01440764/n01440764_10.JPEG 0"  # make_train_list's sorted order
    assert {line.split("/")[1] for line in lines} == {"n01440764", "n01443537", "n01484850"}
    assert [line.rsplit(" ", 1)[1] for line in lines] == ["0"] * 16 + ["1"] * 16 + ["2"] * 16
    total = sum(p.stat().st_size for p in (out / "train").rglob("*.JPEG"))
    assert proc.stdout.splitlines() == [
        f"wrote 48 images in 3 classes ({total} bytes of JPEG) under {out / 'train'}",
        f"wrote {lst}: 48 images, 3 classes",
        f"sha256 {hashlib.sha256(data).hexdigest()}",
    ]
    sizes, modes = set(), set()
    for line in lines:
        with Image.open(out / line.split()[0]) as img:
            assert img.format == "JPEG"
            img.load()
            sizes.add(img.size)
            modes.add(img.mode)
            assert 60 <= img.width <= 100 and 48 <= img.height <= 80
    assert len(sizes) > 10  # varied sizes, like real ImageNet
    assert modes == {"RGB", "L", "CMYK"}  # a few non-RGB JPEGs, like real ImageNet
    assert sorted(p.name for p in out.iterdir()) == ["train", "train_list.txt"]  # no temporary files left

    verify = run(VERIFY, lst)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    assert "images  48" in verify.stdout.splitlines()


def test_make_synthetic_imagenet_is_deterministic(tmp_path: Path) -> None:
    synth_tree(tmp_path / "a", "--seed", 7)
    synth_tree(tmp_path / "b", "--seed", 7)
    first = tree_digests(tmp_path / "a")
    assert len(first) == 4 * 8 + 1
    assert first == tree_digests(tmp_path / "b")
    # a second run over the same directory rewrites identical bytes
    synth_tree(tmp_path / "a", "--seed", 7)
    assert tree_digests(tmp_path / "a") == first
    # another seed: same names and list, other pictures
    synth_tree(tmp_path / "c", "--seed", 8)
    other = tree_digests(tmp_path / "c")
    assert other.keys() == first.keys()
    assert other["train_list.txt"] == first["train_list.txt"]
    assert all(other[k] != first[k] for k in first if k.endswith(".JPEG"))


def test_make_synthetic_imagenet_generates_ids_past_the_real_wnids(tmp_path: Path) -> None:
    out = tmp_path / "many"
    synth_tree(out, "--classes", 52, "--images-per-class", 1, "--size", 16)
    classes = sorted(p.name for p in (out / "train").iterdir())
    assert classes[:2] == ["n01440764", "n01443537"]
    assert classes[49:] == ["n01697457", "n90000000", "n90000001"]
    assert (out / "train_list.txt").read_text().splitlines()[-1] == "train/n90000001/n90000001_1.JPEG 51"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--classes", "0"], "argument --classes: --classes must be between 1 and 1000, got 0"),
        (["--classes", "1001"], "argument --classes: --classes must be between 1 and 1000, got 1001"),
        (["--images-per-class", "x"], "argument --images-per-class: expected an integer, got 'x'"),
        (["--size", "80by64"], "argument --size: expected N or WxH (e.g. 96 or 80x64), got '80by64'"),
        (["--size", "8"], "argument --size: sides must be between 16 and 2048, got '8'"),
        (["--seed", "-1"], "argument --seed: --seed must be between 0 and 9223372036854775807, got -1"),
    ],
)
def test_make_synthetic_imagenet_bad_arguments(tmp_path: Path, args: list[str], message: str) -> None:
    proc = run(SYNTH, tmp_path / "out", *args)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [f"make_synthetic_imagenet.py: error: {message}"]
    assert not (tmp_path / "out").exists()


def test_make_synthetic_imagenet_refuses_foreign_files(tmp_path: Path) -> None:
    out = tmp_path / "synth"
    synth_tree(out, "--classes", 2, "--images-per-class", 2, "--size", 16)
    stray = out / "train" / "n01440764" / "n01440764_99.JPEG"
    stray.write_bytes(b"x")
    proc = run(SYNTH, out, "--classes", 2, "--images-per-class", 2, "--size", 16)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"make_synthetic_imagenet.py: error: {out / 'train' / 'n01440764'} holds 'n01440764_99.JPEG', "
        "which this run would not write; use a new or empty OUT_DIR"
    ]
    stray.unlink()
    # fewer classes than a previous run: the extra class directory would enter the list
    proc = run(SYNTH, out, "--classes", 1, "--images-per-class", 2, "--size", 16)
    assert proc.returncode == 2
    assert "holds 'n01443537', which this run would not write" in proc.stderr
    afile = tmp_path / "afile"
    afile.write_text("")
    proc = run(SYNTH, afile)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"make_synthetic_imagenet.py: error: {afile}: exists and is not a directory"
