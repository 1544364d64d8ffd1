"""scripts/harness/data.py (list, shard, order) and loader_cpu.py (the Pillow pipeline) on a real (synthetic) JPEG
tree made by data_prep/make_synthetic_imagenet.py."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
MAKE_SYNTH = REPO / "data_prep" / "make_synthetic_imagenet.py"
sys.path.insert(0, str(REPO / "scripts" / "harness"))  # the harness's modules import each other by name

import data  # noqa: E402
import loader_cpu  # noqa: E402

CLASSES, PER_CLASS = 4, 8
N = CLASSES * PER_CLASS
LOW = min((0.0 - m) / s for m, s in zip(data.IMAGENET_MEAN, data.IMAGENET_STD, strict=True))
HIGH = max((1.0 - m) / s for m, s in zip(data.IMAGENET_MEAN, data.IMAGENET_STD, strict=True))


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("synth") / "imagenet"
    args = ["--classes", str(CLASSES), "--images-per-class", str(PER_CLASS), "--size", "48"]
    proc = subprocess.run([sys.executable, MAKE_SYNTH, root, *args], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return root


@pytest.fixture
def synth_copy(synth: Path, tmp_path: Path) -> Path:
    """A private copy of the tree that a test may damage."""
    root = tmp_path / "imagenet"
    shutil.copytree(synth, root)
    return root


def loader(entries, **kw):
    kw.setdefault("batch_size", 8)
    kw.setdefault("image_size", 32)
    return loader_cpu.ImageListLoader(entries, **kw)


def take(entries, n, **kw):
    with loader(entries, **kw) as ld:
        return [next(ld) for _ in range(n)]


# -- load_list ---------------------------------------------------------------------------------


def test_load_list_resolves_paths_against_the_lists_directory(synth: Path) -> None:
    lst = synth / "train_list.txt"
    entries = data.load_list(lst)
    assert len(entries) == N
    assert entries.source == str(lst)
    assert entries[0] == (str(synth / "train" / "n01440764" / "n01440764_1.JPEG"), 0)
    assert sorted({label for _, label in entries}) == list(range(CLASSES))
    assert all(Path(p).is_file() for p, _ in entries)


def test_load_list_root_option(synth: Path, tmp_path: Path) -> None:
    moved = tmp_path / "lists" / "train_list.txt"
    moved.parent.mkdir()
    shutil.copy(synth / "train_list.txt", moved)
    with pytest.raises(data.DataError, match=rf"{moved}:1: image not found: .*\(and {N - 1} more missing images\)"):
        data.load_list(moved)
    assert data.load_list(moved, root=synth) == data.load_list(synth / "train_list.txt")


def test_load_list_errors_name_the_file_and_line(tmp_path: Path, synth: Path) -> None:
    absent = tmp_path / "absent.txt"
    with pytest.raises(data.DataError, match=rf"^{absent}: cannot read the image list: No such file"):
        data.load_list(absent)

    empty = tmp_path / "empty.txt"
    empty.write_text("")
    with pytest.raises(data.DataError, match=rf"^{empty}: empty list$"):
        data.load_list(empty)

    good = (synth / "train_list.txt").read_text().splitlines()
    bad = tmp_path / "bad.txt"
    bad.write_text(f"{good[0]}\n{good[1]}\ntrain/n01440764/x.JPEG\n")
    with pytest.raises(data.DataError) as err:
        data.load_list(bad, root=synth)
    assert str(err.value) == f"{bad}:3: expected '<path> <label>', got 'train/n01440764/x.JPEG'"

    bad.write_text(f"{good[0]}\ntrain/n01440764/x.JPEG -1\n")
    with pytest.raises(data.DataError, match=rf"^{bad}:2: label must be a non-negative integer, got '-1'$"):
        data.load_list(bad, root=synth)

    bad.write_text(f"{good[0]}\n\n{good[1]}\n")  # a blank line is malformed too
    with pytest.raises(data.DataError, match=rf"^{bad}:2: expected"):
        data.load_list(bad, root=synth)


def test_load_list_missing_image_names_path_and_line(synth_copy: Path) -> None:
    gone = synth_copy / "train" / "n01443537" / "n01443537_3.JPEG"
    gone.unlink()
    lst = synth_copy / "train_list.txt"
    lineno = lst.read_text().splitlines().index("train/n01443537/n01443537_3.JPEG 1") + 1
    with pytest.raises(data.DataError) as err:
        data.load_list(lst)
    assert str(err.value) == f"{lst}:{lineno}: image not found: {gone}"


def list_of(tmp_path: Path, lines: list[str], name: str = "list.txt") -> Path:
    lst = tmp_path / name
    lst.write_text("".join(f"{line}\n" for line in lines))
    return lst


@pytest.mark.parametrize(("label", "words"), [
    ("4", "label 4 is out of range: the run has 4 classes (labels 0 to 3)"),
    ("9223372036854775808", "label 9223372036854775808 does not fit in int64"),
    ("9" * 5000, "label 99999999999999999999... (5000 digits) does not fit in int64"),  # past int()'s 4300 digits
    ("-1", "label must be a non-negative integer, got '-1'"),
])
def test_load_list_refuses_labels_out_of_range_naming_list_and_line(synth: Path, label: str, words: str) -> None:
    good = (synth / "train_list.txt").read_text().splitlines()
    bad = list_of(synth, [good[0], f"train/n01440764/n01440764_2.JPEG {label}"], "labels.txt")
    with pytest.raises(data.DataError) as err:
        data.load_list(bad, num_classes=CLASSES)
    assert str(err.value) == f"{bad}:2: {words}"
    assert data.load_list(synth / "train_list.txt", num_classes=CLASSES)[-1][1] == CLASSES - 1  # the edge
    if label == "4":  # no class count: any int64 label is a label
        assert data.load_list(bad)[1][1] == 4


def test_load_list_refuses_paths_outside_the_data_root(synth_copy: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret.JPEG"
    shutil.copy(synth_copy / "train" / "n01440764" / "n01440764_1.JPEG", secret)
    (synth_copy / "train" / "link.JPEG").symlink_to(secret)  # a file inside that leads out
    (synth_copy / "train" / "out").symlink_to(tmp_path)  # a directory inside that leads out
    (synth_copy / "train" / "in.JPEG").symlink_to(synth_copy / "train" / "n01440764" / "n01440764_1.JPEG")
    real_root = synth_copy.resolve()
    first = (synth_copy / "train_list.txt").read_text().splitlines()[0]
    for path in (str(secret), "../secret.JPEG", "train/../../secret.JPEG", "train/link.JPEG", "train/out/secret.JPEG"):
        lst = list_of(synth_copy, [first, first, f"{path} 0"], "outside.txt")
        with pytest.raises(data.DataError) as err:
            data.load_list(lst)
        assert str(err.value) == (f"{lst}:3: {path} resolves to {secret.resolve()}, outside the data root "
                                  f"{real_root}; --allow-outside-root reads such paths"), path
        allowed = data.load_list(lst, allow_outside_root=True)
        assert allowed.outside == 1 and Path(allowed[2][0]).resolve() == secret.resolve()
    # a link that stays inside the root, and a root reached through a link, are inside
    inside = list_of(synth_copy, [first, "train/in.JPEG 0", "train/../train/n01440764/n01440764_2.JPEG 0"], "in.txt")
    assert data.load_list(inside).outside == 0
    via = tmp_path / "via"
    via.symlink_to(synth_copy)
    assert data.load_list(via / "train_list.txt").outside == 0
    # several outside: the first is named, the others counted
    lst = list_of(synth_copy, [first, "../secret.JPEG 0", f"{secret} 1"], "two.txt")
    with pytest.raises(data.DataError, match=r"two.txt:2: \.\./secret.JPEG resolves to .* \(and 1 more\); --allow"):
        data.load_list(lst)


# -- ImageListLoader -----------------------------------------------------------------------------


def test_batches_shapes_dtypes_ranges_and_infinite(synth: Path) -> None:
    entries = data.load_list(synth / "train_list.txt")
    with loader(entries) as ld:
        assert ld.steps_per_epoch == N // 8 and ld.num_classes == CLASSES
        batches = [next(ld) for _ in range(ld.steps_per_epoch + 2)]  # runs into the second epoch
    for images, labels in batches:
        assert images.shape == (8, 3, 32, 32) and images.dtype == np.float32
        assert labels.shape == (8,) and labels.dtype == np.int64
        assert np.isfinite(images).all()
        assert LOW - 1e-4 <= images.min() and images.max() <= HIGH + 1e-4
        assert ((labels >= 0) & (labels < CLASSES)).all()
    # one epoch covers exactly this rank's shard, labels included
    first_epoch = np.concatenate([labels for _, labels in batches[:4]])
    all_labels = np.array([label for _, label in entries])
    assert sorted(first_epoch) == sorted(all_labels)
    # the images are real pictures, not constants
    assert batches[0][0].std() > 0.1


def test_channels_last_is_the_same_data_transposed(synth: Path) -> None:
    entries = data.load_list(synth / "train_list.txt")
    (nchw, labels), *_ = take(entries, 1)
    (nhwc, labels_cl), *_ = take(entries, 1, channels_last=True)
    assert nhwc.shape == (8, 32, 32, 3)
    np.testing.assert_array_equal(nhwc, nchw.transpose(0, 2, 3, 1))
    np.testing.assert_array_equal(labels, labels_cl)


def test_same_seed_same_batches_regardless_of_workers(synth: Path) -> None:
    entries = data.load_list(synth / "train_list.txt")
    a = take(entries, 6, seed=3, workers=2)
    b = take(entries, 6, seed=3, workers=4, prefetch=1)
    c = take(entries, 6, seed=3, workers=0)
    for (xa, ya), (xb, yb), (xc, yc) in zip(a, b, c, strict=True):
        np.testing.assert_array_equal(xa, xb)
        np.testing.assert_array_equal(xa, xc)
        np.testing.assert_array_equal(ya, yb)
        np.testing.assert_array_equal(ya, yc)
    d = take(entries, 1, seed=4)
    assert not np.array_equal(a[0][0], d[0][0])


def test_epochs_are_reshuffled(synth: Path) -> None:
    entries = data.load_list(synth / "train_list.txt")
    with loader(entries) as ld:
        e0, e1 = ld.epoch_indices(0), ld.epoch_indices(1)
    assert sorted(e0) == sorted(e1) == list(range(N))
    assert not np.array_equal(e0, e1)


def test_world_size_2_shards_are_disjoint_and_equal_length(synth: Path) -> None:
    entries = data.load_list(synth / "train_list.txt")[:-1]  # 31 entries: shards of 15, one left out
    labels = np.array([label for _, label in entries])
    shards = []
    for rank in (0, 1):
        with loader(entries, batch_size=5, rank=rank, world_size=2) as ld:
            assert ld.shard_size == 15 and ld.steps_per_epoch == 3
            for epoch in (0, 1):
                idx = ld.epoch_indices(epoch)
                got = np.concatenate([next(ld)[1] for _ in range(ld.steps_per_epoch)])
                np.testing.assert_array_equal(got, labels[idx])  # batches follow epoch_indices
            shards.append(ld.epoch_indices(0))
    assert len(shards[0]) == len(shards[1]) == 15
    assert not set(shards[0]) & set(shards[1])
    assert len(set(shards[0]) | set(shards[1])) == 30


def test_loader_argument_errors(synth: Path) -> None:
    entries = data.load_list(synth / "train_list.txt")
    with pytest.raises(data.DataError, match=r"train_list.txt: 32 images over 4 rank\(s\) give 8 per rank, fewer than"):
        loader(entries, batch_size=9, rank=1, world_size=4)
    with pytest.raises(ValueError, match="rank must be in"):
        loader(entries, rank=2, world_size=2)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1"):
        loader(entries, batch_size=0)


def test_corrupt_jpeg_raises_naming_file_and_line(synth_copy: Path) -> None:
    lst = synth_copy / "train_list.txt"
    lines = lst.read_text().splitlines()
    bad_rel = "train/n01484850/n01484850_5.JPEG"
    (synth_copy / bad_rel).write_bytes(b"this is not a JPEG at all" * 10)
    lineno = lines.index(f"{bad_rel} 2") + 1
    entries = data.load_list(lst)  # the file exists, so the list loads
    with loader(entries) as ld, pytest.raises(data.DataError) as err:
        for _ in range(ld.steps_per_epoch):  # the bad image is in one of the epoch's batches
            next(ld)
    msg = str(err.value)
    assert msg.startswith(f"cannot read image {synth_copy / bad_rel} (list {lst}:{lineno}): ")


def test_truncated_jpeg_is_an_error_not_a_skip(synth_copy: Path) -> None:
    path = synth_copy / "train" / "n01440764" / "n01440764_2.JPEG"
    path.write_bytes(path.read_bytes()[:400])
    entries = data.load_list(synth_copy / "train_list.txt")
    with loader(entries, workers=0) as ld, pytest.raises(data.DataError, match=r"n01440764_2\.JPEG \(list .*:2\)"):
        for _ in range(ld.steps_per_epoch):
            next(ld)


def test_close_stops_threads_and_further_use(synth: Path) -> None:
    entries = data.load_list(synth / "train_list.txt")
    ld = loader(entries, workers=3)
    next(ld)
    assert any(t.name.startswith("kit-data") for t in threading.enumerate())
    ld.close()
    ld.close()  # idempotent
    assert not any(t.name.startswith("kit-data") for t in threading.enumerate())
    with pytest.raises(RuntimeError, match="closed"):
        next(ld)


def test_crop_boxes_stay_inside_and_fall_back_to_centre() -> None:
    rng = np.random.default_rng(0)
    for width, height in [(48, 36), (500, 375), (37, 61)]:
        boxes = data.crop_boxes(np.full(200, width), np.full(200, height), rng.random((200, data.CROP_DRAWS)))
        for left, top, right, bottom in boxes:
            assert 0 <= left < right <= width and 0 <= top < bottom <= height
    # a strip too thin for any 3/4..4/3 crop of >= 8% area: centre crop at the nearest ratio
    box = data.crop_boxes(np.array([1000]), np.array([10]), rng.random((1, data.CROP_DRAWS)))[0]
    assert tuple(int(v) for v in box) == (493, 0, 506, 10)


def test_augmentation_is_a_function_of_seed_epoch_index_and_size() -> None:
    first = data.augmentation(3, 1, 17, 500, 375)
    assert first == data.augmentation(3, 1, 17, 500, 375)
    (left, top, right, bottom), flip = first
    assert 0 <= left < right <= 500 and 0 <= top < bottom <= 375 and isinstance(flip, bool)
    others = {data.augmentation(3, 1, i, 500, 375) for i in range(40)}
    assert len(others) == 40 and {f for _, f in others} == {True, False}
    assert data.augmentation(3, 2, 17, 500, 375) != first and data.augmentation(4, 1, 17, 500, 375) != first
