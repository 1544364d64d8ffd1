#!/usr/bin/env python3
"""Write a small image-classification dataset of real JPEG files in the layout PaddlePaddle/models' ImageNet reader
reads (PaddleCV/image_classification/reader.py: <data_dir>/train_list.txt, lines '<path relative to data_dir> <label>',
each file opened by cv2.imread): NOT part of any program; run by run_paddle_models18.py with the program's Python (3.7).

    python make_jpegs.py DATA_DIR --images 120 --size 256 --classes 1000 [--seed 0]

Each image is smooth random colour (a few random low-frequency waves per channel plus noise), encoded by Pillow at
quality 90, so the reader decodes, crops and resizes a genuine JPEG of SIZE x SIZE pixels; labels are drawn uniformly
from 0..CLASSES-1. The same seed writes the same files.
"""

import argparse
import os

import numpy as np
from PIL import Image


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("data_dir")
    p.add_argument("--images", type=int, default=120)
    p.add_argument("--size", type=int, default=256)
    p.add_argument("--classes", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    rng = np.random.RandomState(args.seed)
    train = os.path.join(args.data_dir, "train")
    os.makedirs(train, exist_ok=True)
    y, x = np.mgrid[0:args.size, 0:args.size] / float(args.size)
    lines = []
    for i in range(args.images):
        channels = []
        for _ in range(3):
            wave = sum(np.sin(2 * np.pi * (rng.uniform(0.5, 4) * x * rng.choice([-1, 1]) +
                                           rng.uniform(0.5, 4) * y) + rng.uniform(0, 2 * np.pi))
                       for _ in range(3))
            channels.append(wave / 6.0 + 0.5 + rng.normal(0, 0.05, x.shape))
        pixels = np.clip(np.stack(channels, axis=-1) * 255, 0, 255).astype(np.uint8)
        name = f"train/img_{i:05d}.jpeg"
        Image.fromarray(pixels, "RGB").save(os.path.join(args.data_dir, name), "JPEG", quality=90)
        lines.append(f"{name} {rng.randint(0, args.classes)}\n")
    with open(os.path.join(args.data_dir, "train_list.txt"), "w") as f:
        f.writelines(lines)
    print(f"{args.images} JPEGs of {args.size}x{args.size} in {train}")


if __name__ == "__main__":
    main()
