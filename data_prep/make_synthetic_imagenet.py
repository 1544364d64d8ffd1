#!/usr/bin/env python3
"""Write a small, deterministic ImageNet-shaped tree of real JPEG files and its train list.

    make_synthetic_imagenet.py OUT_DIR [--classes 4] [--images-per-class 8] [--size 96] [--seed 0]
                               [--content shapes|photo] [--all-rgb]

Writes OUT_DIR/train/<wnid>/<wnid>_<n>.JPEG (n = 1..images-per-class) and OUT_DIR/train_list.txt
(made by make_train_list.py's own functions, so lines look like `train/n01440764/n01440764_1.JPEG 0`).
Class directories are the first K real ImageNet-1k wnids in sorted order (50 are built in); past
those, ids `n90000000`, `n90000001`, ... are generated, which sort after every real wnid, so
the labels of the real ones do not move. At most 1000 classes.

Each image (--content shapes, the default) is a class-coloured gradient with a few shapes and
seeded noise; its width and height are drawn independently between 3/4 and 5/4 of --size (N or
WxH), so sizes vary as in real ImageNet. --content photo draws a photo-like texture instead: a
luminance of smooth noise summed over octaves (64 px down to 1 px, the finer slightly heavier:
detail at every scale, as in natural images), smoother chroma, a class tint and a few outlines; at --size 400x350
its JPEGs average ~110 KB (quality 90), as ImageNet's do, so they decode as slowly as real photos
(flat pictures make tiny files that decode unrealistically fast). Like real ImageNet, a few
images are not RGB JPEGs: every 8th image (by its position in the tree) is greyscale and every
16th (offset 11) is CMYK, so a reader must convert; --all-rgb makes every image RGB.
The same arguments give byte-identical files and list with the same Pillow build (JPEG bytes
depend on the libjpeg version). Files are written via a temporary file and a rename; the list
is fsynced. OUT_DIR/train must be new, empty, or hold only files this run writes.

Standard library + Pillow; no import of the kit. Exit 0 on success, 2 on bad arguments or input.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_train_list  # noqa: E402  (sibling tool, found via this file's own directory)

PROG = "make_synthetic_imagenet.py"
MAX_CLASSES = 1000
MAX_IMAGES_PER_CLASS = 10_000
MIN_SIZE, MAX_SIZE = 16, 2048
JPEG_QUALITY = 90
# --content photo's luminance: octaves, their weights scale**beta (< 0: finer detail weighs more), contrast;
# tuned so its JPEGs average ~110 KB at --size 400x350, ImageNet's mean file size
LUMA_SCALES, LUMA_BETA, LUMA_CONTRAST = (64, 32, 16, 8, 4, 2, 1), -0.3, 4.0

# The first 50 ImageNet-1k (ILSVRC2012) wnids in sorted order, i.e. labels 0..49.
REAL_WNIDS = (
    "n01440764", "n01443537", "n01484850", "n01491361", "n01494475",
    "n01496331", "n01498041", "n01514668", "n01514859", "n01518878",
    "n01530575", "n01531178", "n01532829", "n01534433", "n01537544",
    "n01558993", "n01560419", "n01580077", "n01582220", "n01592084",
    "n01601694", "n01608432", "n01614925", "n01616318", "n01622779",
    "n01629819", "n01630670", "n01631663", "n01632458", "n01632777",
    "n01641577", "n01644373", "n01644900", "n01664065", "n01665541",
    "n01667114", "n01667778", "n01669191", "n01675722", "n01677366",
    "n01682714", "n01685808", "n01687978", "n01688243", "n01689811",
    "n01692333", "n01693334", "n01694178", "n01695060", "n01697457",
)  # fmt: skip


class InputError(Exception):
    """Bad arguments or output directory: one line on stderr, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, not usage + error
        print(f"{PROG}: error: {message}", file=sys.stderr)
        sys.exit(2)


def wnids(count: int) -> list[str]:
    """The first COUNT real wnids, then generated `n9xxxxxxx` ids (all sorted)."""
    if not 1 <= count <= MAX_CLASSES:
        raise InputError(f"--classes must be between 1 and {MAX_CLASSES}, got {count}")
    extra = [f"n9{i:07d}" for i in range(max(0, count - len(REAL_WNIDS)))]
    return list(REAL_WNIDS[:count]) + extra


def parse_size(text: str) -> tuple[int, int]:
    """`96` -> (96, 96); `80x64` -> (80, 64) as (width, height)."""
    parts = text.lower().split("x")
    if len(parts) not in (1, 2) or not all(p.isdigit() and p.isascii() for p in parts):
        raise argparse.ArgumentTypeError(f"expected N or WxH (e.g. 96 or 80x64), got {text!r}")
    width, height = (int(parts[0]), int(parts[-1]))
    for side in (width, height):
        if not MIN_SIZE <= side <= MAX_SIZE:
            raise argparse.ArgumentTypeError(f"sides must be between {MIN_SIZE} and {MAX_SIZE}, got {text!r}")
    return width, height


def _bounded_int(name: str, low: int, high: int):
    def convert(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{name} must be between {low} and {high}, got {value}")
        return value

    return convert


def _class_colour(label: int, seed: int) -> tuple[int, int, int]:
    rng = random.Random(f"colour:{seed}:{label}")
    return (rng.randrange(40, 216), rng.randrange(40, 216), rng.randrange(40, 216))


def _octaves(rng: random.Random, width: int, height: int, scales: tuple[int, ...], beta: float, contrast: float):
    """An "L" image: uniform noise drawn on grids SCALES pixels apart, each smoothed up (bicubic) to WIDTH x HEIGHT,
    averaged with weights scale**BETA (0: detail at every scale alike) and stretched by CONTRAST around grey."""
    from PIL import Image

    acc, total = None, 0.0
    for scale in scales:
        w, h = width // scale + 2, height // scale + 2
        layer = Image.frombytes("L", (w, h), rng.randbytes(w * h)).resize((width, height), Image.Resampling.BICUBIC)
        total += scale**beta
        acc = layer if acc is None else Image.blend(acc, layer, scale**beta / total)  # the running weighted mean
    return acc.point(lambda v: min(255, max(0, round((v - 128) * contrast + 128))))


def _shapes(rng: random.Random, width: int, height: int, colour: tuple[int, int, int]):
    """A class-coloured gradient with a few filled shapes and 15% seeded noise."""
    from PIL import Image, ImageDraw

    # class colour fading towards a per-image tint, left to right
    tint = tuple(rng.randrange(256) for _ in range(3))
    ramp = Image.linear_gradient("L").rotate(90).resize((width, height), Image.Resampling.BILINEAR)
    img = Image.composite(Image.new("RGB", (width, height), tint), Image.new("RGB", (width, height), colour), ramp)
    draw = ImageDraw.Draw(img)
    for _ in range(rng.randint(2, 5)):
        x0, y0 = rng.randrange(width), rng.randrange(height)
        x1, y1 = x0 + rng.randint(4, max(5, width // 2)), y0 + rng.randint(4, max(5, height // 2))
        fill = tuple(min(255, max(0, c + rng.randint(-60, 60))) for c in colour)
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x0, y0, x1, y1), fill=fill)
    noise = Image.frombytes("RGB", (width, height), rng.randbytes(width * height * 3))
    return Image.blend(img, noise, 0.15)


def _photo(rng: random.Random, width: int, height: int, colour: tuple[int, int, int]):
    """Photo-like texture: detailed luminance, smooth chroma, a class tint and a few outlines."""
    from PIL import Image, ImageDraw

    luma = _octaves(rng, width, height, LUMA_SCALES, LUMA_BETA, LUMA_CONTRAST)
    chroma = [_octaves(rng, width, height, (96, 48, 24), 1.0, 1.5) for _ in range(2)]
    img = Image.merge("YCbCr", (luma, *chroma)).convert("RGB")
    img = Image.blend(img, Image.new("RGB", (width, height), colour), 0.25)
    draw = ImageDraw.Draw(img)
    for _ in range(rng.randint(2, 5)):
        x0, y0 = rng.randrange(width), rng.randrange(height)
        x1, y1 = x0 + rng.randint(4, max(5, width // 2)), y0 + rng.randint(4, max(5, height // 2))
        outline = tuple(rng.randrange(256) for _ in range(3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)((x0, y0, x1, y1), outline=outline,
                                                                  width=rng.randint(1, 4))
    return img


CONTENTS = {"shapes": _shapes, "photo": _photo}


def render_jpeg(seed: int, label: int, wnid: str, number: int, position: int, size: tuple[int, int],
                content: str = "shapes", all_rgb: bool = False) -> bytes:
    """Encode one deterministic synthetic image (pure: same arguments, same bytes)."""
    rng = random.Random(f"image:{seed}:{wnid}:{number}")  # str seeds are hashed with sha512: stable
    base_w, base_h = size
    width = max(MIN_SIZE // 2, round(base_w * rng.uniform(0.75, 1.25)))
    height = max(MIN_SIZE // 2, round(base_h * rng.uniform(0.75, 1.25)))
    img = CONTENTS[content](rng, width, height, _class_colour(label, seed))

    if not all_rgb and position % 8 == 7:
        img = img.convert("L")
    elif not all_rgb and position % 16 == 11:
        img = img.convert("CMYK")
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=JPEG_QUALITY)
    return buf.getvalue()


def planned_files(classes: list[str], per_class: int) -> dict[str, list[str]]:
    return {wnid: [f"{wnid}_{n}.JPEG" for n in range(1, per_class + 1)] for wnid in classes}


_NOT_OURS = "which this run would not write; use a new or empty OUT_DIR"


def check_out_dir(out_dir: Path, plan: dict[str, list[str]]) -> None:
    """Refuse an OUT_DIR whose train/ holds anything this run would not write (it would enter the list)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: exists and is not a directory")
    train = out_dir / "train"
    if not train.exists():
        return
    if not train.is_dir():
        raise InputError(f"{train}: exists and is not a directory")
    for entry in sorted(os.scandir(train), key=lambda e: e.name):
        names = plan.get(entry.name)
        if names is None or not entry.is_dir(follow_symlinks=False):
            raise InputError(f"{train} holds {entry.name!r}, {_NOT_OURS}")
        wanted = set(names)
        for sub in sorted(os.scandir(entry.path), key=lambda e: e.name):
            if sub.name not in wanted or not sub.is_file(follow_symlinks=False):
                raise InputError(f"{train / entry.name} holds {sub.name!r}, {_NOT_OURS}")


def generate(out_dir: Path, classes: int, per_class: int, size: tuple[int, int], seed: int,
             content: str = "shapes", all_rgb: bool = False) -> dict:
    """Write the tree and the list; return a summary (raises InputError / OSError)."""
    class_ids = wnids(classes)
    plan = planned_files(class_ids, per_class)
    check_out_dir(out_dir, plan)
    train = out_dir / "train"
    total_bytes = 0
    position = 0
    for label, wnid in enumerate(class_ids):
        (train / wnid).mkdir(parents=True, exist_ok=True)
        for number, name in enumerate(plan[wnid], start=1):
            data = render_jpeg(seed, label, wnid, number, position, size, content, all_rgb)
            make_train_list.write_atomically(train / wnid / name, data, fsync=False)  # the list is fsynced
            total_bytes += len(data)
            position += 1

    lines, counts = make_train_list.build_lines(train)
    if counts["images"] != classes * per_class or counts["classes"] != classes:
        raise InputError(f"{train}: expected {classes * per_class} images in {classes} classes, found {counts}")
    list_data = "".join(line + "\n" for line in lines).encode("utf-8")
    list_path = out_dir / "train_list.txt"
    make_train_list.write_atomically(list_path, list_data)
    return {
        "images": counts["images"],
        "classes": counts["classes"],
        "bytes": total_bytes,
        "train_dir": train,
        "list": list_path,
        "sha256": hashlib.sha256(list_data).hexdigest(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir", type=Path, help="dataset root to write (train/ and train_list.txt)")
    parser.add_argument(
        "--classes", type=_bounded_int("--classes", 1, MAX_CLASSES), default=4, help="number of classes (default 4)"
    )
    parser.add_argument(
        "--images-per-class",
        type=_bounded_int("--images-per-class", 1, MAX_IMAGES_PER_CLASS),
        default=8,
        help="images in each class (default 8)",
    )
    parser.add_argument(
        "--size", type=parse_size, default=(96, 96), help="nominal image size N or WxH; each side varies 0.75-1.25x"
    )
    parser.add_argument("--seed", type=_bounded_int("--seed", 0, 2**63 - 1), default=0, help="content seed (default 0)")
    parser.add_argument("--content", choices=tuple(CONTENTS), default="shapes",
                        help="shapes: gradient + shapes (small files); photo: photo-like texture (~110 KB at 400x350)")
    parser.add_argument("--all-rgb", action="store_true", help="every image RGB (no greyscale or CMYK ones)")
    args = parser.parse_args(argv)

    try:
        import PIL  # noqa: F401
    except ImportError:
        print(f"{PROG}: error: Pillow is required (pip install Pillow)", file=sys.stderr)
        return 2
    try:
        summary = generate(args.out_dir, args.classes, args.images_per_class, args.size, args.seed, args.content,
                           args.all_rgb)
    except (InputError, make_train_list.InputError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"{PROG}: error: cannot write under {args.out_dir}: {exc}", file=sys.stderr)
        return 2

    print(
        f"wrote {summary['images']} images in {summary['classes']} classes "
        f"({summary['bytes']} bytes of JPEG) under {summary['train_dir']}"
    )
    print(f"wrote {summary['list']}: {summary['images']} images, {summary['classes']} classes")
    print(f"sha256 {summary['sha256']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
