"""data_prep/convert.py and data_prep/verify.py, run as the user runs them; every format read back.

The readers here are written from the formats' specifications (TFRecord framing + protobuf wire format,
dmlc RecordIO framing + MXNet's IRHeader, PaddleClas' list, an ImageFolder tree) and import nothing from
data_prep/: each image's bytes and label are compared with the source file. With KIT_TF_PYTHON /
KIT_MXNET_PYTHON naming interpreters that have tensorflow-cpu / mxnet, the frameworks' own readers
(TFRecordDataset + parse_single_example; MXIndexedRecordIO + ImageRecordIter) read the same files too.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import google_crc32c
import pytest

REPO = Path(__file__).resolve().parents[1]
CONVERT = REPO / "data_prep" / "convert.py"
VERIFY = REPO / "data_prep" / "verify.py"
SYNTH = REPO / "data_prep" / "make_synthetic_imagenet.py"
FORMATS = ("paddle", "folder", "tfrecord", "recordio")
OFFSET = {"paddle": 0, "folder": 0, "tfrecord": 1, "recordio": 0}
RIO_MAGIC = b"\x0a\x23\xd7\xce"  # 0xced7230a, little-endian


def run(*args: object, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=timeout)


def convert(src: Path, out: Path, fmt: str, *extra: object) -> subprocess.CompletedProcess:
    proc = run(CONVERT, src, out, "--to", fmt, *extra)
    assert proc.returncode == 0, proc.stderr
    return proc


def with_comment(jpeg: bytes, payload: bytes) -> bytes:
    """JPEG bytes with a COM segment right after SOI (still a valid JPEG)."""
    return jpeg[:2] + b"\xff\xfe" + struct.pack(">H", len(payload) + 2) + payload + jpeg[2:]


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 classes x 5 synthetic JPEGs (RGB, greyscale, CMYK), plus a PNG named .JPEG (as one ImageNet file is)
    and a JPEG whose bytes hold RecordIO's magic word at an aligned offset (dmlc splits that record)."""
    from PIL import Image as PILImage

    root = tmp_path_factory.mktemp("src")
    made = run(SYNTH, root, "--classes", 3, "--images-per-class", 5, "--size", 40)
    assert made.returncode == 0, made.stderr
    train = root / "train"
    (train / "n01440764" / "n01440764_1.JPEG").unlink()
    buf = io.BytesIO()
    PILImage.new("RGB", (20, 16), (10, 200, 30)).save(buf, format="PNG")
    (train / "n01443537" / "n01443537_9.JPEG").write_bytes(buf.getvalue())
    base = (train / "n01484850" / "n01484850_2.JPEG").read_bytes()
    # record data = 24-byte IRHeader + image: the magic lands at image offset 8 (aligned) after a 4-byte COM head
    magic_jpeg = with_comment(base, b"ab" + RIO_MAGIC + b"cdef" + RIO_MAGIC)
    assert magic_jpeg.index(RIO_MAGIC) % 4 == 0
    (train / "n01484850" / "n01484850_9.JPEG").write_bytes(magic_jpeg)
    (root / "train_list.txt").unlink()
    return train


def source_images(train: Path) -> dict[str, tuple[int, bytes]]:
    """'wnid/file' -> (sorted class index, bytes) for every image of the source tree."""
    classes = sorted(p.name for p in train.iterdir() if p.is_dir())
    return {f"{w}/{f.name}": (i, f.read_bytes()) for i, w in enumerate(classes) for f in sorted((train / w).iterdir())}


# --- independent readers, from the formats' specifications ------------------------------------------------

def masked_crc(data: bytes) -> int:
    crc = google_crc32c.value(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def tfrecord_records(path: Path) -> list[bytes]:
    data, pos, out = path.read_bytes(), 0, []
    while pos < len(data):
        (length,) = struct.unpack_from("<Q", data, pos)
        assert struct.unpack_from("<I", data, pos + 8)[0] == masked_crc(data[pos:pos + 8])
        record = data[pos + 12:pos + 12 + length]
        assert len(record) == length
        assert struct.unpack_from("<I", data, pos + 12 + length)[0] == masked_crc(record)
        out.append(record)
        pos += 16 + length
    assert pos == len(data)
    return out


def varint(buf: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def fields(buf: bytes) -> list[tuple[int, int, object]]:
    """Protobuf wire format: (field number, wire type, value) of each field."""
    out, pos = [], 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 2:
            size, pos = varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out.append((number, wire, value))
    return out


def parse_example(record: bytes) -> dict[str, tuple[str, list]]:
    """tf.train.Example (example.proto / feature.proto) -> {key: (kind, values)}."""
    (number, _, features), = fields(record)
    assert number == 1
    result = {}
    for number, _, entry in fields(features):  # Features.feature: map<string, Feature> entries
        assert number == 1
        parts = {n: v for n, _, v in fields(entry)}
        key, feature = parts[1].decode(), parts[2]
        (kind, _, lst), = fields(feature)
        values = []
        for n, wire, v in fields(lst):
            assert n == 1
            if kind == 1:
                values.append(v)
            elif kind == 2:  # packed floats
                values += list(struct.unpack(f"<{len(v) // 4}f", v)) if wire == 2 else [struct.unpack("<f", v)[0]]
            else:  # packed int64 varints
                if wire == 2:
                    p = 0
                    while p < len(v):
                        x, p = varint(v, p)
                        values.append(x)
                else:
                    values.append(v)
        result[key] = ({1: "bytes", 2: "float", 3: "int64"}[kind], values)
    return result


def recordio_records(path: Path) -> list[tuple[int, bytes]]:
    """(offset, data) per record; split parts (cflag 1, 2.., 3) joined with the magic word between them."""
    data, pos, out = path.read_bytes(), 0, []
    while pos < len(data):
        start, parts = pos, []
        while True:
            assert data[pos:pos + 4] == RIO_MAGIC, f"no magic at {pos}"
            (lrec,) = struct.unpack_from("<I", data, pos + 4)
            cflag, length = lrec >> 29, lrec & ((1 << 29) - 1)
            parts.append(data[pos + 8:pos + 8 + length])
            pos += 8 + length
            if cflag in (0, 3):
                pos += -length % 4
                assert cflag == 0 or len(parts) > 1
                break
            assert cflag == (1 if len(parts) == 1 else 2)
        out.append((start, RIO_MAGIC.join(parts)))
    return out


def read_back(out: Path, fmt: str) -> dict[str, tuple[int, bytes]]:
    """'wnid/file' -> (stored label, image bytes), read from OUT with the readers above."""
    got: dict[str, tuple[int, bytes]] = {}
    if fmt == "paddle":
        for line in (out / "train_list.txt").read_text().splitlines():
            path, label = line.split(" ")
            assert path.startswith("train/")
            got[path.removeprefix("train/")] = (int(label), (out / path).read_bytes())
    elif fmt == "folder":  # torchvision ImageFolder: sorted folder names are the labels
        classes = sorted(p.name for p in (out / "train").iterdir() if p.is_dir())
        for label, wnid in enumerate(classes):
            for f in sorted((out / "train" / wnid).iterdir()):
                got[f"{wnid}/{f.name}"] = (label, f.read_bytes())
    elif fmt == "tfrecord":
        for shard in sorted(out.glob("train-*")):  # DLE TF: sorted(glob(data_dir/train-*))
            for record in tfrecord_records(shard):
                ex = parse_example(record)
                assert ex["image/object/bbox/xmin"] == ("float", []) and ex["image/class/text"][0] == "bytes"
                wnid = ex["image/class/synset"][1][0].decode()
                key = f"{wnid}/{ex['image/filename'][1][0].decode()}"
                assert key not in got
                got[key] = (ex["image/class/label"][1][0], ex["image/encoded"][1][0])
    else:
        records = recordio_records(out / "train.rec")
        idx = [tuple(map(int, line.split("\t"))) for line in (out / "train.idx").read_text().splitlines()]
        lst = {int(a): c for a, _b, c in (line.split("\t") for line in (out / "train.lst").read_text().splitlines())}
        assert [i for i, _ in idx] and [off for _, off in idx] == [off for off, _ in records]
        for (image_id, _), (_, data) in zip(idx, records, strict=True):
            flag, label, rid, id2 = struct.unpack_from("<IfQQ", data)
            assert (flag, rid, id2) == (0, image_id, 0) and label == int(label)
            got[lst[image_id]] = (int(label), data[24:])
    return got


# --- tests -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_every_image_reads_back_with_its_bytes_and_label(source, tmp_path, fmt):
    out = tmp_path / fmt
    proc = convert(source, out, fmt)
    want = source_images(source)
    got = read_back(out, fmt)
    assert got.keys() == want.keys() and len(got) == 16
    for key, (index, data) in want.items():
        assert got[key] == (index + OFFSET[fmt], data), key
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == fmt and manifest["images"] == 16 and manifest["label_offset"] == OFFSET[fmt]
    assert [(c["wnid"], c["label"], c["images"]) for c in manifest["classes"]] == [
        ("n01440764", OFFSET[fmt], 4), ("n01443537", 1 + OFFSET[fmt], 6), ("n01484850", 2 + OFFSET[fmt], 6)]
    for entry in manifest["files"]:
        data = (out / entry["path"]).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["bytes"], entry["sha256"])
    listed = {e["path"] for e in manifest["files"]} | {"manifest.json"}
    assert {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()} == listed  # nothing else, no temp
    assert [p.name for p in tmp_path.iterdir()] == [fmt], "a temporary directory was left beside OUT"
    assert f"manifest sha256 {hashlib.sha256((out / 'manifest.json').read_bytes()).hexdigest()}" in proc.stdout
    verify = run(VERIFY, out, "--format", fmt, "--json")
    assert verify.returncode == 0, verify.stdout + verify.stderr
    result = json.loads(verify.stdout)
    assert result["ok"] and result["problems"] == [] and result["images"] == 16
    assert result["notes"] == {
        "folder": ["no val/: DLE PyTorch's main.py opens <data>/val even with --training-only"],
        "recordio": ["no val.rec: DLE MXNet's runner passes --data-val <data-root>/val.rec, which train.py opens even "
                     "with --mode train"]}.get(fmt, [])
    if fmt in ("folder", "recordio"):
        assert "warning: no val/ tree (--val DIR)" in proc.stdout


def test_image_trees_are_hard_links_and_the_list_is_make_train_lists(source, tmp_path):
    convert(source, tmp_path / "paddle", "paddle")
    listed = subprocess.run([sys.executable, str(REPO / "data_prep" / "make_train_list.py"),
                             str(tmp_path / "paddle" / "train"), "--out", str(tmp_path / "list.txt")],
                            capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert (tmp_path / "paddle" / "train_list.txt").read_bytes() == (tmp_path / "list.txt").read_bytes()
    for f in (tmp_path / "paddle" / "train").rglob("*.JPEG"):
        assert f.stat().st_ino == (source / f.relative_to(tmp_path / "paddle" / "train")).stat().st_ino


def test_images_are_copied_where_links_are_impossible(source, tmp_path):
    import tempfile

    shm = Path("/dev/shm")
    assert shm.is_dir() and shm.stat().st_dev != source.stat().st_dev, "need a second file system (/dev/shm)"
    other = Path(tempfile.mkdtemp(dir=shm, prefix="kit-convert-"))
    try:
        proc = convert(source, other / "folder", "folder", "--val", "none")
        assert "images linked 0, copied 16" in proc.stdout
        got = read_back(other / "folder", "folder")
        assert {k: v[1] for k, v in got.items()} == {k: v[1] for k, v in source_images(source).items()}
        for f in (other / "folder" / "train").rglob("*.JPEG"):
            assert f.stat().st_mtime_ns == (source / f.relative_to(other / "folder" / "train")).stat().st_mtime_ns
        assert not [p for p in (other / "folder").rglob(".*")], "temporary files left"
        assert run(VERIFY, other / "folder", "--format", "folder").returncode == 0
    finally:
        shutil.rmtree(other)


def tree_with_val(source: Path, tmp_path: Path) -> Path:
    """An ImageNet-like root: SOURCE as train/, and a val/ of one image in each of train's classes."""
    root = tmp_path / "ILSVRC2012"
    shutil.copytree(source, root / "train")
    for wnid in ("n01440764", "n01443537", "n01484850"):
        (root / "val" / wnid).mkdir(parents=True)
        shutil.copy(source / "n01484850" / "n01484850_2.JPEG", root / "val" / wnid / f"ILSVRC2012_val_{wnid}.JPEG")
    return root


def test_folder_links_the_val_tree_beside_train_for_dle_pytorch(source, tmp_path):
    root = tree_with_val(source, tmp_path)
    proc = convert(root / "train", tmp_path / "folder", "folder")  # the val/ beside train/ is found
    assert "val: 3 images in 3 classes" in proc.stdout
    out = tmp_path / "folder"
    assert sorted(p.name for p in (out / "val").iterdir()) == ["n01440764", "n01443537", "n01484850"]
    assert (out / "val" / "n01443537" / "ILSVRC2012_val_n01443537.JPEG").stat().st_ino == \
        (root / "val" / "n01443537" / "ILSVRC2012_val_n01443537.JPEG").stat().st_ino
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["val"] == {"images": 3, "classes": 3} and manifest["images"] == 16
    result = json.loads(run(VERIFY, out, "--format", "folder", "--json").stdout)
    assert result["ok"] and result["notes"] == []
    (out / "val" / "n01443537" / "ILSVRC2012_val_n01443537.JPEG").unlink()
    verify_fails(out, "folder", "val: 2 images, the manifest says 3", "1 file(s) missing")

    convert(root / "train", tmp_path / "noval", "folder", "--val", "none")
    assert not (tmp_path / "noval" / "val").exists()
    shutil.rmtree(root / "val" / "n01484850")  # val must have train's classes, or ImageFolder's labels differ
    assert_refused(run(CONVERT, root, tmp_path / "bad", "--to", "folder"), f"{root / 'val'}: its class folders "
                   "are not the train tree's (missing: n01484850)")
    assert_refused(run(CONVERT, root, tmp_path / "bad", "--to", "tfrecord", "--val", root / "val"),
                   "--val is for the folder and recordio formats")


def test_recordio_writes_val_records_from_the_val_tree_for_dle_mxnet(source, tmp_path):
    """DLE MXNet's runner always passes --data-val <data-root>/val.rec and val.idx: the val/ beside train/ is
    written as they are, as im2rec makes the train records (ids shuffled with seed 100, train's labels)."""
    root = tree_with_val(source, tmp_path)
    proc = convert(root / "train", tmp_path / "rio", "recordio")  # the val/ beside train/ is found
    assert "val: 3 images in 3 classes" in proc.stdout
    out = tmp_path / "rio"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["val"] == {"images": 3, "classes": 3} and manifest["images"] == 16
    assert {"val.rec", "val.idx", "val.lst"} <= {f["path"] for f in manifest["files"]}
    val = {}
    lst = {int(i): p for i, _, p in (line.split("\t") for line in (out / "val.lst").read_text().splitlines())}
    idx = [tuple(map(int, line.split("\t"))) for line in (out / "val.idx").read_text().splitlines()]
    records = recordio_records(out / "val.rec")
    assert [off for _, off in idx] == [off for off, _ in records]
    for (image_id, _), (_, data) in zip(idx, records, strict=True):
        _, label, rid, _ = struct.unpack_from("<IfQQ", data)
        assert rid == image_id
        val[lst[image_id]] = (int(label), data[24:])
    want = (source / "n01484850" / "n01484850_2.JPEG").read_bytes()
    assert val == {f"{w}/ILSVRC2012_val_{w}.JPEG": (i, want) for i, w in
                   enumerate(("n01440764", "n01443537", "n01484850"))}
    result = json.loads(run(VERIFY, out, "--format", "recordio", "--json").stdout)
    assert result["ok"] and result["notes"] == []
    (out / "val.rec").unlink()
    verify_fails(out, "recordio", "1 file(s) missing")
    convert(root / "train", tmp_path / "noval", "recordio", "--val", "none")
    assert not (tmp_path / "noval" / "val.rec").exists()


def test_fleetx_list_and_images_as_fleetx_reads_them(source, tmp_path):
    """fleetx: OUT/train.txt with `<wnid>/<file> <label>` relative to OUT/train, every "JPEG" written "jpeg" in
    the list and the file names alike (FleetX rewrites the listed path so); the images hard links."""
    out = tmp_path / "fleetx"
    proc = convert(source, out, "fleetx")
    assert "images linked 16, copied 0" in proc.stdout
    lines = (out / "train.txt").read_text().splitlines()
    want = source_images(source)
    renamed = {k.replace("JPEG", "jpeg"): k for k in want}
    got = {}
    for line in lines:
        path, label = line.split(" ")
        assert not path.startswith("train/") and "JPEG" not in path and path.endswith(".jpeg"), line
        got[path] = (int(label), (out / "train" / path).read_bytes())
        assert (out / "train" / path).stat().st_ino == (source / renamed[path]).stat().st_ino
    assert got == {k: want[v] for k, v in renamed.items()} and len(lines) == 16
    assert lines == sorted(lines, key=lambda ln: (int(ln.split()[1]), ln))  # class order, as the paddle list
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["format"] == "fleetx" and manifest["label_offset"] == 0 and manifest["images"] == 16
    assert {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()} == \
        {f["path"] for f in manifest["files"]} | {"manifest.json"}
    result = json.loads(run(VERIFY, out, "--format", "fleetx", "--json").stdout)
    assert result["ok"] and result["problems"] == [], result
    (out / "train" / lines[0].split()[0]).unlink()
    verify_fails(out, "fleetx", "1 listed file(s) missing")

    clash = tmp_path / "clash"
    shutil.copytree(source, clash)
    shutil.copy(clash / "n01440764" / "n01440764_2.JPEG", clash / "n01440764" / "n01440764_2.jpeg")
    assert_refused(run(CONVERT, clash, tmp_path / "bad", "--to", "fleetx"), "FleetX reads it as "
                   "n01440764/n01440764_2.jpeg")


def test_labels_agree_across_formats(source, tmp_path):
    by_format = {}
    for fmt in FORMATS:
        convert(source, tmp_path / fmt, fmt)
        by_format[fmt] = {key.split("/")[0]: label - OFFSET[fmt] for key, (label, _) in
                          read_back(tmp_path / fmt, fmt).items()}
    assert all(m == by_format["folder"] for m in by_format.values())
    assert by_format["folder"] == {"n01440764": 0, "n01443537": 1, "n01484850": 2}


def test_tfrecord_shards_are_named_and_sized_as_dle_counts_them(source, tmp_path):
    out = tmp_path / "tf"
    convert(source, out, "tfrecord", "--shards", 3)
    shards = sorted(p.name for p in out.glob("train-*"))
    assert shards == [f"train-{i:05d}-of-00003" for i in range(3)]
    counts = [len(tfrecord_records(out / s)) for s in shards]
    assert counts == [6, 6, 4]
    assert counts[0] * (len(counts) - 1) + counts[-1] == 16  # DLE's list_filenames_in_dataset formula
    labels = [parse_example(r)["image/class/label"][1][0] for r in tfrecord_records(out / shards[0])]
    assert labels != sorted(labels) or len(set(labels)) > 1  # shuffled, as build_imagenet_data.py does
    convert(source, tmp_path / "tf7", "tfrecord", "--shards", 7)  # 16 in 7 -> 3 per shard: 3*5 + 1
    shards = sorted((tmp_path / "tf7").glob("train-*"))
    assert shards[-1].name == "train-00005-of-00006"
    assert [len(tfrecord_records(s)) for s in shards] == [3, 3, 3, 3, 3, 1]


def test_tfrecord_example_fields(source, tmp_path):
    words = tmp_path / "LOC_synset_mapping.txt"
    words.write_text("n01440764 tench, Tinca tinca\nn01443537 goldfish, Carassius auratus\n")
    convert(source, tmp_path / "tf", "tfrecord", "--synset-words", words)
    examples = [parse_example(r) for s in sorted((tmp_path / "tf").glob("train-*")) for r in tfrecord_records(s)]
    by_name = {e["image/filename"][1][0].decode(): e for e in examples}
    tench = by_name["n01440764_2.JPEG"]
    assert tench["image/class/text"] == ("bytes", [b"tench, Tinca tinca"])
    assert tench["image/class/synset"] == ("bytes", [b"n01440764"]) and tench["image/format"] == ("bytes", [b"JPEG"])
    assert by_name["n01484850_3.JPEG"]["image/class/text"] == ("bytes", [b"n01484850"])  # not in the file: wnid
    png = by_name["n01443537_9.JPEG"]
    assert png["image/format"] == ("bytes", [b"PNG"]) and (png["image/width"][1], png["image/height"][1]) == ([20], [16])
    assert {e["image/colorspace"][1][0] for e in examples} == {b"RGB", b"Grayscale", b"CMYK"}
    for key in ("xmin", "ymin", "xmax", "ymax"):
        assert tench[f"image/object/bbox/{key}"] == ("float", [])


def test_recordio_splits_a_record_holding_the_magic_word(source, tmp_path):
    convert(source, tmp_path / "rio", "recordio")
    raw = (tmp_path / "rio" / "train.rec").read_bytes()
    flags = []
    pos = 0
    while pos < len(raw):
        (lrec,) = struct.unpack_from("<I", raw, pos + 4)
        flags.append(lrec >> 29)
        pos += 8 + (lrec & ((1 << 29) - 1))
        pos += -pos % 4 if lrec >> 29 in (0, 3) else 0
    assert flags.count(1) == 1 and flags.count(2) == 1 and flags.count(3) == 1  # the magic appears twice
    assert read_back(tmp_path / "rio", "recordio")["n01484850/n01484850_9.JPEG"][1] == \
        (source / "n01484850" / "n01484850_9.JPEG").read_bytes()


def test_rerun_is_byte_identical_and_keeps_mtimes(source, tmp_path):
    for fmt in FORMATS:
        convert(source, tmp_path / f"a-{fmt}", fmt)
        first = {p.relative_to(tmp_path / f"a-{fmt}"): (p.read_bytes(), p.stat().st_mtime_ns)
                 for p in (tmp_path / f"a-{fmt}").rglob("*") if p.is_file()}
        convert(source, tmp_path / f"a-{fmt}", fmt)  # over its own earlier output
        again = {p.relative_to(tmp_path / f"a-{fmt}"): (p.read_bytes(), p.stat().st_mtime_ns)
                 for p in (tmp_path / f"a-{fmt}").rglob("*") if p.is_file()}
        assert again == first, fmt
        convert(source, tmp_path / f"b-{fmt}", fmt)
        other = {p.relative_to(tmp_path / f"b-{fmt}"): p.read_bytes() for p in (tmp_path / f"b-{fmt}").rglob("*")
                 if p.is_file()}
        assert other == {k: v for k, (v, _) in first.items()}, fmt


def test_convert_from_a_train_list_keeps_its_labels(source, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(source, root / "train")
    lst = root / "train_list.txt"
    lst.write_text("train/n01443537/n01443537_2.JPEG 1\ntrain/n01484850/n01484850_3.JPEG 2\n"
                   "train/n01443537/n01443537_9.JPEG 1\n")
    convert(lst, tmp_path / "rio", "recordio")
    got = read_back(tmp_path / "rio", "recordio")
    assert {k: v[0] for k, v in got.items()} == {"n01443537/n01443537_2.JPEG": 1, "n01443537/n01443537_9.JPEG": 1,
                                                 "n01484850/n01484850_3.JPEG": 2}


# --- bad input: a clear error naming the file, nothing left behind ---------------------------------------

def assert_refused(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("convert.py: error: "), proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


def nothing_beside(parent: Path, *keep: str) -> None:
    assert sorted(p.name for p in parent.iterdir()) == sorted(keep), "something half-written was left behind"


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty"])
def test_corrupt_jpeg_is_named_and_nothing_is_written(source, tmp_path, fmt, damage):
    src = tmp_path / "src"
    shutil.copytree(source, src)
    bad = src / "n01484850" / "n01484850_5.JPEG"  # late in the run: other images were already written
    data = bad.read_bytes()
    bad.write_bytes({"truncated": data[: len(data) // 2], "garbage": b"<html>not found</html>", "empty": b""}[damage])
    out_parent = tmp_path / "out"
    out_parent.mkdir()
    proc = run(CONVERT, src, out_parent / fmt, "--to", fmt)
    assert_refused(proc, str(bad), {"truncated": "truncated", "garbage": "not a JPEG", "empty": "empty file"}[damage])
    nothing_beside(out_parent)


def test_failed_rerun_keeps_the_earlier_output(source, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(source, src)
    out = tmp_path / "out" / "tfrecord"
    out.parent.mkdir()
    convert(src, out, "tfrecord")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    bad = src / "n01440764" / "n01440764_3.JPEG"
    bad.write_bytes(bad.read_bytes()[:-40])
    assert_refused(run(CONVERT, src, out, "--to", "tfrecord"), str(bad))
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    nothing_beside(out.parent, "tfrecord")
    assert run(VERIFY, out, "--format", "tfrecord").returncode == 0


def test_empty_class_folder_is_named(source, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(source, src)
    (src / "n01530575").mkdir()
    (src / "n01530575" / "notes.txt").write_text("no images here")
    assert_refused(run(CONVERT, src, tmp_path / "out", "--to", "folder"), f"{src / 'n01530575'}: class folder "
                                                                           "without images")
    nothing_beside(tmp_path, "src")


def test_list_naming_a_missing_file_is_named(source, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(source, root / "train")
    lst = root / "train_list.txt"
    lst.write_text("train/n01443537/n01443537_2.JPEG 1\ntrain/n01443537/gone.JPEG 1\n")
    assert_refused(run(CONVERT, lst, tmp_path / "out", "--to", "paddle"),
                   f"{lst}:2: names {root / 'train/n01443537/gone.JPEG'}, which does not exist")
    nothing_beside(tmp_path, "data")


def test_output_that_is_not_ours_is_refused(source, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    assert_refused(run(CONVERT, source, out, "--to", "folder"), f"{out}: not empty and not a convert.py output")
    assert (out / "precious.txt").read_text() == "keep me"
    assert_refused(run(CONVERT, source.parent, source / "n01440764" / "x", "--to", "folder"), "must not contain")


# --- verify.py on damaged outputs ----------------------------------------------------------------------

def verify_fails(out: Path, fmt: str, *needles: str) -> dict:
    proc = run(VERIFY, out, "--format", fmt, "--json")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    text = "\n".join(result["problems"])
    for needle in needles:
        assert needle in text, text
    return result


def test_verify_names_a_truncated_shard(source, tmp_path):
    out = tmp_path / "tf"
    convert(source, out, "tfrecord", "--shards", 3)
    shard = out / "train-00001-of-00003"
    shard.write_bytes(shard.read_bytes()[:-100])
    verify_fails(out, "tfrecord", f"{shard}: truncated", "train-00001-of-00003: ")


def test_verify_names_a_truncated_rec_and_a_stale_shard(source, tmp_path):
    out = tmp_path / "rio"
    convert(source, out, "recordio")
    rec = out / "train.rec"
    rec.write_bytes(rec.read_bytes()[:-7])
    verify_fails(out, "recordio", f"{rec}: truncated")
    tf = tmp_path / "tf"
    convert(source, tf, "tfrecord", "--shards", 2)
    (tf / "train-00009-of-00010").write_bytes(b"")  # an older run's shard: DLE would read it too
    (tf / "README").write_text("notes")  # not read by the program: reported, not a problem
    result = verify_fails(tf, "tfrecord", "train-00009-of-00010")
    assert result["extra"] == ["README", "train-00009-of-00010"] and len(result["problems"]) == 1


def test_verify_folder_and_paddle_find_missing_and_changed_images(source, tmp_path):
    convert(source, tmp_path / "folder", "folder")
    gone = tmp_path / "folder" / "train" / "n01443537" / "n01443537_3.JPEG"
    gone.unlink()
    verify_fails(tmp_path / "folder", "folder", "1 file(s) missing", "n01443537: 5 read, manifest 6")
    paddle = tmp_path / "paddle"
    convert(source, paddle, "paddle")
    changed = paddle / "train" / "n01440764" / "n01440764_2.JPEG"
    data = changed.read_bytes()
    changed.unlink()  # a hard link: write a new file rather than the source's
    changed.write_bytes(data[:-1] + b"\x00")
    verify_fails(paddle, "paddle", "train/n01440764/n01440764_2.JPEG: sha256 differs")


def test_verify_without_a_manifest_is_a_clear_error(tmp_path):
    proc = run(VERIFY, tmp_path, "--format", "folder")
    assert proc.returncode == 2 and f"{tmp_path / 'manifest.json'}: cannot read" in proc.stderr


# --- the frameworks' own readers, where an interpreter with them is given ---------------------------------

TF_READER = textwrap.dedent("""
    import json, os, sys
    import tensorflow as tf
    out = sys.argv[1]
    fm = {"image/encoded": tf.io.FixedLenFeature([], tf.string, ""),
          "image/class/label": tf.io.FixedLenFeature([], tf.int64, -1),
          "image/class/text": tf.io.FixedLenFeature([], tf.string, ""),
          "image/filename": tf.io.FixedLenFeature([], tf.string, ""),
          "image/class/synset": tf.io.FixedLenFeature([], tf.string, "")}
    for k in ("xmin", "ymin", "xmax", "ymax"):
        fm["image/object/bbox/" + k] = tf.io.VarLenFeature(tf.float32)
    files = sorted(tf.io.gfile.glob(os.path.join(out, "train-*")))
    got = {}
    for rec in tf.data.TFRecordDataset(files):
        ex = tf.io.parse_single_example(rec, fm)
        tf.image.decode_image(ex["image/encoded"], channels=3)
        key = ex["image/class/synset"].numpy().decode() + "/" + ex["image/filename"].numpy().decode()
        got[key] = [int(ex["image/class/label"]), ex["image/encoded"].numpy().hex()]
    print(json.dumps(got))
""")

MX_READER = textwrap.dedent("""
    import json, os, sys
    import mxnet as mx
    out = sys.argv[1]
    lst = {int(l.split("\\t")[0]): l.rstrip("\\n").split("\\t")[2] for l in open(os.path.join(out, "train.lst"))}
    r = mx.recordio.MXIndexedRecordIO(os.path.join(out, "train.idx"), os.path.join(out, "train.rec"), "r")
    got = {}
    for key in r.keys:
        h, img = mx.recordio.unpack(r.read_idx(key))
        assert h.id == key
        got[lst[key]] = [h.label, img.hex()]
    it = mx.io.ImageRecordIter(path_imgrec=os.path.join(out, "train.rec"), data_shape=(3, 16, 16), batch_size=5,
                               resize=16)
    assert sum(b.data[0].shape[0] - b.pad for b in it) == len(lst)  # every image decodes
    print(json.dumps(got))
""")


@pytest.mark.parametrize("fmt,env,script", [("tfrecord", "KIT_TF_PYTHON", TF_READER),
                                            ("recordio", "KIT_MXNET_PYTHON", MX_READER)])
def test_the_frameworks_own_readers(source, tmp_path, fmt, env, script):
    python = os.environ.get(env)
    if not python:  # `make test` sets it (make readers); in CI a missing reader fails, never skips
        why = (f"set {env} to a Python with {'tensorflow-cpu' if fmt == 'tfrecord' else 'mxnet'} (make readers) to "
               f"read the {fmt} files with the framework itself (the spec readers above always run)")
        pytest.fail(why) if os.environ.get("CI") else pytest.skip(why)
    convert(source, tmp_path / fmt, fmt)
    (tmp_path / "reader.py").write_text(script)
    proc = subprocess.run([python, str(tmp_path / "reader.py"), str(tmp_path / fmt)], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    want = source_images(source)
    assert got.keys() == want.keys()
    for key, (index, data) in want.items():
        assert got[key] == [index + OFFSET[fmt], data.hex()], key


def test_sigterm_mid_run_leaves_nothing_and_a_killed_runs_leftovers_are_removed(source, tmp_path):
    import signal
    import time

    src = tmp_path / "src"
    jpeg = (source / "n01440764" / "n01440764_2.JPEG").read_bytes()
    for c in range(3):
        (src / f"n0{c}").mkdir(parents=True)
        for i in range(1500):
            (src / f"n0{c}" / f"{i}.JPEG").write_bytes(jpeg)
    out_parent = tmp_path / "out"
    out_parent.mkdir()
    proc = subprocess.Popen([sys.executable, str(CONVERT), str(src), str(out_parent / "rio"), "--to", "recordio"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    partial = out_parent / f".rio.partial-{proc.pid}"
    deadline = time.monotonic() + 60
    while not (partial / ".train.rec.tmp").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted; nothing written" in err
    nothing_beside(out_parent)

    dead = subprocess.Popen(["true"])
    dead.wait()
    (out_parent / f".rio.partial-{dead.pid}" / "junk").mkdir(parents=True)  # as a SIGKILLed run leaves it
    (out_parent / ".rio.partial-notapid").mkdir()  # not ours to judge: kept
    summary = json.loads(convert(source, out_parent / "rio", "recordio", "--json").stdout)
    assert (summary["format"], summary["images"], summary["classes"], summary["files"]) == ("recordio", 16, 3, 3)
    assert summary["manifest_sha256"] == hashlib.sha256((out_parent / "rio" / "manifest.json").read_bytes()).hexdigest()
    nothing_beside(out_parent, "rio", ".rio.partial-notapid")
