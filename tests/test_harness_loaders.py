"""The harness's input pipelines beside the CPU one: loader_gpu.py through its CPU twin (the same tensor code on the
CPU, real JPEGs decoded by Pillow), its decode process against the inline order (decode_ahead=0), loader_dali.py's
refusal and parameters, and train.py's --loader, --loader-only and input probe end to end.

Tolerance, twin vs loader_cpu (same seed, so the same crop box and flip per image): both resample the same
decoded pixels with Pillow's triangle-filter weights; Pillow rounds to 8 bits after its horizontal pass and at the
end, the twin computes in float32 and rounds at the end. The horizontal rounding moves a pixel by at most half a
grey level and the second pass's weights are >= 0 and sum to 1, so before the last rounding the two differ by under
1 grey level (+ float32 error), and after it by at most 1. Asserted: max <= 1.01, mean <= 0.35 grey levels, i.e. max 0.0177 / mean 0.0061 in normalised units
(1 grey level = 1 / (255 std) = 0.0171-0.0175). On a GPU nvJPEG's IDCT and chroma upsampling differ from
libjpeg-turbo's by a few levels more; that is not measurable here (no GPU).
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from kitlogs import harness, kitlines

from kit.audit.rules.closed import _decode_problems
from kit.results.parsers import parse_log
from kit.results.parsers.kitlog import read_what_ran

REPO = Path(__file__).resolve().parents[1]
HARNESS = REPO / "scripts" / "harness"
sys.path.insert(0, str(HARNESS))  # the harness's modules import each other by name

import data  # noqa: E402
import loader_cpu  # noqa: E402
import loader_dali  # noqa: E402
import loader_gpu  # noqa: E402

CLASSES, PER_CLASS = 3, 8
N = CLASSES * PER_CLASS
GREY = np.asarray(data.IMAGENET_STD, dtype=np.float32) * 255  # one normalised unit in grey levels, per channel
MAX_GREY, MEAN_GREY = 1.01, 0.35
TINY = ["--model", "resnet50", "--num-classes", str(CLASSES), "--image-size", "32", "--batch-size", "4",
        "--warmup-steps", "1", "--measure-steps", "2", "--threads", "1"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Photo-like JPEGs (greyscale and CMYK ones among them) of about 96 x 80 px."""
    root = tmp_path_factory.mktemp("loaders") / "imagenet"
    args = ["--classes", CLASSES, "--images-per-class", PER_CLASS, "--size", "96x80", "--content", "photo"]
    made = subprocess.run([sys.executable, REPO / "data_prep" / "make_synthetic_imagenet.py", root, *map(str, args)],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    return root


@pytest.fixture(scope="module")
def entries(tree: Path) -> data.ImageList:
    return data.load_list(tree / "train_list.txt")


def twin(entries, framework: str = "torch", **kw) -> loader_gpu.DeviceImageLoader:
    kw.setdefault("batch_size", 8)
    kw.setdefault("image_size", 32)
    return loader_gpu.DeviceImageLoader(entries, framework=framework, gpu=None, **kw)


def numpy(batch) -> tuple[np.ndarray, np.ndarray]:
    images, labels = batch
    return images.numpy(), labels.numpy()


def grey_levels(a: np.ndarray, b: np.ndarray, channels_last: bool) -> np.ndarray:
    return np.abs(a - b) * GREY.reshape((3,) if channels_last else (3, 1, 1))


def test_photo_content_makes_imagenet_sized_jpegs(tmp_path: Path) -> None:
    """What bench/loader.py times: ~110 KB files of ~400x350 (ImageNet's means), all RGB with --all-rgb."""
    from PIL import Image

    args = ["--classes", "2", "--images-per-class", "12", "--size", "400x350", "--content", "photo", "--all-rgb"]
    made = subprocess.run([sys.executable, REPO / "data_prep" / "make_synthetic_imagenet.py", tmp_path, *args],
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, made.stderr
    files = sorted((tmp_path / "train").rglob("*.JPEG"))
    assert len(files) == 24
    assert 90_000 <= np.mean([f.stat().st_size for f in files]) <= 130_000
    for f in files:
        with Image.open(f) as img:
            assert img.mode == "RGB" and 300 <= img.width <= 500 and 262 <= img.height <= 438


# -- the twin against the Pillow pipeline ---------------------------------------------------------------------------


@pytest.mark.parametrize(("framework", "size", "channels_last"),
                         [("torch", 48, False), ("torch", 128, True), ("paddle", 48, True), ("paddle", 128, False)])
def test_gpu_twin_matches_the_pillow_loader(entries, framework: str, size: int, channels_last: bool) -> None:
    kw = {"batch_size": 8, "image_size": size, "seed": 5, "channels_last": channels_last}
    with loader_cpu.ImageListLoader(entries, **kw) as cpu, twin(entries, framework, **kw) as gpu:
        assert (gpu.decode_device, gpu.decoder) == ("cpu", "pillow")
        for _ in range(2 * cpu.steps_per_epoch):  # two epochs: every image, two crops each
            (want, want_labels), (got, got_labels) = next(cpu), numpy(next(gpu))
            assert got.dtype == np.float32 and got.shape == want.shape
            np.testing.assert_array_equal(got_labels, want_labels)
            diff = grey_levels(got, want, channels_last)
            assert diff.max() <= MAX_GREY and diff.mean() <= MEAN_GREY, (diff.max(), diff.mean())


def same_but_rounding(a: np.ndarray, b: np.ndarray) -> None:
    """A and B (normalised batches) equal, but where float32 error flipped a rounding to uint8: one grey level,
    at under 1% of the pixels."""
    diff = grey_levels(a, b, False)
    assert diff.max() <= MAX_GREY and (diff > 0.01).mean() < 0.01, (diff.max(), (diff > 0.01).mean())


def test_twin_is_the_same_in_both_frameworks_and_for_any_worker_count(entries) -> None:
    with twin(entries, "torch", seed=2, workers=0) as a, twin(entries, "paddle", seed=2, workers=3, prefetch=1) as b:
        for _ in range(4):
            (xa, ya), (xb, yb) = numpy(next(a)), numpy(next(b))
            same_but_rounding(xa, xb)
            np.testing.assert_array_equal(ya, yb)


def test_a_flip_or_a_wrong_box_would_show(entries) -> None:
    """The tolerance is tight enough to matter: the mirror image of a batch is far outside it."""
    with loader_cpu.ImageListLoader(entries, 8, 48, seed=5) as cpu, twin(entries, image_size=48, seed=5) as gpu:
        want, (got, _) = next(cpu)[0], numpy(next(gpu))
    assert grey_levels(got[..., ::-1], want, False).mean() > 10 * MEAN_GREY


def test_runs_split_by_the_pixel_budget_give_the_same_batch(entries) -> None:
    with twin(entries, seed=1, decode_ahead=0) as whole, twin(entries, seed=1, decode_ahead=0) as split:
        split.pixel_budget = 1  # every image a run of its own
        for _ in range(2):
            same_but_rounding(numpy(next(split))[0], numpy(next(whole))[0])
    def runs(windows: list[tuple[int, int]], budget: int) -> list[tuple[int, int]]:
        heights, widths = np.array(windows).T
        return loader_gpu.runs(heights, widths, budget)

    assert runs([(10, 10), (20, 5), (10, 10)], 400) == [(0, 1), (1, 3)]  # 3 x 20 x 10 do not fit: halved
    assert runs([(10, 10)] * 3, 300) == [(0, 3)]
    assert runs([(30, 30), (1, 1)], 100) == [(0, 1), (1, 2)]  # larger than the budget: alone
    assert runs([(4, 4)] * 8, 40) == [(0, 2), (2, 4), (4, 6), (6, 8)]


def test_resample_weights_are_pillows_triangle_filter() -> None:
    ops = loader_gpu.TorchOps(None)

    def weights(plan: loader_gpu.Plan, pixels: int) -> np.ndarray:
        return loader_gpu.resample_weights(ops, plan, pixels).numpy()[0]

    same = loader_gpu.axis_plans([3], [11], [20], 8)  # 8 pixels onto 8: the identity, shifted by the window's offset
    np.testing.assert_allclose(weights(same, int(same.length[0])),
                               np.eye(int(same.length[0]), 8, k=-(3 - int(same.offset[0]))), atol=1e-6)
    down = loader_gpu.axis_plans([0], [30], [30], 10)  # 3:1, antialiased: a triangle 3 pixels wide on each side
    got = weights(down, 30)
    np.testing.assert_allclose(got.sum(axis=0), 1, atol=1e-6)
    np.testing.assert_allclose(got[:8, 1], [0, 0, 1 / 9, 2 / 9, 3 / 9, 2 / 9, 1 / 9, 0], atol=1e-6)
    flipped = loader_gpu.axis_plans([0, 0], [30, 30], [30, 30], 10, np.array([False, True]))
    np.testing.assert_allclose(weights(flipped.part(1, 2), 30), got[:, ::-1])


def test_crop_plans_are_a_few_numbers_an_image_and_make_the_per_pixel_centres_weights_exactly(entries) -> None:
    """A reader's answer at batch 256, 224 px: a few numbers an image (per-pixel centres were 461 KiB, more than a
    socket's buffer); the weights made from them, flips included, are bit for bit those of the per-pixel float32
    centres the plans used to carry."""
    import pickle

    import crop_plan

    rng = np.random.default_rng(0)
    widths, heights = rng.integers(60, 900, 256), rng.integers(60, 900, 256)
    plan = crop_plan.batch_plan(7, 1, np.arange(256), widths, heights, 224)
    assert len(pickle.dumps(plan)) < 32 * 1024 and plan.cols.flip.any() and not plan.cols.flip.all()
    ops = loader_gpu.TorchOps(None)
    for axis in plan:
        got = loader_gpu.resample_weights(ops, axis, 1000).numpy()
        # the former plan's centres (float32, reversed for a flip) and weights, computed in numpy
        centers = (axis.start[:, None] + (np.arange(224) + 0.5)[None, :] * axis.scale[:, None]).astype(np.float32)
        centers[axis.flip] = centers[axis.flip, ::-1]
        inverse, pixel = (1 / axis.support).astype(np.float32), np.arange(1000, dtype=np.float32)
        w = np.clip(1 - np.abs((pixel + 0.5)[None, :, None] * inverse[:, None, None]
                               - (centers * inverse[:, None])[:, None, :]), 0, None)
        w *= (pixel[None, :] < axis.length[:, None])[:, :, None]
        np.testing.assert_array_equal(got, w / w.sum(1, keepdims=True))


# -- errors, shards -------------------------------------------------------------------------------------------------


def damaged(tree: Path, tmp_path: Path, damage: str) -> tuple[data.ImageList, int, str]:
    """A copy of TREE with one JPEG truncated or garbage: its entries, that entry's index, and how errors name it."""
    root = tmp_path / "imagenet"
    shutil.copytree(tree, root)
    rel = "train/n01443537/n01443537_3.JPEG"
    path = root / rel
    path.write_bytes(path.read_bytes()[:3000] if damage == "truncated" else b"\xff\xd8\xff not a JPEG" * 20)
    lst = root / "train_list.txt"
    lineno = lst.read_text().splitlines().index(f"{rel} 1") + 1
    return data.load_list(lst), lineno - 1, f"cannot read image {path} (list {lst}:{lineno}): "


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_bad_jpeg_is_a_data_error_naming_file_and_line(tree: Path, tmp_path: Path, damage: str) -> None:
    entries, _, named = damaged(tree, tmp_path, damage)
    messages = []
    for make in (twin, loader_cpu.ImageListLoader):
        with make(entries, batch_size=8, image_size=32) as ld, pytest.raises(data.DataError) as err:
            for _ in range(ld.steps_per_epoch):  # the bad image is in one of the epoch's batches
                next(ld)
        messages.append(str(err.value))
    assert messages[0].startswith(named)
    assert ("image file is truncated" if damage == "truncated" else "cannot identify image file") in messages[0]
    assert messages[0] == messages[1], "the same words as the CPU loader's"


def test_world_size_2_shards_are_disjoint_equal_and_batches_follow_them(entries) -> None:
    entries = entries[:-1]  # 23 entries: shards of 11, one left out
    labels = np.array([label for _, label in entries])
    shards = []
    for rank in (0, 1):
        with twin(entries, batch_size=5, rank=rank, world_size=2) as ld:
            assert ld.shard_size == 11 and ld.steps_per_epoch == 2
            for epoch in (0, 1):
                got = np.concatenate([numpy(next(ld))[1] for _ in range(ld.steps_per_epoch)])
                np.testing.assert_array_equal(got, labels[ld.epoch_indices(epoch)[:10]])
            shards.append(ld.epoch_indices(0))
    assert len(shards[0]) == len(shards[1]) == 11 and not set(shards[0]) & set(shards[1])


# -- the decode process ---------------------------------------------------------------------------------------------


def alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def watched() -> None:
    """The test fails rather than hangs (a lost batch would leave next() waiting), and leaves no loader thread
    (workers `kit-data_N`) and no process of the loader's (a decode process, its readers) running."""
    import psutil

    def hung(signum, frame):
        raise TimeoutError("the test ran for 60 s")

    me = psutil.Process()
    before = set(threading.enumerate())
    children = {p.pid for p in me.children(recursive=True)}
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert [t.name for t in set(threading.enumerate()) - before if t.name.startswith("kit-")] == []
    assert [p.pid for p in me.children(recursive=True) if p.pid not in children and alive(p.pid)] == []


def outcomes(loader, count: int) -> list:
    """LOADER's next COUNT batches, each as numpy (images, labels) or as the message of the DataError in its place."""
    out = []
    for _ in range(count):
        try:
            out.append(numpy(next(loader)))
        except data.DataError as exc:
            out.append(str(exc))
    return out


def batch_entries(loader, number: int) -> np.ndarray:
    """The entry indices of LOADER's batch NUMBER (counted from 0 across epochs)."""
    epoch, step = divmod(number, loader.steps_per_epoch)
    return loader.epoch_indices(epoch)[step * loader.batch_size : (step + 1) * loader.batch_size]


def wait_until(condition, seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.mark.parametrize(("framework", "ahead", "workers", "rank", "world_size"), [
    ("torch", 1, 2, 0, 1), ("torch", 2, 0, 1, 2), ("torch", 3, 3, 0, 2), ("paddle", 1, 3, 1, 2), ("paddle", 2, 1, 0, 1)])
def test_decode_process_hands_out_the_inline_batches_in_order(entries, watched, framework: str, ahead: int,
                                                              workers: int, rank: int, world_size: int) -> None:
    """Over three epochs and into a fourth: the same labels (those of epoch_indices) and the same pixels, batch for
    batch, as the loader that decodes in the consumer."""
    kw = {"batch_size": 5, "seed": 3, "rank": rank, "world_size": world_size, "workers": workers}
    with twin(entries, framework, decode_ahead=0, **kw) as inline, \
            twin(entries, framework, decode_ahead=ahead, **kw) as overlapped:
        count = 3 * inline.steps_per_epoch + 1
        want, got = outcomes(inline, count), outcomes(overlapped, count)
        assert inline._process is None and overlapped._process.pid != os.getpid() and alive(overlapped._process.pid)
    labels = np.array([label for _, label in entries])
    for number, ((want_x, want_y), (got_x, got_y)) in enumerate(zip(want, got, strict=True)):
        np.testing.assert_array_equal(got_y, labels[batch_entries(overlapped, number)])
        np.testing.assert_array_equal(got_y, want_y)
        np.testing.assert_array_equal(got_x, want_x)


@pytest.mark.parametrize("ahead", [1, 2])
def test_decode_process_holds_at_most_decode_ahead_batches_and_one_on_its_way(entries, watched, ahead: int) -> None:
    """The process holds AHEAD batches ready at first; once batches are taken, one more between it and the
    trainer, which may hold it on its way to the device (the batch after the one taken, its upload started)."""
    with twin(entries, decode_ahead=ahead) as ld:
        for taken in range(5):  # past the epoch's 3 batches
            if taken:
                next(ld)
            held = ahead + (1 if taken else 0)
            wait_until(lambda n=held: settled(ld) == n)
            time.sleep(0.2)  # time to decode one more, were it allowed
            assert settled(ld) == held
            assert ld._process._inbox[-1][-1]["decoded_batches"] == taken + held


@pytest.mark.parametrize("ahead", [1, 3])
def test_bad_jpeg_is_raised_at_its_batch_and_the_batches_around_it_are_the_inline_ones(
        tree: Path, tmp_path: Path, watched, ahead: int) -> None:
    """The DataError comes from next() at each batch that holds the bad image, not earlier; the batches before and
    after it are delivered as inline; then the loader closes cleanly."""
    entries, bad, named = damaged(tree, tmp_path, "garbage")
    with twin(entries, decode_ahead=0) as inline, twin(entries, decode_ahead=ahead) as overlapped:
        count = 3 * inline.steps_per_epoch
        want, got = outcomes(inline, count), outcomes(overlapped, count)
    holding = [n for n in range(count) if bad in batch_entries(overlapped, n)]
    assert [n for n, o in enumerate(got) if isinstance(o, str)] == holding and len(holding) == 3
    for w, g in zip(want, got, strict=True):
        if isinstance(g, str):
            assert g == w and g.startswith(named) and "cannot identify image file" in g
        else:
            np.testing.assert_array_equal(g[0], w[0])
            np.testing.assert_array_equal(g[1], w[1])


def settled(ld) -> int:
    """Batches decoded ahead of the consumer: handed over, and the one on its way to the device."""
    return ld._process.ready() + (ld._process._uploading is not None)


def test_the_trainers_python_a_batch_is_a_few_calls_whatever_the_batch(entries, watched) -> None:
    """With the decode process, next() in the trainer takes a batch the process has handed over (its upload
    started at the previous next()), normalises it and starts the next one's upload: the same few Python calls a
    batch at batch 4 and at 12, none of the decode's."""
    counts = []
    for batch in (4, 12):
        with twin(entries, batch_size=batch, decode_ahead=2) as ld:
            for _ in range(2):  # the second starts an upload whatever the timing of the first
                next(ld)
                wait_until(lambda: settled(ld) == 3)
            samples = []
            for _ in range(3):  # the fewest of three: a collection's finalizers may run inside one (a loaded run)
                wait_until(lambda: settled(ld) == 3)
                assert ld._process._uploading is not None and ld._process.ready() == 2  # next() then does not wait
                calls = []
                gc.disable()
                sys.setprofile(lambda frame, event, arg, seen=calls: seen.append(event in ("call", "c_call")))
                try:
                    next(ld)
                finally:
                    sys.setprofile(None)
                    gc.enable()
                samples.append(sum(calls))
            counts.append(min(samples))
    assert counts[0] == counts[1] < 80, counts  # 62 here; the decode itself makes ~240 a batch (bench-decode)


@pytest.mark.parametrize(("framework", "when"), [("torch", "just made"), ("torch", "mid-epoch"),
                                                 ("torch", "slots full"), ("paddle", "slots full")])
def test_close_stops_the_decode_process_promptly(entries, watched, framework: str, when: str) -> None:
    ld = twin(entries, framework, decode_ahead=2)
    pid = ld._process.pid
    if when != "just made":
        next(ld)
    if when == "slots full":  # the decode process waits for a slot
        wait_until(lambda: settled(ld) == 3)
        time.sleep(0.1)
    t0 = time.monotonic()
    ld.close()
    assert time.monotonic() - t0 < 2
    assert not alive(pid)
    with pytest.raises(RuntimeError, match="DeviceImageLoader is closed"):
        next(ld)
    ld.close()  # idempotent


def test_a_decode_process_that_dies_is_an_error_at_next_not_a_hang(entries, watched) -> None:
    with twin(entries, decode_ahead=2) as ld:
        os.kill(ld._process.pid, signal.SIGKILL)
        with pytest.raises(RuntimeError, match=rf"the decode process {ld._process.pid} ended \(exit code -9\)"):
            for _ in range(3):  # the batches it handed over before it died come first
                next(ld)


def test_a_decode_process_that_cannot_start_raises_its_error_where_the_loader_is_made(entries, watched) -> None:
    with pytest.raises(ModuleNotFoundError, match="no_such_decoder_module"):
        twin(entries, decode_ahead=2, decoder="no_such_decoder_module:Decoder")


def test_keyboard_interrupt_in_the_training_step_closes_cleanly(entries, watched) -> None:
    with pytest.raises(KeyboardInterrupt), twin(entries, decode_ahead=2) as ld:
        next(ld)
        raise KeyboardInterrupt  # Ctrl-C while the decode process decodes the next batches


def test_ctrl_c_while_next_waits_for_a_hung_decode_process_does_not_hang(entries, watched) -> None:
    """next() waits for a decode process that hangs (stopped here); Ctrl-C there ends the wait, and close() kills
    the process past CLOSE_S."""
    ld = twin(entries, decode_ahead=1)
    pid = ld._process.pid
    wait_until(lambda: ld._process.ready() == 1)
    os.kill(pid, signal.SIGSTOP)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt), ld:
        next(ld)  # the batch it had ready
        timer.start()
        next(ld)  # waits for the hung process: SIGINT arrives here
    timer.join()
    assert time.monotonic() - t0 < 10 and not alive(pid)


# -- DALI -----------------------------------------------------------------------------------------------------------


def test_dali_refuses_clearly_without_dali(entries) -> None:
    with pytest.raises(data.LoaderUnavailable, match=r"^loader dali: NVIDIA DALI is not installed \(pip install "
                                                     r"nvidia-dali-cuda120"):
        loader_dali.DaliLoader(entries, 8, 32, framework="torch", gpu=0)


def test_dali_parameters_say_the_same_augmentation_and_shard(entries) -> None:
    p = loader_dali.pipeline_params(entries, 8, 224, gpu=1, rank=2, world_size=4, seed=9, workers=6,
                                    channels_last=True, prefetch=3)
    assert p["pipeline"] == {"batch_size": 8, "num_threads": 6, "device_id": 1, "seed": 9, "prefetch_queue_depth": 3}
    reader = p["reader"]
    assert reader["files"] == [path for path, _ in entries] and reader["labels"] == [label for _, label in entries]
    assert (reader["shard_id"], reader["num_shards"], reader["random_shuffle"]) == (2, 4, True)
    assert p["decoder"] == {"device": "mixed", "output_type": "RGB", "random_area": [0.08, 1.0],
                            "random_aspect_ratio": [0.75, 4 / 3], "num_attempts": 10}
    assert p["resize"] == {"resize_x": 224, "resize_y": 224, "interp_type": "INTERP_LINEAR", "antialias": True}
    norm = p["normalize"]
    assert norm["output_layout"] == "HWC" and norm["dtype"] == "FLOAT" and p["flip_probability"] == 0.5
    np.testing.assert_allclose(norm["mean"], [123.675, 116.28, 103.53])
    np.testing.assert_allclose(norm["std"], [58.395, 57.12, 57.375])
    assert loader_dali.pipeline_params(entries, 8, 224, gpu=0, rank=0, world_size=1, seed=0, workers=1,
                                       channels_last=False, prefetch=2)["normalize"]["output_layout"] == "CHW"


# -- train.py -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("framework", "layout"), [("torch", "nhwc"), ("paddle", "nchw")])
def test_loader_only_run_logs_its_input_rate(tree: Path, tmp_path: Path, framework: str, layout: str) -> None:
    out = harness("--framework", framework, *TINY, "--data", str(tree / "train_list.txt"), "--loader", "gpu",
                  "--loader-only", "--layout", layout, "--workers", "2")
    assert out.returncode == 0, out.stderr[-2000:]
    events = kitlines(out.stdout)
    assert [e["event"] for e in events] == ["run_start", "warmup_end", "step", "step", "input_rate", "run_stop",
                                            "rank_stop"]
    start, steps, rate, stop = events[0], events[2:4], events[4], events[5]
    assert {k: start[k] for k in ("loader", "decode_device", "decoder", "loader_only", "workers")} == {
        "loader": "gpu", "decode_device": "cpu", "decoder": "pillow", "loader_only": True, "workers": 2}
    assert "its twin runs" in start["note"] and "its twin runs" in out.stderr
    assert rate["loader"] == "gpu" and rate["probe"] is False and rate["steps"] == 2 and rate["global_batch"] == 4
    assert rate["seconds"] == pytest.approx(sum(s["seconds"] for s in steps), abs=1e-5)
    # images over the loader's seconds, which the line rounds to 1 us (steps of a cached tree take tens of us)
    half_us = 5e-7
    assert 8 / (rate["seconds"] + half_us) - 1e-3 <= rate["images_per_sec"] <= 8 / (rate["seconds"] - half_us) + 1e-3
    assert stop["status"] == "success" and stop["loader_only"] is True and stop["unit"] == "images/s"
    assert stop["samples_per_sec"] == rate["images_per_sec"]
    log = tmp_path / "run.log"
    log.write_text(out.stdout)
    assert parse_log(log, "auto").format.name == "kitlog"
    ran = read_what_ran(log)
    assert ran["loader"] == "gpu" and ran["decode_device"] == "cpu" and ran["input_rate"] == rate["images_per_sec"]
    # one batched decode call a batch (of the batches holding a JPEG the device decodes), none refused
    assert stop["decoded_batches"] >= 3 and 0 < stop["decode_calls"] <= stop["decoded_batches"]
    assert stop["refused_batches"] == 0
    # the decode process's seconds per phase, over its wall time (which they cover)
    assert list(stop["phases_s"]) == ["read", "decode", "crop_resize", "copy_back", "slot_wait"]
    assert stop["process_s"] > 0 and all(v >= 0 for v in stop["phases_s"].values())
    assert sum(stop["phases_s"].values()) <= stop["process_s"] * 1.001
    assert {k: ran[k] for k in ("decode_calls", "decoded_batches", "refused_batches")} == {
        k: stop[k] for k in ("decode_calls", "decoded_batches", "refused_batches")}
    # verify's closed world (harness_log_closed@2) holds these records, and not more calls than batches or a refusal
    assert _decode_problems(start, stop) == []
    more = stop | {"decode_calls": stop["decoded_batches"] + 1}
    assert _decode_problems(start, more) == [f"{more['decode_calls']} decode calls for {stop['decoded_batches']} "
                                             "batches, 0 refused, in a run that succeeded"]
    assert "1 refused" in _decode_problems(start, stop | {"refused_batches": 1})[0]


def test_training_on_jpegs_probes_the_input_rate_first(tree: Path) -> None:
    out = harness("--framework", "torch", *TINY, "--data", str(tree / "train_list.txt"), "--input-probe-steps", "3")
    assert out.returncode == 0, out.stderr[-2000:]
    events = kitlines(out.stdout)
    assert [e["event"] for e in events][:3] == ["run_start", "input_rate", "warmup_end"]
    start, rate = events[0], events[1]
    assert (start["loader"], start["decode_device"], start["decoder"], start["loader_only"]) == (
        "cpu", "cpu", "pillow", False)  # the default on a CPU
    assert "note" not in start
    assert rate["probe"] is True and rate["steps"] == 3 and rate["loader"] == "cpu" and rate["images_per_sec"] > 0
    assert events[-2]["event"] == "run_stop" and "loader_only" not in events[-2]

    out = harness("--framework", "torch", *TINY, "--data", str(tree / "train_list.txt"), "--input-probe-steps", "0")
    assert out.returncode == 0 and "input_rate" not in {e["event"] for e in kitlines(out.stdout)}


def test_synthetic_runs_record_the_synthetic_loader_and_no_rate() -> None:
    out = harness("--framework", "paddle", *TINY)
    assert out.returncode == 0, out.stderr[-2000:]
    events = kitlines(out.stdout)
    assert "input_rate" not in {e["event"] for e in events}
    assert {k: events[0][k] for k in ("loader", "decode_device", "decoder", "loader_only", "workers")} == {
        "loader": "synthetic", "decode_device": None, "decoder": None, "loader_only": False, "workers": None}


def test_loader_dali_is_refused_as_bad_input(tree: Path) -> None:
    out = harness("--framework", "torch", *TINY, "--data", str(tree / "train_list.txt"), "--loader", "dali")
    assert out.returncode == 2
    assert "bad_input: loader dali: NVIDIA DALI is not installed (pip install nvidia-dali-cuda120" in out.stderr
    stop, rank = kitlines(out.stdout)[-2:]
    assert stop["status"] == "failed" and stop["reason"] == "bad_input" and "DALI is not installed" in stop["message"]
    assert rank["event"] == "rank_stop" and rank["status"] == "failed"


@pytest.mark.parametrize(("args", "words"), [
    (["--loader", "cpu"], "--loader applies to --data <train_list.txt>"),
    (["--loader-only"], "--loader-only applies to --data <train_list.txt>"),
    (["--loader", "tpu"], "argument --loader: invalid choice: 'tpu'"),
    (["--input-probe-steps", "-1"], "must be an integer >= 0"),
    (["--decoder", "nvimgcodec"], "--decoder applies to --data <train_list.txt>"),
    (["--decoder", "nvimgcodec", "--data", "README.md", "--loader", "cpu"],  # any file: refused before it is read
     "--decoder chooses the decoder of --loader gpu with --framework torch"),
    (["--decoder", "pillow"], "argument --decoder: invalid choice: 'pillow'"),
])
def test_loader_argument_errors(args: list[str], words: str) -> None:
    out = harness("--framework", "torch", *TINY, *args)
    assert out.returncode == 2 and words in out.stderr and not out.stdout


def test_loader_only_is_not_compiled(tree: Path) -> None:
    out = harness("--framework", "torch", *TINY, "--data", str(tree / "train_list.txt"), "--loader-only",
                  "--mode", "compiled")
    assert out.returncode == 2 and "--loader-only runs no network, so --mode compiled does not apply" in out.stderr



def test_a_batch_the_decoder_refuses_stops_the_run_naming_its_list_lines(entries, watched) -> None:
    """The device path on the CPU: torchvision's decoder class with a STAND-IN for nvJPEG's batched call (the GPU
    boundary: Pillow behind it) that refuses the second batch. One call a batch, with the batch's JPEGs (the CMYK one
    is decoded by Pillow, planned); the refusal is counted and raised at its batch, naming its list lines; no image
    is decoded on its own."""
    calls: list[int] = []

    def nvjpeg(files: list, mode, device) -> list:
        calls.append(len(files))
        if len(calls) == 2:
            raise RuntimeError("Error while decoding JPEG images: nvjpegDecodeBatchedPhaseOne failed")
        return loader_gpu.PillowDecoder(ld.ops).decode(files, None)

    with twin(entries, seed=3, decode_ahead=0) as ld:  # the decode process's loader, here where the stand-in is
        stand_in = object.__new__(loader_gpu.TorchvisionDecoder)
        stand_in._decode, stand_in._rgb, stand_in._device = nvjpeg, None, ld.ops.device
        ld.ops.decoder = stand_in
        next(ld)
        with pytest.raises(data.DataError) as err:
            next(ld)
    jpegs = [[int(i) for i in batch_entries(ld, n) if not ld.sizes.host[i]] for n in (0, 1)]
    assert calls == [len(jpegs[0]), len(jpegs[1])] and ld.decode_calls == 2 and ld.refused_batches == 1
    lines = ", ".join(str(i + 1) for i in jpegs[1])
    assert str(err.value) == (
        f"loader gpu: torchvision.io.decode_jpeg refused a batch of {len(jpegs[1])} JPEGs (list {entries.source} "
        f"lines {lines}): RuntimeError: Error while decoding JPEG images: nvjpegDecodeBatchedPhaseOne failed; the run "
        "stops rather than decode image by image (data_prep/verify_list.py finds an unreadable file)")


def test_one_decode_call_a_batch_and_python_calls_per_batch_do_not_grow_with_the_batch(tmp_path: Path) -> None:
    """bench/decode_overlap.py's counts (make bench-decode), on a tree of its own: the decode process's work for a
    batch of 4 and of 16 images makes the same number of Python calls (the stand-in decoder's own excluded), and
    exactly one decode call a batch."""
    out = subprocess.run([sys.executable, str(REPO / "bench" / "decode_overlap.py"), "--stages", "counts",
                          "--images", "256", "--batch", "16", "--tree", str(tmp_path / "tree"), "--json"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got["counts"]["batches"] == [4, 16] and got["counts"]["decode_calls_per_batch"] == [1.0, 1.0]
    small, big = got["counts"]["python_calls_per_batch"]
    assert small == big and small > 0 and got["verdicts"] == {"2 counts": "met"}


def test_the_size_table_read_in_worker_processes_is_the_one_read_inline_and_is_cached(entries, tmp_path,
                                                                                     monkeypatch) -> None:
    """A long list's headers are read in forked worker processes, chunk by chunk: the same table as inline; it is
    cached beside the list and read back; a changed list makes a new one."""
    import image_sizes

    inline = image_sizes.image_sizes(list(entries))  # no source: not cached
    assert inline.cache is None and len(inline) == N and inline.host.any() and not inline.host.all()
    listing = tmp_path / "train_list.txt"
    listing.write_text("".join(f"{path} {label}\n" for path, label in entries))
    monkeypatch.setattr(image_sizes, "POOL_FROM", 1)
    monkeypatch.setattr(image_sizes, "CHUNK", 5)
    pooled = image_sizes.image_sizes(data.load_list(listing, allow_outside_root=True), workers=2)
    assert pooled.cache == str(listing) + image_sizes.CACHE_SUFFIX and Path(pooled.cache).is_file()
    for field in ("width", "height", "nbytes", "host"):
        np.testing.assert_array_equal(getattr(pooled, field), getattr(inline, field))
    monkeypatch.setattr(image_sizes, "_scan", lambda *a: pytest.fail("read the headers again"))
    cached = image_sizes.image_sizes(data.load_list(listing, allow_outside_root=True), workers=2)
    np.testing.assert_array_equal(cached.width, inline.width)
    listing.write_text("".join(f"{path} {label}\n" for path, label in entries[:-1]))
    monkeypatch.undo()
    shorter = image_sizes.image_sizes(data.load_list(listing, allow_outside_root=True))
    assert len(shorter) == N - 1


def test_a_reader_process_that_dies_is_an_error_at_next_and_close_leaves_no_reader(entries, watched) -> None:
    import psutil

    ld = twin(entries, workers=2, decode_ahead=0)
    next(ld)
    readers = ld._readers._procs
    assert len(readers) == 2 and all(psutil.pid_exists(p.pid) for p in readers)
    readers[1].kill()
    readers[1].wait()
    with pytest.raises(RuntimeError, match=rf"file reader process {readers[1].pid} ended \(exit code -9\) at batch"):
        for _ in range(4):
            next(ld)
    ld.close()
    assert all(p.poll() is not None for p in readers)
    with twin(entries, workers=3) as ld:  # the decode process's own readers
        next(ld)
        decoding = psutil.Process(ld._process.pid)
        pids = [decoding.pid, *(p.pid for p in decoding.children())]
    assert len(pids) == 4 and not any(alive(pid) for pid in pids)


def test_the_crop_plans_are_made_in_the_reader_processes_and_a_failing_plan_is_an_error_at_its_batch(
        entries, monkeypatch) -> None:
    import crop_plan

    with twin(entries, seed=3, workers=0, decode_ahead=0) as inline:
        want = [numpy(next(inline)) for _ in range(3)]

    def not_here(*args):
        raise AssertionError("a crop plan made in the trainer")

    monkeypatch.setattr(crop_plan, "batch_plan", not_here)  # the trainer's copy only: readers import their own
    with twin(entries, seed=3, workers=2, decode_ahead=0) as readers:
        for x, y in want:
            got_x, got_y = numpy(next(readers))
            np.testing.assert_array_equal(got_x, x)
            np.testing.assert_array_equal(got_y, y)
    with twin(entries, seed=3, workers=0, decode_ahead=0) as inline, \
            pytest.raises(AssertionError, match="made in the trainer"):
        next(inline)


def test_a_file_changed_after_its_size_was_cached_names_its_line(tree: Path, tmp_path: Path) -> None:
    root = tmp_path / "imagenet"
    shutil.copytree(tree, root)
    with twin(data.load_list(root / "train_list.txt"), decode_ahead=0) as ld:  # caches the size table
        next(ld)
        cache = ld.sizes.cache
    rel = "train/n01443537/n01443537_3.JPEG"
    (root / rel).write_bytes((root / rel).read_bytes() + b"\0" * 10)
    lineno = (root / "train_list.txt").read_text().splitlines().index(f"{rel} 1") + 1
    with twin(data.load_list(root / "train_list.txt")) as ld, pytest.raises(data.DataError) as err:
        for _ in range(ld.steps_per_epoch):
            next(ld)
    assert str(err.value).startswith(f"cannot read image {root / rel} (list {root / 'train_list.txt'}:{lineno}): "
                                     "the file changed after its size was cached: ")
    assert str(err.value).endswith(f" (delete {cache} to read the sizes again)")


# -- the decode process ready for a GPU (issue 57) ------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_entries(tmp_path_factory: pytest.TempPathFactory) -> data.ImageList:
    """260 small JPEGs: a batch of 256 (at 224 px a crop plan of per-pixel centres was 461 KiB)."""
    root = tmp_path_factory.mktemp("big") / "imagenet"
    args = ["--classes", "2", "--images-per-class", "130", "--size", "64x48", "--all-rgb"]
    made = subprocess.run([sys.executable, REPO / "data_prep" / "make_synthetic_imagenet.py", root, *args],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    return data.load_list(root / "train_list.txt")


def test_close_ends_readers_blocked_sending_an_answer_at_once(tmp_path: Path, watched, monkeypatch) -> None:
    """Answers larger than a socket's buffer (16 MiB here) block their readers in send: close() ends them at once
    rather than wait for them to read a stop message."""
    import file_readers

    # close() kills a reader left past REAP_S (0.5 s): on a loaded host one that ends on its own can take longer;
    # given time, a reader that ends is told apart from one killed by its exit status alone
    monkeypatch.setattr(file_readers, "REAP_S", 30.0)
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    readers = file_readers.FileReaders(workers=2, slots=4, slot_bytes=4096)
    procs = list(readers._procs)
    for number in range(4):
        readers.submit(number, number, [str(path)], [0], [100], ("numpy", "zeros", (1 << 21,)))
    time.sleep(1.0)  # every reader has made its answer and is blocked sending it
    readers.close()
    assert all(p.poll() is not None for p in procs)
    # each ended on its own (EPIPE in send), none killed past REAP_S: a wall-clock bound would fail a loaded host
    assert [p.returncode for p in procs] == [0, 0], [p.returncode for p in procs]


@pytest.mark.parametrize("ahead", [0, 2])
def test_close_at_batch_256_and_224_px_with_answers_in_flight_kills_no_process(big_entries, watched,
                                                                            ahead: int, monkeypatch) -> None:
    import decode_process
    import file_readers

    # the kill past CLOSE_S / REAP_S is what a close that waits ends in; a loaded host may take longer than those
    # to end a process that ends on its own: given time, the exit status alone tells the two apart
    monkeypatch.setattr(file_readers, "REAP_S", 30.0)
    monkeypatch.setattr(decode_process, "CLOSE_S", 30.0)
    ld = twin(big_entries, batch_size=256, image_size=224, workers=2, decode_ahead=ahead)
    pids = [ld._process.pid] if ahead else [p.pid for p in ld._readers._procs]
    procs = [ld._process._proc] if ahead else list(ld._readers._procs)
    next(ld)
    time.sleep(1.0)  # the readers answer the batches asked ahead; the decode process decodes
    ld.close()
    assert not any(alive(pid) for pid in pids)
    # at once: each ended on its own (the decode process on SIGTERM, readers on EPIPE/EOF), none killed past its
    # wait (CLOSE_S, REAP_S), which is what a close that waits ends in; an event, not a wall-clock bound
    assert [p.returncode for p in procs] == [0] * len(procs), [p.returncode for p in procs]


class FailingCudart:
    """CUDA's runtime bindings as torch.cuda.cudart() gives them, refusing every registration."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def cudaHostRegister(self, address: int, size: int, flags: int) -> int:
        self.calls.append("cudaHostRegister")
        return 2  # cudaErrorMemoryAllocation

    def cudaGetErrorString(self, code: int) -> str:
        return {2: "out of memory"}[int(code)]

    def cudaGetLastError(self) -> int:
        self.calls.append("cudaGetLastError")
        return 2

    def cudaHostUnregister(self, address: int) -> int:
        self.calls.append("cudaHostUnregister")
        return 0


def test_a_buffer_cuda_will_not_pin_is_one_clear_error_naming_it_and_cudas_last_error_is_cleared(
        entries, watched) -> None:
    import mmap

    import decode_process
    import device_ops

    cudart = FailingCudart()
    ops = loader_gpu.TorchOps(None, None, cudart=cudart)
    buffer = mmap.mmap(-1, 8192)
    with pytest.raises(device_ops.PinError) as err:
        ops.pin(buffer, "reader buffer 3")
    assert str(err.value) == ("loader gpu: cudaHostRegister could not pin reader buffer 3 (8192 bytes): CUDA error 2 "
                              "(out of memory)")
    assert cudart.calls == ["cudaHostRegister", "cudaGetLastError"] and ops._pinned == {}
    ops.unpin(buffer)  # nothing pinned: nothing to unregister
    assert cudart.calls == ["cudaHostRegister", "cudaGetLastError"]
    buffer.close()
    # a decode process's slot: refused before the child starts
    with pytest.raises(device_ops.PinError, match=r"could not pin decode process slot 0 \(the trainer's mapping\) "
                                                  rf"\({decode_process.slot_bytes((4, 3, 32, 32), 4)} bytes\)"):
        decode_process.DecodeProcess({}, 2, (4, 3, 32, 32), 4, ops)
    # a reader's buffer: raised at its batch
    with twin(entries, decode_ahead=0) as ld:
        ld.ops.cudart = cudart
        with pytest.raises(device_ops.PinError, match=r"could not pin reader buffer 0 \(\d+ bytes\): CUDA error 2 "
                                                      r"\(out of memory\)$"):
            next(ld)


def test_bindings_without_cuda_get_last_error_clear_it_through_the_loaded_libcudart_or_say_they_could_not() -> None:
    """torch's cudart bindings have no cudaGetLastError: libcudart's own is called, as this process mapped it; a
    CPU process maps none, and the error says CUDA's last error was not cleared."""
    import mmap

    import device_ops

    class Bindings(FailingCudart):
        cudaGetLastError = None  # as torch.cuda.cudart(): not bound

    ops = loader_gpu.TorchOps(None, None, cudart=Bindings())
    buffer = mmap.mmap(-1, 4096)
    with pytest.raises(device_ops.PinError) as err:
        ops.pin(buffer, "reader buffer 0")
    buffer.close()
    assert str(err.value) == ("loader gpu: cudaHostRegister could not pin reader buffer 0 (4096 bytes): CUDA error 2 "
                              "(out of memory); CUDA's last error not cleared (OSError: no libcudart.so mapped in "
                              "this process)")


def test_a_pinned_buffer_is_registered_once_and_unregistered_at_its_address() -> None:
    import mmap

    class Cudart(FailingCudart):
        def cudaHostRegister(self, address: int, size: int, flags: int) -> int:
            self.calls.append(f"register {address} {size}")
            return 0

        def cudaHostUnregister(self, address: int) -> int:
            self.calls.append(f"unregister {address}")
            return 0

    ops = loader_gpu.TorchOps(None, None, cudart=(cudart := Cudart()))
    buffer = mmap.mmap(-1, 4096)
    ops.pin(buffer, "slot")
    ops.pin(buffer, "slot")
    address = int(cudart.calls[0].split()[1])
    ops.unpin(buffer)
    assert cudart.calls == [f"register {address} 4096", f"unregister {address}"]
    buffer.close()


def test_the_decode_process_runs_with_the_trainers_float32_math(entries, watched) -> None:
    """TF32 and the matmul precision set in the trainer (not the defaults a new process starts with) are the
    decode process's too."""
    import torch

    before = loader_gpu.TorchOps(None, None).math()
    try:
        torch.set_float32_matmul_precision("medium")  # TF32 matmuls (allow_tf32 reads True)
        torch.backends.cudnn.allow_tf32 = False
        trainer = loader_gpu.TorchOps(None, None).math()
        assert trainer == {"matmul_tf32": True, "cudnn_tf32": False, "matmul_precision": "medium"} != before
        with twin(entries, decode_ahead=1) as ld:
            assert ld._process.math == trainer
        torch.set_float32_matmul_precision("highest")  # TF32 off for matmuls
        torch.backends.cudnn.allow_tf32 = True
        with twin(entries, decode_ahead=1) as ld:
            assert ld._process.math == {"matmul_tf32": False, "cudnn_tf32": True, "matmul_precision": "highest"}
    finally:
        loader_gpu.TorchOps(None, None).set_math(before)


SIZES_FIRST = '''
import os

import device_ops


class SizesFirst(device_ops.PillowDecoder):
    """Pillow, made only once the size table exists (its cache beside the list)."""

    def __init__(self, ops):
        cache = os.environ["KIT_TEST_SIZE_CACHE"]
        assert os.path.exists(cache), f"the decoder was made before the size table {cache}"
        super().__init__(ops)
'''


@pytest.mark.parametrize("ahead", [0, 2])
def test_the_size_table_is_made_before_the_decoder_starts(entries, tmp_path: Path, monkeypatch, watched,
                                                          ahead: int) -> None:
    """The size table's pool forks: it must come before the decoder starts CUDA, in the decode process too."""
    (tmp_path / "sizes_first.py").write_text(SIZES_FIRST)
    monkeypatch.syspath_prepend(str(tmp_path))
    listing = tmp_path / "train_list.txt"
    listing.write_text("".join(f"{path} {label}\n" for path, label in entries))
    monkeypatch.setenv("KIT_TEST_SIZE_CACHE", str(listing) + ".kit-sizes.npz")
    with twin(data.load_list(listing, allow_outside_root=True), decode_ahead=ahead,
              decoder="sizes_first:SizesFirst") as ld:
        assert ld.decoder == "pillow"
        next(ld)


def rotated_jpeg(path: Path, width: int = 64, height: int = 40) -> None:
    """A WIDTH x HEIGHT JPEG whose EXIF says: rotate 90 degrees to show it (orientation 6)."""
    from PIL import Image

    rng = np.random.default_rng(1)
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8)).save(path, "JPEG", exif=exif)


def test_a_jpeg_with_exif_orientation_decodes_to_the_shape_its_header_says(tmp_path: Path, watched) -> None:
    """nvImageCodec applies EXIF orientation by default: told not to, it decodes a rotated photo to the size
    table's shape, as Pillow (the twin) does; through nvImageCodec's CPU backend (libjpeg-turbo), the same calls as
    on a GPU, and through the decode process."""
    from PIL import Image

    for k in range(4):
        rotated_jpeg(tmp_path / f"r{k}.jpg", 64 + 8 * k, 40)
    listing = tmp_path / "train_list.txt"
    listing.write_text("".join(f"r{k}.jpg {k % 2}\n" for k in range(4)))
    entries = data.load_list(listing)
    with Image.open(tmp_path / "r0.jpg") as img:
        assert img.size == (64, 40) and img.getexif()[0x0112] == 6
    ops = loader_gpu.TorchOps(None, None)
    nv = loader_gpu.NvImageCodecDecoder(ops)
    assert nv.params.apply_exif_orientation is False
    files = [ops.torch.from_numpy(np.frombuffer(bytearray((tmp_path / f"r{k}.jpg").read_bytes()), np.uint8)) for k in range(4)]
    got = nv.decode(files, None)
    assert [tuple(t.shape) for t in got] == [(3, 40, 64 + 8 * k) for k in range(4)]
    want = loader_gpu.PillowDecoder(ops).decode(files, None)
    for a, b in zip(got, want, strict=True):  # both libjpeg-turbo
        assert np.abs(a.numpy().astype(int) - b.numpy()).max() <= 2
    batches = {}
    for decoder in ("torchvision", "device_ops:NvImageCodecDecoder"):  # the twin's Pillow, nvImageCodec's CPU backend
        with twin(entries, batch_size=4, image_size=32, decode_ahead=1, decoder=decoder) as ld:
            batches[decoder] = numpy(next(ld))
    assert batches["device_ops:NvImageCodecDecoder"][0].shape == (4, 3, 32, 32)
    diff = grey_levels(*(b[0] for b in batches.values()), False)
    assert diff.max() <= 3, diff.max()


def test_the_decode_process_seconds_per_phase_cover_its_wall_time(entries, watched) -> None:
    """stats(): seconds reading, decoding, cropping and resizing, copying back and waiting for a slot, which sum
    to the decode process's wall time within 10%; a slow consumer shows as the process waiting for slots (the
    consumer's step taken only once every slot is full, so that whole step is the process's wait, however loaded
    the host)."""
    with twin(entries, batch_size=8, image_size=64, decode_ahead=2) as ld:
        for _ in range(5):
            next(ld)
            wait_until(lambda: settled(ld) == 3, 120)  # every slot full: the process can only wait now
            time.sleep(0.6)  # the consumer's training step
        ld._process.ready()
        stats = ld.stats()
    phases, wall = stats["phases_s"], stats["process_s"]
    assert list(phases) == ["read", "decode", "crop_resize", "copy_back", "slot_wait"]
    assert all(phases[k] > 0 for k in phases) and wall > 0.5, stats
    assert sum(phases.values()) == pytest.approx(wall, rel=0.10), stats
    # the stats come with each batch the process hands over: the waits before the last two batches (the consumer's
    # second and third steps) are in them whole, later ones not yet; a loaded host only lengthens them
    assert phases["slot_wait"] >= 2 * 0.6 * 0.9, stats
    with twin(entries, batch_size=8, image_size=64, decode_ahead=0) as inline:
        assert inline.stats()["process_s"] == 0 and sum(inline.stats()["phases_s"].values()) == 0
        for _ in range(2):
            next(inline)
        stats = inline.stats()
    assert stats["decoded_batches"] == 2 and stats["phases_s"]["copy_back"] == stats["phases_s"]["slot_wait"] == 0
    assert min(stats["phases_s"][k] for k in ("read", "decode", "crop_resize")) > 0
    assert sum(stats["phases_s"].values()) == pytest.approx(stats["process_s"], rel=0.10)
