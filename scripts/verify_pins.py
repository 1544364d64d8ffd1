#!/usr/bin/env python3
"""An image's self-check: compare pinned versions with what the libraries inside really report.

    verify_pins.py --expect python=3.11.2 --expect cuda=11.1 --expect cudnn=8.0.5 \
                   --dist torch==2.13.0 --git /opt/models/PaddleClas=<40-hex commit> [--record FILE]

Run as the last build step of every kit image (rendered from docker/pins.yaml): any mismatch,
or a version that cannot be read, exits 1 and fails the build. Keys for --expect:
  ubuntu                 VERSION_ID in /etc/os-release (ID must be ubuntu)
  python                 platform.python_version()
  cuda                   libcudart cudaRuntimeGetVersion() (else the framework's build info)
  cudnn                  libcudnn cudnnGetVersion() (else the framework's report)
  nccl                   libnccl ncclGetVersion() (else torch.cuda.nccl.version())
  dali                   nvidia.dali.__version__
  paddle torch tensorflow mxnet   <module>.__version__
  paddle_commit          paddle.version.commit (the commit a Paddle was built at)
Dotted numbers match on the components both sides give (pin 11.1.1 vs libcudart's 11.1: checked to
11.1, and said so); anything else (1.8.0a0+1606899, 2.13.0+cpu) must match exactly.
Needs no GPU: only library versions are read. Runs on Python >= 3.6 (older NGC images); no kit imports.
"""

import argparse
import ctypes
import json
import os
import platform
import re
import sys

NUMERIC = re.compile(r"^\d+(\.\d+)*$")
CUDA_DIRS = ("/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64")


class Unreadable(Exception):
    pass


def decode_cudnn(v):
    """cudnnGetVersion(): 8005 -> 8.0.5 (cuDNN < 9), 90100 -> 9.1.0 (cuDNN >= 9)."""
    v = int(v)
    if v >= 90000:
        return "%d.%d.%d" % (v // 10000, v % 10000 // 100, v % 100)
    return "%d.%d.%d" % (v // 1000, v % 1000 // 100, v % 100)


def decode_nccl(v):
    """ncclGetVersion(): 2803 -> 2.8.3 (NCCL < 2.9), 21903 -> 2.19.3 (NCCL >= 2.9)."""
    v = int(v)
    if v >= 20900:
        return "%d.%d.%d" % (v // 10000, v % 10000 // 100, v % 100)
    return "%d.%d.%d" % (v // 1000, v % 1000 // 100, v % 100)


def decode_cudart(v):
    """cudaRuntimeGetVersion(): 11010 -> 11.1, 12030 -> 12.3."""
    v = int(v)
    return "%d.%d" % (v // 1000, v % 1000 // 10)


def compare(pinned, reported):
    """(ok, how): numeric versions on their common components, anything else exactly."""
    pinned, reported = str(pinned).strip(), str(reported).strip()
    if NUMERIC.match(pinned) and NUMERIC.match(reported):
        p, r = pinned.split("."), reported.split(".")
        n = min(len(p), len(r))
        ok = [int(x) for x in p[:n]] == [int(x) for x in r[:n]]
        how = "exact" if len(p) == len(r) else "compared to %s" % ".".join(r[:n])
        return ok, how
    return pinned == reported, "exact"


def _load(names):
    errors = []
    for name in names:
        candidates = [name] + [os.path.join(d, name) for d in CUDA_DIRS]
        for cand in candidates:
            try:
                return ctypes.CDLL(cand)
            except OSError as exc:
                errors.append(str(exc))
    raise Unreadable("none of %s could be loaded" % ", ".join(names))


def _int_out(lib, fn):
    value = ctypes.c_int(0)
    status = getattr(lib, fn)(ctypes.byref(value))
    if status != 0:
        raise Unreadable("%s returned status %d" % (fn, status))
    return value.value


def _module_version(module):
    mod = __import__(module)
    for part in module.split(".")[1:]:
        mod = getattr(mod, part)
    return str(mod.__version__)


def _first(probes):
    """The first probe that answers: (version, where); Unreadable naming every failure otherwise."""
    failures = []
    for where, probe in probes:
        try:
            value = probe()
        except Exception as exc:  # a missing library or module is simply the next probe's turn
            failures.append("%s: %s" % (where, exc))
            continue
        if value not in (None, "", "None", "False"):
            return str(value), where
        failures.append("%s: no value" % where)
    raise Unreadable("; ".join(failures))


def _torch(attr):
    import torch

    if attr == "cuda":
        return torch.version.cuda
    if attr == "cudnn":
        return decode_cudnn(torch.backends.cudnn.version())
    return ".".join(str(x) for x in torch.cuda.nccl.version())


def _paddle(attr):
    import paddle

    return {"cuda": paddle.version.cuda, "cudnn": paddle.version.cudnn}[attr]()


def _tf_build(attr):
    import tensorflow as tf

    return tf.sysconfig.get_build_info()["%s_version" % attr]


def os_release(distro):
    fields = {}
    with open("/etc/os-release") as f:
        for line in f:
            key, _, value = line.strip().partition("=")
            fields[key] = value.strip('"')
    if fields.get("ID") != distro:
        raise Unreadable("/etc/os-release says ID=%s, not %s" % (fields.get("ID"), distro))
    return fields.get("VERSION_ID")


PROBES = {
    "ubuntu": [("/etc/os-release VERSION_ID", lambda: os_release("ubuntu"))],
    "python": [("platform.python_version()", platform.python_version)],
    "cuda": [
        ("libcudart cudaRuntimeGetVersion", lambda: decode_cudart(
            _int_out(_load(["libcudart.so", "libcudart.so.12", "libcudart.so.11.0", "libcudart.so.10.2"]),
                     "cudaRuntimeGetVersion"))),
        ("torch.version.cuda", lambda: _torch("cuda")),
        ("paddle.version.cuda()", lambda: _paddle("cuda")),
        ("tf.sysconfig.get_build_info()", lambda: _tf_build("cuda")),
    ],
    "cudnn": [
        ("libcudnn cudnnGetVersion", lambda: decode_cudnn(
            _load(["libcudnn.so", "libcudnn.so.9", "libcudnn.so.8", "libcudnn.so.7"]).cudnnGetVersion())),
        ("torch.backends.cudnn.version()", lambda: _torch("cudnn")),
        ("paddle.version.cudnn()", lambda: _paddle("cudnn")),
        ("tf.sysconfig.get_build_info()", lambda: _tf_build("cudnn")),
    ],
    "nccl": [
        ("libnccl ncclGetVersion", lambda: decode_nccl(_int_out(_load(["libnccl.so", "libnccl.so.2"]),
                                                                "ncclGetVersion"))),
        ("torch.cuda.nccl.version()", lambda: _torch("nccl")),
    ],
    "dali": [("nvidia.dali.__version__", lambda: _module_version("nvidia.dali"))],
    "paddle": [("paddle.__version__", lambda: _module_version("paddle"))],
    "paddle_commit": [("paddle.version.commit", lambda: __import__("paddle").version.commit)],
    "torch": [("torch.__version__", lambda: _module_version("torch"))],
    "tensorflow": [("tensorflow.__version__", lambda: _module_version("tensorflow"))],
    "mxnet": [("mxnet.__version__", lambda: _module_version("mxnet"))],
}


def dist_version(dist):
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # Python < 3.8
        import pkg_resources

        try:
            return pkg_resources.get_distribution(dist).version
        except pkg_resources.DistributionNotFound:
            raise Unreadable("not installed") from None
    try:
        return version(dist)
    except PackageNotFoundError:
        raise Unreadable("not installed") from None


def dist_matches(pinned, installed):
    """== as pip means it: 2.13.0 admits the local build 2.13.0+cpu."""
    return installed == pinned or ("+" not in pinned and installed.split("+", 1)[0] == pinned)


def git_head(path):
    """The commit checked out at path (a detached HEAD), read from .git without needing git."""
    head_file = os.path.join(path, ".git", "HEAD")
    try:
        with open(head_file) as f:
            head = f.read().strip()
    except OSError as exc:
        raise Unreadable("cannot read %s: %s" % (head_file, exc.strerror)) from None
    if head.startswith("ref: "):
        ref = os.path.join(path, ".git", head[5:])
        try:
            with open(ref) as f:
                head = f.read().strip()
        except OSError:
            raise Unreadable("HEAD is %s, which is not a commit checked out by the image build" % head[5:]) from None
    return head


def _pair(text, sep, what):
    if sep not in text:
        raise argparse.ArgumentTypeError("%s: expected %s" % (text, what))
    key, value = text.split(sep, 1)
    if not key or not value:
        raise argparse.ArgumentTypeError("%s: expected %s" % (text, what))
    return key, value


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--expect", action="append", default=[], metavar="KEY=VERSION",
                    type=lambda s: _pair(s, "=", "KEY=VERSION"))
    ap.add_argument("--dist", action="append", default=[], metavar="DIST==VERSION",
                    type=lambda s: _pair(s, "==", "DIST==VERSION"))
    ap.add_argument("--git", action="append", default=[], metavar="PATH=COMMIT",
                    type=lambda s: _pair(s, "=", "PATH=COMMIT"))
    ap.add_argument("--record", metavar="FILE", help="write what was checked as JSON (for auditors)")
    args = ap.parse_args(argv)
    for key, _ in args.expect:
        if key not in PROBES:
            ap.error("--expect %s: unknown key (known: %s)" % (key, ", ".join(sorted(PROBES))))
    if not (args.expect or args.dist or args.git):
        ap.error("nothing to check: give --expect, --dist or --git")

    results = []

    def check(kind, key, pinned, read):
        try:
            reported, where = read()
        except Unreadable as exc:
            results.append({"kind": kind, "key": key, "pinned": pinned, "reported": None, "ok": False,
                            "how": "unreadable: %s" % exc})
            return
        if kind == "dist":
            ok, how = dist_matches(pinned, reported), "pip =="
        elif kind == "git":
            ok, how = reported == pinned, "exact"
        else:
            ok, how = compare(pinned, reported)
        results.append({"kind": kind, "key": key, "pinned": pinned, "reported": reported, "ok": ok,
                        "how": "%s (%s)" % (how, where)})

    for key, pinned in args.expect:
        check("version", key, pinned, lambda key=key: _first(PROBES[key]))
    for dist, pinned in args.dist:
        check("dist", dist, pinned, lambda dist=dist: (dist_version(dist), "installed distribution"))
    for path, commit in args.git:
        check("git", path, commit, lambda path=path: (git_head(path), "%s/.git/HEAD" % path))

    bad = [r for r in results if not r["ok"]]
    for r in results:
        word = "ok      " if r["ok"] else "MISMATCH"
        reported = r["reported"] if r["reported"] is not None else "(unreadable)"
        print("verify_pins: %s %s %s: pinned %s, the image reports %s; %s"
              % (word, r["kind"], r["key"], r["pinned"], reported, r["how"]))
    if args.record:
        with open(args.record, "w") as f:
            json.dump({"ok": not bad, "python": platform.python_version(), "checks": results}, f, indent=1,
                      sort_keys=True)
            f.write("\n")
    if bad:
        print("verify_pins: %d of %d pins do not hold in this image: fix docker/pins.yaml or the base image"
              % (len(bad), len(results)), file=sys.stderr)
        return 1
    print("verify_pins: all %d pins hold" % len(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
