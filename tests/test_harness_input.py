"""The harness's input under abuse (issue 39): list labels out of range and list paths outside the data root are
bad input naming list:line (exit 2) for every loader, and the decoded pixels in flight are bounded for every
loader (data.fit_decode), measured as peak RSS on a real 9000 x 9000 JPEG.

Before: a label >= --num-classes died in the framework's loss (exit 1), one beyond int64 in numpy (exit 1); a path
outside the root was read without a word; four lines of one 9000 x 9000 JPEG took 1.2 GiB in loader_cpu and 3.8 GiB
in the gpu loader's CPU twin (every prefetched image decoded in full).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_harness_loaders import CLASSES, HARNESS, TINY, harness, kitlines, tree  # noqa: F401 (tree: a fixture)

sys.path.insert(0, str(HARNESS))  # the harness's modules import each other by name

import data  # noqa: E402
import loader_cpu  # noqa: E402
import loader_gpu  # noqa: E402


@pytest.fixture
def photos(request: pytest.FixtureRequest) -> Path:
    """test_harness_loaders' tree of photo-like JPEGs (its fixture `tree`, imported above)."""
    return request.getfixturevalue("tree")



def edited_list(photos: Path, tmp_path: Path, line: str) -> tuple[Path, int]:
    """PHOTOS's list with LINE put in as its last line, beside it (so the root is PHOTOS): the list, LINE's number."""
    lines = (photos / "train_list.txt").read_text().splitlines()[:-1] + [line]
    lst = photos / f"edited-{tmp_path.name}.txt"
    lst.write_text("\n".join(lines) + "\n")
    return lst, len(lines)


@pytest.mark.parametrize("loader", ["cpu", "gpu", "dali"])
@pytest.mark.parametrize(("label", "words"), [
    (str(CLASSES), f"label {CLASSES} is out of range: the run has {CLASSES} classes (labels 0 to {CLASSES - 1})"),
    ("18446744073709551616", "label 18446744073709551616 does not fit in int64"),
])
def test_a_label_out_of_range_is_bad_input_naming_list_and_line(photos: Path, tmp_path: Path, loader: str, label: str,
                                                                 words: str) -> None:
    """Before: the framework's loss failed on it (exit 1), or numpy on int64; dali named its own absence first."""
    lst, lineno = edited_list(photos, tmp_path, f"train/n01440764/n01440764_1.JPEG {label}")
    out = harness("--framework", "torch", *TINY, "--data", str(lst), "--loader", loader)
    assert out.returncode == 2, out.stderr[-2000:]
    assert f"bad_input: {lst}:{lineno}: {words}" in out.stderr
    stop = kitlines(out.stdout)[-2]
    assert stop["reason"] == "bad_input" and stop["message"] == f"{lst}:{lineno}: {words}"


def test_a_path_outside_the_root_is_bad_input_unless_allowed(photos: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.JPEG"
    shutil.copy(photos / "train" / "n01440764" / "n01440764_1.JPEG", outside)
    lst, lineno = edited_list(photos, tmp_path, f"{outside} 0")
    out = harness("--framework", "paddle", *TINY, "--data", str(lst), "--loader-only")
    assert out.returncode == 2, out.stderr[-2000:]
    assert (f"bad_input: {lst}:{lineno}: {outside} resolves to {outside.resolve()}, outside the data root "
            f"{photos.resolve()}; --allow-outside-root reads such paths") in out.stderr
    out = harness("--framework", "paddle", *TINY, "--data", str(lst), "--loader-only", "--allow-outside-root")
    assert out.returncode == 0, out.stderr[-2000:]
    start = kitlines(out.stdout)[0]
    assert start["allow_outside_root"] is True and start["outside_root"] == 1  # what an auditor sees
    out = harness("--framework", "paddle", *TINY, "--data", str(photos / "train_list.txt"), "--loader-only")
    start = kitlines(out.stdout)[0]
    assert out.returncode == 0 and start["allow_outside_root"] is False and start["outside_root"] == 0
    out = harness("--framework", "paddle", *TINY, "--allow-outside-root")
    assert out.returncode == 2 and "--allow-outside-root applies to --data <train_list.txt>" in out.stderr


# -- decoded pixels -------------------------------------------------------------------------------------------------


def jpeg(path: Path, width: int, height: int, fmt: str = "JPEG") -> Path:
    """A real picture (ellipses on a ground) of WIDTH x HEIGHT, made in a child process so that its pixels do not
    count in this one's peak."""
    code = ("import sys; from PIL import Image, ImageDraw; w, h = int(sys.argv[2]), int(sys.argv[3]); "
            "im = Image.new('RGB', (w, h), (120, 60, 30)); d = ImageDraw.Draw(im)\n"
            "for i in range(0, max(w, h), max(w, h) // 18): d.ellipse((i, i // 2, i + w // 4, i // 2 + h // 6), "
            "fill=(i % 255, 200, 90))\n"
            "im.save(sys.argv[1], sys.argv[4], quality=90)")
    made = subprocess.run([sys.executable, "-c", code, str(path), str(width), str(height), fmt], capture_output=True,
                          text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    return path


PROBE = """
import json, resource, sys
sys.path.insert(0, sys.argv[1])
import data
kind, lst = sys.argv[2], sys.argv[3]
entries = data.load_list(lst)
kw = dict(batch_size=2, image_size=32, workers=2, prefetch=4)
if kind == "cpu":
    import loader_cpu
    ld = loader_cpu.ImageListLoader(entries, **kw)
else:
    import loader_gpu
    ld = loader_gpu.DeviceImageLoader(entries, framework=kind, gpu=None, decode_ahead=0, **kw)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
with ld:
    for _ in range(4):
        images, _ = next(ld)
print(json.dumps({"before": before, "peak": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "shape": list(images.shape)}))
"""


@pytest.mark.parametrize("kind", ["cpu", "torch"])
def test_decoded_pixels_in_flight_are_bounded_on_a_9000px_jpeg(tmp_path: Path, kind: str) -> None:
    """Peak RSS growth over 4 batches of 2 from a list of four lines of one 9000 x 9000 JPEG (81 Mpx, 243 MB as RGB),
    workers 2, prefetch 4. The bound is in the loaders' constants, not the file's size: loader_cpu holds one image
    per worker (decoded + its RGB copy); the twin reads files (not pixels) ahead, and decodes one batch at a time
    (measured inline, decode_ahead=0: the loader its decode process runs): the batch's images, their flat copy, one more being decoded, and one resize step of
    CPU_PIXEL_BUDGET padded pixels (uint8 + float32); each image at most MAX_DECODED_PIXELS x 3 bytes. Measured
    here: cpu ~320 MB, twin ~475 MB (the twin before reader processes: ~1320 MB)."""
    root = tmp_path / "big"
    (root / "train").mkdir(parents=True)
    jpeg(root / "train" / "big.JPEG", 9000, 9000)
    (root / "list.txt").write_text("train/big.JPEG 0\n" * 4)
    out = subprocess.run([sys.executable, "-c", PROBE, str(HARNESS), kind, str(root / "list.txt")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got["shape"] == [2, 3, 32, 32]
    image = data.MAX_DECODED_PIXELS * 3  # bytes of the largest image a loader decodes
    workers, batch = 2, 2
    budget = loader_gpu.CPU_PIXEL_BUDGET * 3 * 5
    bound = workers * 3 * image if kind == "cpu" else (2 * batch + 1) * image + budget
    growth = got["peak"] - got["before"]
    assert growth <= bound, f"{kind}: peak RSS grew {growth / 2**20:.0f} MiB, bound {bound / 2**20:.0f} MiB"


def test_a_large_jpeg_decodes_reduced_alike_in_every_loader_and_a_large_png_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the limit at 10,000 pixels: a 300 x 240 JPEG (72,000) decodes at 1/4 scale (75 x 60; 1/2 would be
    22,500), the same crops in loader_cpu and the twin; a PNG cannot be reduced and is refused naming list:line."""
    monkeypatch.setattr(data, "MAX_DECODED_PIXELS", 10_000)
    from PIL import Image

    root = tmp_path / "tree"
    (root / "train").mkdir(parents=True)
    for i in range(4):
        jpeg(root / "train" / f"{i}.JPEG", 300, 240)
    with Image.open(root / "train" / "0.JPEG") as img:
        assert data.fit_decode(img).size == (75, 60)
        assert img.convert("RGB").size == (75, 60)
    (root / "list.txt").write_text("".join(f"train/{i}.JPEG 0\n" for i in range(4)))
    entries = data.load_list(root / "list.txt")
    kw = {"batch_size": 2, "image_size": 32, "seed": 1}
    with loader_cpu.ImageListLoader(entries, **kw) as cpu, \
            loader_gpu.DeviceImageLoader(entries, framework="torch", gpu=None, decode_ahead=0, **kw) as twin:
        for _ in range(2):
            want, got = next(cpu)[0], next(twin)[0].numpy()
            grey = np.abs(got - want) * (np.asarray(data.IMAGENET_STD, dtype=np.float32) * 255).reshape(3, 1, 1)
            assert grey.max() <= 1.01  # the same crop of the same reduced pixels (test_harness_loaders' tolerance)

    jpeg(root / "train" / "2.png", 300, 240, "PNG")
    (root / "list.txt").write_text("".join(f"train/{i}.JPEG 0\n" for i in (0, 1, 3)) + "train/2.png 0\n")
    entries = data.load_list(root / "list.txt")
    for make in (loader_cpu.ImageListLoader, lambda e, **k: loader_gpu.DeviceImageLoader(e, framework="torch",
                                                                                           gpu=None, decode_ahead=0,
                                                                                           **k)):
        with make(entries, **kw) as ld, pytest.raises(data.DataError) as err:
            for _ in range(ld.steps_per_epoch):
                next(ld)
        assert str(err.value) == (f"cannot read image {root / 'train' / '2.png'} (list {root / 'list.txt'}:4): "
                                  "300 x 240 pixels, more than the 10000 an image may decode to (a JPEG decodes at "
                                  "down to 1/8 scale to fit)")
