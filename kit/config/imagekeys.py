"""A suite's `image:` -> a docker/pins.yaml image key, by the names the pins hold (kit.images.spec reads the rest).

    image_key("paddle", "seed001", keys) -> "paddle/seed001"     (a bare generation or seed environment)
    image_key("torch", "pytorch/seed001", keys) -> "pytorch/seed001"
    pinned_keys() -> ["cpu", "paddle/v100", ...]                  (docker/pins.yaml, read again when it changed)
"""

from __future__ import annotations

from kit import REPO_ROOT
from kit.core.yamlio import LineDict, load_yaml

PINS_FILE = REPO_ROOT / "docker" / "pins.yaml"
FRAMEWORK_KEY = {"cpu": None, "paddle": "paddle", "pytorch": "torch", "tensorflow": "tensorflow", "mxnet": "mxnet"}
_READ: dict = {}


def image_name(framework: str) -> str:
    """A suite's framework (paddle, torch, ...) -> its image name (paddle, pytorch, ...)."""
    return {v: k for k, v in FRAMEWORK_KEY.items() if v}[framework]


def image_key(framework: str, image: str, have: list[str], where: object = PINS_FILE) -> str:
    """A full key (paddle/seed000) or a bare generation (seed001 -> <the framework's image>/seed001); KeyError when
    no such image exists or it is another framework's."""
    name = image_name(framework)
    key = image if "/" in image or image == "cpu" else f"{name}/{image}"
    if key not in have:
        mine = ", ".join(k for k in have if k.startswith(f"{name}/")) or "none"
        raise KeyError(f"no image {key!r} in {where} ({framework} images: {mine})")
    owner = key.split("/", 1)[0]
    if owner not in (name, "cpu"):
        raise KeyError(f"image {key!r} is the {owner} image, not {framework}'s ({name}/...)")
    return key


def pinned_keys() -> list[str]:
    """The image keys docker/pins.yaml holds (its `images:` names and their generations), read when it changed."""
    stamp = PINS_FILE.stat().st_mtime_ns
    if _READ.get("stamp") != stamp:
        images = load_yaml(PINS_FILE).get("images") or {}
        keys = []
        for name, entry in images.items():
            generations = entry.get("generations") if isinstance(entry, LineDict) else None
            keys += [f"{name}/{g}" for g in generations] if generations else [name]
        _READ.update(stamp=stamp, keys=keys)
    return _READ["keys"]
