"""PURE: docker/pins.yaml (the one table of every version the images carry) -> image specs -> Dockerfiles.

    pins = load_pins()                      # validated; errors name file:line:key
    for spec in pins.specs():               # cpu, paddle/v100, pytorch/a100, ...
        text = render(spec, pins)           # the exact Dockerfile text; docker/<path> must equal it
    drift(pins, repo_root)                  # [] when every rendered file is up to date

Each image proves its pins while it is built: its last RUN calls scripts/verify_pins.py with the
versions the pins promise, and that script compares them with what the libraries report.
No docker, network or clock here (kit.images.build and kit.images.deliver do the rest).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from kit import REPO_ROOT
from kit.config.imagekeys import FRAMEWORK_KEY, PINS_FILE, image_key, image_name
from kit.core.files import SCHEMA_VERSIONS
from kit.core.yamlio import ConfigError, LineDict, load_yaml, optional, require

SCHEMA_VERSION = SCHEMA_VERSIONS["pins.yaml"]
GENERATIONS = ("v100", "a100", "h100")
# a seed environment: the stack one seed report ran (images.<name>.generations.seed000 -> image key paddle/seed000);
# chosen by a suite or case `image:`, never by the suite's generation
ENVIRONMENT_RE = re.compile(r"^seed[0-9]{3}$")
# what verify_pins.py can read from the libraries themselves (paddle_commit: paddle.version.commit, for a Paddle
# built at a commit, as seed 000 ran it)
VERSION_KEYS = ("ubuntu", "python", "cuda", "cudnn", "nccl", "dali", "paddle", "paddle_commit", "torch", "tensorflow",
                "mxnet")
IMAGE_NAMES = tuple(FRAMEWORK_KEY)
LABEL_PREFIX = "io.kit.pins"
HARNESS_DIR = "/opt/kit/harness"
VERIFY_SCRIPT = "/opt/kit/verify_pins.py"
VENV = "/opt/venv"
VERIFIED_RECORD = "/opt/kit/verified-pins.json"  # what the libraries reported when the image was built
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
REF_RE = re.compile(r"^[a-z0-9][a-z0-9._/:-]*$")
TAG_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
PKG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+~:_-]*$")
TREE_PATH_RE = re.compile(r"^[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*$")
URL_RE = re.compile(r"^https://[A-Za-z0-9._~:/?#@!$&'()*+,;=%-]+$")


@dataclass(frozen=True)
class ModelCode:
    name: str
    repo: str
    commit: str
    path: str
    source: str
    trees: tuple[tuple[str, str], ...] = ()  # (path, git tree at the commit) of each path the kit runs
    saved_programs: tuple[SavedProgramPin, ...] = ()  # what its code downloads at run time, staged by the kit


@dataclass(frozen=True)
class SavedProgramPin:
    name: str
    url: str  # where the program itself fetches it
    sha256: str | None  # of the archive; None: not recorded yet (the operator states it when staging)
    source: str


@dataclass(frozen=True)
class Base:
    image: str
    tag: str
    digest: str | None
    source: str

    @property
    def ref(self) -> str:
        return f"{self.image}:{self.tag}" + (f"@{self.digest}" if self.digest else "")


@dataclass(frozen=True)
class ImageSpec:
    name: str  # cpu, paddle, pytorch, tensorflow, mxnet
    generation: str | None  # v100/a100/h100 or a seed environment (seed000, ...); None for the cpu image
    base: Base
    versions: dict[str, str]  # VERSION_KEYS -> the version the library must report
    source: str
    description: str = ""
    note: str = ""
    sources: dict[str, str] = field(default_factory=dict)
    apt: dict[str, str] = field(default_factory=dict)
    pip: dict[str, str] = field(default_factory=dict)
    pip_index: str | None = None
    model_code: tuple[ModelCode, ...] = ()

    @property
    def key(self) -> str:
        return self.name if self.generation is None else f"{self.name}/{self.generation}"

    @property
    def dockerfile(self) -> Path:
        """Relative to the repository root."""
        parts = ["docker", self.name] + ([self.generation] if self.generation else []) + ["Dockerfile"]
        return Path(*parts)

    @property
    def title(self) -> str:
        return "kit-" + self.key.replace("/", "-")

    def pins_hash(self) -> str:
        """sha256 over every pinned value of this image (canonical JSON)."""
        data = {
            "name": self.name, "generation": self.generation, "base": self.base.__dict__,
            "versions": self.versions, "apt": self.apt, "pip": self.pip, "pip_index": self.pip_index,
            "model_code": [{k: v for k, v in m.__dict__.items() if k not in ("trees", "saved_programs")}
                           for m in self.model_code],
        }  # fmt: skip
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class Pins:
    path: Path
    model_code: dict[str, ModelCode]
    images: list[ImageSpec]

    def specs(self) -> list[ImageSpec]:
        return list(self.images)

    def get(self, key: str) -> ImageSpec:
        for spec in self.images:
            if spec.key == key:
                return spec
        raise KeyError(f"no image {key!r} in {self.path} (have: {', '.join(s.key for s in self.images)})")

    def for_case(self, framework: str, hardware: str, generation: str | None, image: str | None = None) -> ImageSpec:
        """The image a case runs in: the one its `image:` names (image_key), else the cpu image on CPU suites, else
        the framework's image of that generation. KeyError (its message says why) when there is none."""
        if image:
            return self.get(self.image_key(framework, image))
        if hardware == "cpu":
            return self.get("cpu")
        return self.get(f"{image_name(framework)}/{generation}")

    def image_key(self, framework: str, image: str) -> str:
        """A suite's `image:` -> the pins key (kit.config.imagekeys.image_key over these images)."""
        return image_key(framework, image, [s.key for s in self.images], self.path)


# ---- loading ----------------------------------------------------------------------------------


def current_pins() -> Pins:
    """docker/pins.yaml as it is now: read again only when the file changed (suite loading and planning ask often)."""
    stamp = PINS_FILE.stat().st_mtime_ns
    if _READ.get("stamp") != stamp:
        _READ.update(stamp=stamp, pins=load_pins(PINS_FILE))
    return _READ["pins"]


_READ: dict = {}


def pin_of(code: str) -> str:
    """The commit docker/pins.yaml pins for a model_code key (what the images check out; what kit verify holds a
    published program's run to)."""
    return current_pins().model_code[code].commit


def load_pins(path: str | Path = PINS_FILE) -> Pins:
    path = Path(path)
    doc = load_yaml(path)
    if not isinstance(doc, LineDict):
        raise ConfigError(path, "expected a mapping at the top level")
    _only(doc, {"schema_version", "model_code", "images"}, path)
    version = require(doc, "schema_version", int, path)
    if version != SCHEMA_VERSION:
        raise ConfigError(path, f"schema_version {version} is not supported (this kit reads {SCHEMA_VERSION})",
                          doc.line_of("schema_version"), "schema_version")
    code = {name: _model_code(name, entry, path) for name, entry in _mapping(doc, "model_code", path).items()}
    images: list[ImageSpec] = []
    for name, entry in _mapping(doc, "images", path).items():
        if name not in IMAGE_NAMES:
            raise ConfigError(path, f"unknown image (known: {', '.join(IMAGE_NAMES)})", doc["images"].line_of(name),
                              f"images.{name}")
        if not isinstance(entry, LineDict):
            raise ConfigError(path, "expected a mapping", doc["images"].line_of(name), f"images.{name}")
        if name == "cpu":
            images.append(_spec(name, None, entry, {}, code, path))
            continue
        _only(entry, {"description", "generations"}, path)
        shared = {"description": optional(entry, "description", str, path, "")}
        gens = _mapping(entry, "generations", path)
        for gen, gentry in gens.items():
            if gen not in GENERATIONS and not (isinstance(gen, str) and ENVIRONMENT_RE.match(gen)):
                raise ConfigError(path, f"unknown generation (known: {', '.join(GENERATIONS)}, or a seed environment "
                                  "seedNNN)", gens.line_of(gen), f"images.{name}.generations.{gen}")
            images.append(_spec(name, gen, gentry, shared, code, path))
    return Pins(path, code, images)


def _only(entry: LineDict, known: set[str], path: Path) -> None:
    for key in entry:
        if key not in known:
            raise ConfigError(path, f"unknown key (known: {', '.join(sorted(known))})", entry.line_of(key), str(key))


def _mapping(entry: LineDict, key: str, path: Path) -> LineDict:
    value = require(entry, key, dict, path)
    if not value:
        raise ConfigError(path, "must not be empty", entry.line_of(key), key)
    return value


def _str(entry: LineDict, key: str, path: Path, pattern: re.Pattern | None = None, where: str = "",
         required: bool = True) -> str | None:
    full = f"{where}.{key}" if where else key
    if key not in entry or entry[key] is None:
        if required:
            raise ConfigError(path, "missing required key", entry.line, full)
        return None
    value = entry[key]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        raw = _written(path, entry.line_of(key), key) or str(value)
        raise ConfigError(path, f"write versions as quoted strings: '{raw}' (YAML reads the unquoted {raw} as the "
                          f"number {value})", entry.line_of(key), full)
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(path, "expected a non-empty string", entry.line_of(key), full)
    if pattern is not None and not pattern.match(value):
        raise ConfigError(path, f"{value!r} is not valid here", entry.line_of(key), full)
    return value


def _written(path: Path, line: int, key: str) -> str | None:
    """The value of `key: value` exactly as the file spells it on that line (for messages)."""
    try:
        text = path.read_text().splitlines()[line - 1]
    except (OSError, IndexError):
        return None
    head, sep, rest = text.partition(":")
    if not sep or head.strip().strip("'\"") != key:
        return None
    return rest.split("#", 1)[0].strip().rstrip(",}").strip() or None


def _model_code(name: str, entry, path: Path) -> ModelCode:
    where = f"model_code.{name}"
    if not isinstance(entry, LineDict):
        raise ConfigError(path, "expected a mapping", None, where)
    _only(entry, {"repo", "commit", "path", "source", "trees", "saved_programs"}, path)
    commit = _str(entry, "commit", path, where=where)
    if not COMMIT_RE.match(commit):
        raise ConfigError(path, "a commit is the full 40-hex SHA-1 (no branch, tag or short SHA)",
                          entry.line_of("commit"), f"{where}.commit")
    trees = optional(entry, "trees", dict, path, {}) or {}
    for key in trees:
        if not isinstance(key, str) or not TREE_PATH_RE.match(key) or {".", ".."} & set(key.split("/")):
            raise ConfigError(path, f"{key!r} is not a relative path", trees.line_of(key), f"{where}.trees")
        _str(trees, key, path, COMMIT_RE, f"{where}.trees")
    return ModelCode(name, _str(entry, "repo", path, URL_RE, where), commit,
                     _str(entry, "path", path, re.compile(r"^/[A-Za-z0-9._/-]+$"), where),
                     _str(entry, "source", path, where=where), tuple((k, trees[k]) for k in trees),
                     _saved_programs(entry, path, where))


def _saved_programs(entry: LineDict, path: Path, where: str) -> tuple[SavedProgramPin, ...]:
    listed = optional(entry, "saved_programs", dict, path, {}) or {}
    out = []
    for name in listed:
        at = f"{where}.saved_programs.{name}"
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name in (".", ".."):
            raise ConfigError(path, f"{name!r} is not a folder name", listed.line_of(name), at)
        pin = listed[name]
        if not isinstance(pin, LineDict):
            raise ConfigError(path, "expected a mapping", listed.line_of(name), at)
        _only(pin, {"url", "sha256", "source"}, path)
        out.append(SavedProgramPin(name, _str(pin, "url", path, URL_RE, at),
                                   _str(pin, "sha256", path, re.compile(r"^[0-9a-f]{64}$"), at, required=False),
                                   _str(pin, "source", path, where=at)))
    return tuple(out)


def _str_map(entry: LineDict, key: str, path: Path, where: str, key_re: re.Pattern) -> dict[str, str]:
    value = optional(entry, key, dict, path, {}) or {}
    out = {}
    for k in value:
        if not isinstance(k, str) or not key_re.match(k):
            raise ConfigError(path, f"{k!r} is not a valid name", value.line_of(k), f"{where}.{key}")
        out[k] = _str(value, k, path, VERSION_RE, f"{where}.{key}")
    return out


def _spec(name: str, gen: str | None, entry, shared: dict, code: dict[str, ModelCode], path: Path) -> ImageSpec:
    where = f"images.{name}" + (f".generations.{gen}" if gen else "")
    if not isinstance(entry, LineDict):
        raise ConfigError(path, "expected a mapping", None, where)
    known = {"base", "versions", "source", "sources", "note", "apt", "pip", "pip_index", "model_code"}
    _only(entry, known | ({"description"} if gen is None else set()), path)
    base_entry = require(entry, "base", dict, path)
    _only(base_entry, {"image", "tag", "digest", "source"}, path)
    base = Base(_str(base_entry, "image", path, REF_RE, f"{where}.base"),
                _str(base_entry, "tag", path, TAG_RE, f"{where}.base"),
                _str(base_entry, "digest", path, DIGEST_RE, f"{where}.base", required=False),
                _str(base_entry, "source", path, where=f"{where}.base"))
    versions_entry = require(entry, "versions", dict, path)
    versions = {}
    for key in versions_entry:
        if key not in VERSION_KEYS:
            raise ConfigError(path, f"unknown version key (known: {', '.join(VERSION_KEYS)})",
                              versions_entry.line_of(key), f"{where}.versions.{key}")
        value = _str(versions_entry, key, path, VERSION_RE, f"{where}.versions", required=False)
        if value is not None:  # null: not published anywhere we could read; not checked
            versions[key] = value
    fw = FRAMEWORK_KEY[name]
    if fw and fw not in versions and not (fw == "paddle" and "paddle_commit" in versions):
        raise ConfigError(path, f"the {name} image must pin {fw}", versions_entry.line, f"{where}.versions.{fw}")
    names = optional(entry, "model_code", list, path, [])
    for n in names:
        if n not in code:
            raise ConfigError(path, f"{n!r} is not in model_code (have: {', '.join(code)})",
                              entry.line_of("model_code"), f"{where}.model_code")
    sources = optional(entry, "sources", dict, path, {}) or {}
    return ImageSpec(
        name=name, generation=gen, base=base, versions=versions,
        source=_str(entry, "source", path, where=where),
        description=optional(entry, "description", str, path, shared.get("description", "")) or "",
        note=optional(entry, "note", (str, type(None)), path, "") or "",
        sources={str(k): str(v) for k, v in sources.items()},
        apt=_str_map(entry, "apt", path, where, PKG_RE),
        pip=_str_map(entry, "pip", path, where, PKG_RE),
        pip_index=_str(entry, "pip_index", path, URL_RE, where, required=False),
        model_code=tuple(code[n] for n in names),
    )  # fmt: skip


# ---- rendering --------------------------------------------------------------------------------


def labels(spec: ImageSpec) -> dict[str, str]:
    out = {
        "org.opencontainers.image.title": spec.title,
        "org.opencontainers.image.description": spec.description or spec.title,
        "org.opencontainers.image.version": spec.pins_hash()[:12],
        "org.opencontainers.image.base.name": f"{spec.base.image}:{spec.base.tag}",
    }
    if spec.base.digest:
        out["org.opencontainers.image.base.digest"] = spec.base.digest
    out[f"{LABEL_PREFIX}.hash"] = spec.pins_hash()
    out[f"{LABEL_PREFIX}.image"] = spec.key
    for key, value in spec.versions.items():
        out[f"{LABEL_PREFIX}.{key}"] = value
    for dist, value in spec.pip.items():
        out[f"{LABEL_PREFIX}.pip.{dist.lower()}"] = value
    for m in spec.model_code:
        out[f"{LABEL_PREFIX}.model.{m.name}"] = f"{m.repo}@{m.commit}"
    return out


def verify_args(spec: ImageSpec) -> list[str]:
    args = [f"--expect {k}={v}" for k, v in spec.versions.items()]
    args += [f"--dist {d}=={v}" for d, v in spec.pip.items()]
    args += [f"--git {m.path}={m.commit}" for m in spec.model_code]
    return args


def _run(lines: list[str]) -> str:
    return "RUN " + " \\\n && ".join(lines)


def _continued(first: str, items: list[str], indent: str = "    ") -> str:
    return " \\\n".join([first] + [indent + i for i in items])


def _apt_install(apt: dict[str, str]) -> str:
    pkgs = " ".join(f"{p}={v}" for p, v in apt.items())
    return _run([
        "apt-get update",
        f"apt-get install -y --no-install-recommends {pkgs}",
        "rm -rf /var/lib/apt/lists/*",
    ])  # fmt: skip


def _clone(m: ModelCode) -> list[str]:
    return [
        f"git init -q {m.path}",
        f"git -C {m.path} fetch -q --depth 1 {m.repo} {m.commit}",
        f"git -C {m.path} checkout -q --detach FETCH_HEAD",
    ]  # fmt: skip


def render(spec: ImageSpec, pins: Pins | None = None) -> str:
    """The Dockerfile of one image, byte for byte."""
    where = f"images.{spec.name}" + (f".generations.{spec.generation}" if spec.generation else "")
    head = [
        f"# {spec.title}: rendered by `kit images render` from docker/pins.yaml ({where}).",
        "# Do not edit: change the pins, then run `kit images render`. Build: kit images build "
        + spec.key + " (the build context is assembled by kit/images/).",
    ]
    if spec.note:
        head.append(f"# Read the note on these pins in docker/pins.yaml ({where}.note) before trusting a result.")
    body = _render_cpu(spec) if spec.name == "cpu" else _render_gpu(spec)
    return "\n".join(head) + "\n" + body


def _labels_block(spec: ImageSpec) -> str:
    """Last but WORKDIR: the labels name every pin, so above the installs they would make any pin change (one
    that only the self-check reads too) rebuild every layer below them."""
    items = [f"{k}={json.dumps(v)}" for k, v in labels(spec).items()]
    return _continued(f"LABEL {items[0]}", items[1:], "      ")


def _verify_block(spec: ImageSpec, python: str) -> str:
    return _continued(f"RUN {python} {VERIFY_SCRIPT}", [*verify_args(spec), f"--record {VERIFIED_RECORD}"])


def _render_cpu(spec: ImageSpec) -> str:
    build_apt = dict(spec.apt)
    runtime_apt = {p: v for p, v in spec.apt.items() if p != "python3-venv"}
    pip_pkgs = " ".join(f"{d}=={v}" for d, v in spec.pip.items())
    parts = [
        f"FROM {spec.base.ref} AS build",
        'SHELL ["/bin/bash", "-o", "pipefail", "-c"]',
        _apt_install(build_apt),
        "# wheels/: the pinned wheels and their dependencies, downloaded by kit/images/ (no index at build time)",
        "COPY wheels/ /tmp/wheels/",
        _run([f"python3 -m venv {VENV}",
              f"{VENV}/bin/pip install --no-cache-dir --no-index --find-links /tmp/wheels {pip_pkgs}"]),
        "",
        f"FROM {spec.base.ref}",
        'SHELL ["/bin/bash", "-o", "pipefail", "-c"]',
        _apt_install(runtime_apt),
        f"COPY --from=build {VENV} {VENV}",
        f"COPY scripts/harness/ {HARNESS_DIR}/",
        f"COPY scripts/verify_pins.py {VERIFY_SCRIPT}",
        f"ENV PATH={VENV}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin PYTHONUNBUFFERED=1",
        _verify_block(spec, "python"),
        _labels_block(spec),
        "WORKDIR /opt/kit",
    ]  # fmt: skip
    return "\n".join(parts) + "\n"


def _render_gpu(spec: ImageSpec) -> str:
    parts = [
        f"FROM {spec.base.ref}",
        'SHELL ["/bin/bash", "-o", "pipefail", "-c"]',
    ]
    if spec.apt:
        parts.append(_apt_install(spec.apt))
    if spec.pip:
        pkgs = " ".join(f"{d}=={v}" for d, v in spec.pip.items())
        index = f" --find-links {spec.pip_index}" if spec.pip_index else ""
        parts.append(f"RUN python -m pip install --no-cache-dir{index} {pkgs}")
    if spec.model_code:
        parts.append(_run([step for m in spec.model_code for step in _clone(m)]))
    parts += [
        f"COPY scripts/harness/ {HARNESS_DIR}/",
        f"COPY scripts/verify_pins.py {VERIFY_SCRIPT}",
        "ENV PYTHONUNBUFFERED=1",
        _verify_block(spec, "python"),
        _labels_block(spec),
        "WORKDIR /opt/kit",
    ]
    return "\n".join(parts) + "\n"


def render_all(pins: Pins) -> dict[Path, str]:
    return {spec.dockerfile: render(spec, pins) for spec in pins.specs()}


def drift(pins: Pins, root: Path = REPO_ROOT) -> list[str]:
    """One line per Dockerfile that differs from its rendering, is missing, or has no pins behind it."""
    expected = render_all(pins)
    problems = []
    for rel, text in sorted(expected.items()):
        path = root / rel
        if not path.is_file():
            problems.append(f"{rel}: missing (run: kit images render)")
        elif path.read_text() != text:
            problems.append(f"{rel}: differs from its rendering of docker/pins.yaml (run: kit images render)")
    for path in sorted((root / "docker").rglob("Dockerfile*")):
        if path.relative_to(root) not in expected:
            problems.append(f"{path.relative_to(root)}: no image in docker/pins.yaml renders it (remove it)")
    return problems


def lock_drift(spec: ImageSpec, lock_text: str, lock_name: str = "requirements.lock") -> list[str]:
    """The cpu image's pip pins must equal the kit's own requirements.lock (one version per package)."""
    locked = {}
    for line in lock_text.splitlines():
        line = line.split("#", 1)[0].strip()
        if "==" in line:
            dist, ver = line.split("==", 1)
            locked[_norm(dist)] = ver.strip()
    out = []
    for dist, ver in spec.pip.items():
        have = locked.get(_norm(dist))
        if have is None:
            out.append(f"images.{spec.key}.pip.{dist}: {dist} is not in {lock_name}")
        elif have != ver:
            out.append(f"images.{spec.key}.pip.{dist}: pinned {ver}, {lock_name} has {have}")
    return out


def _norm(dist: str) -> str:
    return re.sub(r"[-_.]+", "-", dist).lower()


def image_tag(spec: ImageSpec, context_digest: str) -> str:
    """kit/<image>:[<gen>-]<12 hex of the pins and the build context>: same inputs, same tag."""
    h = hashlib.sha256(f"{spec.pins_hash()}\n{context_digest}".encode()).hexdigest()[:12]
    return f"kit/{spec.name}:" + (f"{spec.generation}-" if spec.generation else "") + h


__all__ = ["Base", "ImageSpec", "ModelCode", "Pins", "drift", "image_tag", "labels", "load_pins", "lock_drift",
           "render", "render_all", "verify_args"]
