"""stage_data: put a dataset on every host, verify it there, compare.

Two modes, all hosts at once (one thread per host):
  stage_format(inv, hosts, FORMAT, SOURCE): a data_prep/convert.py output SOURCE (paddle | folder | tfrecord |
    recordio, with its manifest.json) to <data_dir>/<FORMAT>/ on every host, where the reference runs read it
    (kit.config.reference.data_path):
    1. mkdir -p <data_dir>/<FORMAT> and <work_dir>/tools; data_prep/verify.py and its sibling modules are
       staged to <work_dir>/tools/ (each sftp'd to a temporary name, then all moved by one `mv` command)
    2. `rsync -a` of SOURCE/ into <data_dir>/<FORMAT>/ (partial files in a hidden .rsync-partial/, so a cut
       transfer never leaves a half file under a name a program reads; a re-run sends only files whose size
       or mtime differ: convert.py gives a re-run's files the same mtime); delete=True also removes files
       the source does not have. rsync's per-file output is streamed as progress (files sent so far)
    3. verify.py <data_dir>/<FORMAT> --format FORMAT --json on the host: every file's size and sha256
       against the manifest, the format read back, images per class; its manifest's sha256 must be the
       local one's
  stage_data(inv, hosts, TRAIN_LIST[, images=True]): the older list mode, train_list.txt into <data_dir>/:
    1. mkdir -p <data_dir> and <work_dir>/tools
    2. <data_dir>/train_list.txt: copied (sftp to a temporary name, then `mv`: atomic) when it is
       missing or its sha256 differs from the local list's
    3. images=True: `rsync -a --partial` of the local <list dir>/train tree to <data_dir>/, run here
       (argv list, no local shell) over ssh with the inventory's port, key and known_hosts file,
       strict host keys, BatchMode; -s (--protect-args) so the remote path is never split or expanded
    4. data_prep/verify_list.py is staged to <work_dir>/tools/verify_list.py and run there on
       <data_dir>/train_list.txt (--json): counts, missing files, the list's sha256 as the host sees it
compare() turns the statuses into problems, each naming its host. Remote paths may hold spaces and
shell metacharacters: every remote command line is built with kit.hosts.connect.quote_cmd.
An I/O module (SSH, subprocess): no pure module may import it.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import shlex
import shutil
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kit import REPO_ROOT
from kit.config.inventory import HostConfig, Inventory
from kit.core.inputs import InputError, KitError, parse_json, read_input
from kit.hosts.connect import InventoryError, connect, quote_cmd
from kit.hosts.fanout import on_all, values

LIST_NAME = "train_list.txt"
IMAGE_TREE = "train"  # the subtree of the list's directory that images=True sends
VERIFY_TOOL = REPO_ROOT / "data_prep" / "verify_list.py"
FORMATS = ("paddle", "fleetx", "folder", "tfrecord", "recordio")  # data_prep/convert.py --to; <data_dir>/<format>/
MANIFEST_NAME = "manifest.json"
# verify.py and the modules it imports (found beside it on the host)
FORMAT_TOOLS = tuple(REPO_ROOT / "data_prep" / name for name in (
    "verify.py", "manifest.py", "imagecheck.py", "recordio.py", "tfrecord.py", "verify_list.py"))
PROGRESS_EVERY_S = 2.0
HASH_TIMEOUT_S = 600
VERIFY_TIMEOUT_S = 3600
COMMAND_TIMEOUT_S = 120
# prints the sha256 of argv[1], or "missing" when there is no such file (any other error: traceback, exit 1)
_REMOTE_SHA256 = (
    "import hashlib, sys\n"
    "try:\n"
    "    f = open(sys.argv[1], 'rb')\n"
    "except FileNotFoundError:\n"
    "    print('missing')\n"
    "    sys.exit(0)\n"
    "h = hashlib.sha256()\n"
    "with f:\n"
    "    for block in iter(lambda: f.read(1 << 20), b''):\n"
    "        h.update(block)\n"
    "print(h.hexdigest())\n"
)

Progress = Callable[[str, str, str], None]  # (host name, what, detail), as kit.run.multinode's


class DataStageError(KitError):
    """Staging cannot start (bad local list or tree, no rsync/ssh here): one line for the user."""


@dataclass
class HostDataStatus:
    name: str
    data_dir: str = ""
    local_sha256: str = ""  # the local list's sha256 (what every host must have)
    list_sha256: str = ""  # the sha256 of <data_dir>/train_list.txt as verify_list.py read it there
    images: int | None = None
    classes: int | None = None
    missing: int | None = None  # listed files not found under data_dir
    missing_first: list[str] = field(default_factory=list)
    duplicates: int = 0
    label_conflicts: list[str] = field(default_factory=list)
    verified: bool = False  # verify_list.py ran and its checks held
    ok: bool = False  # verified, the list is the local one, and no error
    copied: bool = False  # train_list.txt was (re)written on the host
    files_sent: int | None = None  # images=True / a format: files rsync transferred (0: already there)
    error: str = ""  # why the host could not be staged or verified ('' when it could)
    format: str = ""  # stage_format: the format staged to <data_dir>/<format>/ ('' in list mode)
    checked: str = ""  # the remote file whose sha256 is list_sha256: the list, or the format's manifest.json
    problems: list[str] = field(default_factory=list)  # stage_format: what verify.py found wrong on the host

    def to_dict(self) -> dict:
        return asdict(self)


# --- local side ------------------------------------------------------------------------------

def read_local_list(train_list: str | Path) -> tuple[Path, bytes, str]:
    """(absolute path, bytes, sha256) of the local list; DataStageError when it cannot be used."""
    path = Path(train_list).expanduser().absolute()
    try:
        data = read_input(path, "train list")
    except InputError as exc:
        raise DataStageError(f"local train list {exc}") from None
    if not data.strip():
        raise DataStageError(f"local train list {path}: empty file")
    return path, data, hashlib.sha256(data).hexdigest()


def _ssh_option(key: str, path: str) -> str:
    """`Key="path"` as ssh(1) reads it: quoted (spaces), backslash-escaped, `%` doubled (no token expansion)."""
    escaped = path.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    return f'{key}="{escaped}"'


def ssh_command(host: HostConfig, inv: Inventory) -> str:
    """The rsync -e value: ssh with the inventory's port, user, key and known_hosts; no ~/.ssh/config.

    rsync splits it into words itself (quotes, no backslashes): shlex.join's quoting is what it reads.
    """
    argv = ["ssh", "-F", "/dev/null", "-p", str(host.port), "-l", host.user,
            "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", _ssh_option("UserKnownHostsFile", str(inv.known_hosts_file())),
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", f"ConnectTimeout={max(1, round(inv.connect_timeout))}",
            # AES-GCM first (AES-NI: several times cheaper per byte than chacha20-poly1305, OpenSSH's first
            # choice); `^` puts them at the head of the defaults, so a server without them still negotiates
            "-o", "Ciphers=^aes128-gcm@openssh.com,aes256-gcm@openssh.com"]
    if host.key_file:
        argv += ["-o", _ssh_option("IdentityFile", host.key_file), "-o", "IdentitiesOnly=yes"]
    return shlex.join(argv)


def rsync_argv(host: HostConfig, inv: Inventory, tree: Path, fmt: str | None = None, delete: bool = False) -> list[str]:
    """rsync of the local tree (a directory) into <data_dir>/ on host, or with FMT its contents into
    <data_dir>/<FMT>/ (partial files kept apart in .rsync-partial/; delete: remove files the tree lacks);
    an argv list, run without a shell."""
    address = f"[{host.address}]" if ":" in host.address else host.address
    # -s: the paths go over the rsync protocol, not through the remote shell (no splitting, no $(...))
    argv = ["rsync", "-a", "-s", "--out-format=%i %n", "-e", ssh_command(host, inv)]
    if fmt is None:
        return [*argv, "--partial", "--", str(tree), f"{address}:{host.data_dir.rstrip('/')}/"]
    argv += ["--partial-dir=.rsync-partial"] + (["--delete", "--delete-delay"] if delete else [])
    return [*argv, "--", f"{str(tree).rstrip('/')}/", f"{address}:{posixpath.join(host.data_dir, fmt)}/"]


def _run_rsync(argv: list[str], host: str, progress: Progress, total: int | None = None) -> int:
    """Run rsync, telling progress every PROGRESS_EVERY_S s (files sent so far); return the regular files it
    sent, from its --out-format=%i lines ('<f...': a file sent to the remote)."""
    sent, last = 0, time.monotonic()
    with subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, errors="replace") as proc:
        err: list[str] = []
        reader = threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True)
        reader.start()
        for line in proc.stdout:
            if line.startswith("<f"):
                sent += 1
                if time.monotonic() - last >= PROGRESS_EVERY_S:
                    last = time.monotonic()
                    progress(host, "rsyncing", f"{sent} file(s) sent" + (f" (of {total} in the source)"
                                                                         if total else ""))
        proc.wait()
        reader.join()
    if proc.returncode != 0:
        raise _Failed(f"rsync failed (exit {proc.returncode}): {_last_line(''.join(err))}")
    return sent


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""


# --- one host --------------------------------------------------------------------------------

def _put_atomic(conn, sftp, local: Path, remote: str, host: HostConfig) -> None:
    """sftp to a temporary name beside `remote`, then mv over it: readers see the old file or the new one."""
    tmp = posixpath.join(posixpath.dirname(remote),
                         f".{posixpath.basename(remote)}.{host.name}.{uuid.uuid4().hex[:12]}.tmp")
    sftp.put(str(local), tmp)
    res = conn.run(quote_cmd(["mv", "-f", "--", tmp, remote]), hide=True, warn=True, timeout=COMMAND_TIMEOUT_S)
    if res.exited != 0:
        conn.run(quote_cmd(["rm", "-f", "--", tmp]), hide=True, warn=True, timeout=COMMAND_TIMEOUT_S)
        raise _Failed(f"cannot move {LIST_NAME} into place ({_last_line(res.stderr) or f'exit {res.exited}'})")


def _put_tools(conn, sftp, tools: Sequence[Path], remote_dir: str, host: HostConfig) -> None:
    """_put_atomic for several files: each to a temporary name, then one remote command moves them all."""
    moves = []
    for tool in tools:
        remote = posixpath.join(remote_dir, tool.name)
        tmp = posixpath.join(remote_dir, f".{tool.name}.{host.name}.{uuid.uuid4().hex[:12]}.tmp")
        sftp.put(str(tool), tmp)
        moves.append((tmp, remote))
    res = conn.run(" && ".join(quote_cmd(["mv", "-f", "--", tmp, remote]) for tmp, remote in moves), hide=True,
                   warn=True, timeout=COMMAND_TIMEOUT_S)
    if res.exited != 0:
        conn.run(quote_cmd(["rm", "-f", "--", *(tmp for tmp, _ in moves)]), hide=True, warn=True,
                 timeout=COMMAND_TIMEOUT_S)
        why = _last_line(res.stderr) or f"exit {res.exited}"
        raise _Failed(f"cannot move the data tools into {remote_dir} ({why})")


class _Failed(Exception):
    """One host's staging failed; str() says why (the host is named by the status)."""


def _stage_host(host: HostConfig, inv: Inventory, local: Path, local_sha: str, tree: Path | None,
                status: HostDataStatus, progress: Progress) -> None:
    remote_list = posixpath.join(host.data_dir, LIST_NAME)
    tools = posixpath.join(host.work_dir, "tools")
    remote_tool = posixpath.join(tools, VERIFY_TOOL.name)
    with connect(host, inv) as conn:
        res = conn.run(quote_cmd(["mkdir", "-p", "--", host.data_dir, tools]), hide=True, warn=True,
                       timeout=COMMAND_TIMEOUT_S)
        if res.exited != 0:
            raise _Failed(f"cannot create {host.data_dir} / {tools} ({_last_line(res.stderr) or f'exit {res.exited}'})")
        sftp = conn.sftp()
        _put_atomic(conn, sftp, VERIFY_TOOL, remote_tool, host)

        res = conn.run(quote_cmd([host.python, "-c", _REMOTE_SHA256, remote_list]), hide=True, warn=True,
                       timeout=HASH_TIMEOUT_S)
        if res.exited != 0:
            raise _Failed(f"cannot read {remote_list} with {host.python} "
                          f"({_last_line(res.stderr) or f'exit {res.exited}'})")
        if res.stdout.strip() != local_sha:
            _put_atomic(conn, sftp, local, remote_list, host)
            status.copied = True
            progress(host.name, "list-copied", remote_list)
        else:
            progress(host.name, "list-current", remote_list)

        if tree is not None:
            progress(host.name, "rsync", f"{tree} -> {host.data_dir}/")
            status.files_sent = _run_rsync(rsync_argv(host, inv, tree), host.name, progress)
            progress(host.name, "rsynced", f"{status.files_sent} file(s) sent")

        res = conn.run(quote_cmd([host.python, remote_tool, remote_list, "--json"]), hide=True, warn=True,
                       timeout=VERIFY_TIMEOUT_S)

    def list_findings(result: dict) -> None:
        status.duplicates = int(result.get("duplicates", 0))
        status.label_conflicts = list(result.get("label_conflicts", []))

    _read_verify(res, "verify_list.py", "sha256", status, list_findings)
    status.ok = status.verified and status.list_sha256 == local_sha
    progress(host.name, "verified", f"{status.images} images, {status.classes} classes, {status.missing} missing")


def read_local_format(source: str | Path, fmt: str) -> tuple[Path, dict, str]:
    """(absolute directory, manifest, manifest sha256) of a local convert.py output; DataStageError otherwise."""
    if fmt not in FORMATS:
        raise DataStageError(f"unknown data format {fmt!r}; one of {', '.join(FORMATS)}")
    path = Path(source).expanduser().absolute()
    if not path.is_dir():
        raise DataStageError(f"local {fmt} data {path}: not a directory (make it with data_prep/convert.py "
                             f"SRC {path} --to {fmt})")
    try:
        data = read_input(path / MANIFEST_NAME, "manifest")
        manifest = parse_json(data)
    except InputError as exc:
        raise DataStageError(f"local {fmt} data: manifest {exc} (made by data_prep/convert.py)") from None
    except ValueError as exc:
        raise DataStageError(f"local {fmt} data: {path / MANIFEST_NAME}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != fmt or not isinstance(manifest.get("files"), list):
        raise DataStageError(f"local {fmt} data: {path / MANIFEST_NAME} is not a {fmt} manifest "
                             f"(format {manifest.get('format') if isinstance(manifest, dict) else None!r})")
    return path, manifest, hashlib.sha256(data).hexdigest()


def _stage_format_host(host: HostConfig, inv: Inventory, fmt: str, source: Path, manifest: dict, local_sha: str,
                       delete: bool, status: HostDataStatus, progress: Progress) -> None:
    target = posixpath.join(host.data_dir, fmt)
    tools = posixpath.join(host.work_dir, "tools")
    status.checked = posixpath.join(target, MANIFEST_NAME)
    with connect(host, inv) as conn:
        res = conn.run(quote_cmd(["mkdir", "-p", "--", target, tools]), hide=True, warn=True,
                       timeout=COMMAND_TIMEOUT_S)
        if res.exited != 0:
            raise _Failed(f"cannot create {target} / {tools} ({_last_line(res.stderr) or f'exit {res.exited}'})")
        _put_tools(conn, conn.sftp(), FORMAT_TOOLS, tools, host)
        progress(host.name, "rsync", f"{source}/ -> {target}/ ({len(manifest['files'])} files)")
        status.files_sent = _run_rsync(rsync_argv(host, inv, source, fmt, delete), host.name, progress,
                                       len(manifest["files"]) + 1)  # + manifest.json
        progress(host.name, "rsynced", f"{status.files_sent} file(s) sent")
        progress(host.name, "verifying", f"sha256 of {len(manifest['files'])} files, {fmt} read back")
        res = conn.run(quote_cmd([host.python, posixpath.join(tools, "verify.py"), target, "--format", fmt,
                                  "--json"]), hide=True, warn=True, timeout=VERIFY_TIMEOUT_S)

    def format_findings(result: dict) -> None:
        status.problems = [str(p) for p in result["problems"]]

    _read_verify(res, "verify.py", "manifest_sha256", status, format_findings)
    status.ok = status.verified and status.list_sha256 == local_sha
    progress(host.name, "verified", f"{status.images} images, {status.classes} classes, "
                                    f"{len(status.problems)} problem(s)")


def _read_verify(res, tool: str, sha_key: str, status: HostDataStatus,
                 findings: Callable[[dict], None]) -> None:
    """Read what a remote verify tool printed (exit 0: verified, 1: problems found) into status: its sha256 (under
    sha_key), counts, the tool's own findings, then whether it verified; _Failed where it failed or printed no usable
    JSON."""
    if res.exited not in (0, 1):
        raise _Failed(f"{tool} failed (exit {res.exited}): {_last_line(res.stderr) or _last_line(res.stdout)}")
    try:
        result = json.loads(res.stdout)
        status.list_sha256 = str(result[sha_key])
        status.images, status.classes = int(result["images"]), int(result["classes"])
        status.missing, status.missing_first = int(result["missing"]), list(result.get("missing_first", []))
        findings(result)
        status.verified = bool(result["ok"])
    except (ValueError, KeyError, TypeError) as exc:
        raise _Failed(f"{tool} printed no usable JSON ({type(exc).__name__}: {exc})") from None


# --- all hosts -------------------------------------------------------------------------------

def stage_data(inv: Inventory, hosts: Sequence[HostConfig], train_list: str | Path, *, images: bool = False,
               progress: Progress | None = None) -> list[HostDataStatus]:
    """Stage the local train list (and with images=True its `train/` tree) on every host at once; verify there.

    Returns one status per host, in the order given; a host that fails has .error set (the others go on).
    Raises DataStageError before touching any host when the local list (or tree) cannot be used.
    """
    hosts = _check_hosts(hosts)
    local, _data, local_sha = read_local_list(train_list)
    tree = None
    if images:
        tree = local.parent / IMAGE_TREE
        if not tree.is_dir():
            raise DataStageError(f"images requested but {tree} is not a directory (the list's image tree)")
        for tool in ("rsync", "ssh"):
            if shutil.which(tool) is None:
                raise DataStageError(f"images requested but `{tool}` is not installed on this machine")
    if not VERIFY_TOOL.is_file():
        raise DataStageError(f"{VERIFY_TOOL} is missing from the kit")
    tell = progress or (lambda host, what, detail: None)

    def one(host: HostConfig) -> HostDataStatus:
        status = HostDataStatus(host.name, data_dir=host.data_dir, local_sha256=local_sha,
                                checked=posixpath.join(host.data_dir, LIST_NAME))
        return _guarded(host, status, tell, lambda: _stage_host(host, inv, local, local_sha, tree, status, tell))

    return values(on_all(hosts, one))


def _check_hosts(hosts: Sequence[HostConfig]) -> list[HostConfig]:
    hosts = list(hosts)
    if not hosts:
        raise DataStageError("no hosts given")
    if len({h.name for h in hosts}) != len(hosts):
        raise DataStageError(f"a host is named twice: {', '.join(h.name for h in hosts)}")
    return hosts


def _guarded(host: HostConfig, status: HostDataStatus, tell: Progress, work: Callable[[], None]) -> HostDataStatus:
    """Run one host's staging; whatever goes wrong there becomes its status.error (the other hosts go on)."""
    try:
        work()
    except InventoryError as exc:
        status.error = exc.reason
    except _Failed as exc:
        status.error = str(exc)
    except Exception as exc:  # a lost connection, an sftp error, a timeout: this host only
        status.error = f"{type(exc).__name__}: {exc}".rstrip(": ")
    if status.error:
        status.ok = False
        tell(host.name, "failed", status.error)
    return status


def stage_format(inv: Inventory, hosts: Sequence[HostConfig], fmt: str, source: str | Path, *, delete: bool = False,
                 progress: Progress | None = None) -> list[HostDataStatus]:
    """Stage a data_prep/convert.py output (SOURCE, format FMT) to <data_dir>/<FMT>/ on every host at once;
    verify it there against its manifest. One status per host, in the order given (a failed host has .error).
    Raises DataStageError before touching any host when the local output cannot be used."""
    hosts = _check_hosts(hosts)
    local, manifest, local_sha = read_local_format(source, fmt)
    for tool in ("rsync", "ssh"):
        if shutil.which(tool) is None:
            raise DataStageError(f"`{tool}` is not installed on this machine (staging sends the data with rsync)")
    missing = [str(t) for t in FORMAT_TOOLS if not t.is_file()]
    if missing:
        raise DataStageError(f"{', '.join(missing)} missing from the kit")
    tell = progress or (lambda host, what, detail: None)

    def one(host: HostConfig) -> HostDataStatus:
        status = HostDataStatus(host.name, data_dir=host.data_dir, local_sha256=local_sha, format=fmt)
        return _guarded(host, status, tell, lambda: _stage_format_host(host, inv, fmt, local, manifest, local_sha,
                                                                       delete, status, tell))

    return values(on_all(hosts, one))


def compare(statuses: Sequence[HostDataStatus]) -> list[str]:
    """Problems across hosts, each naming its host: errors, a list that is not the local one, failed
    verification (missing files, duplicates, label conflicts), counts that differ from the other hosts'."""
    problems: list[str] = []
    for s in statuses:
        if s.error:
            problems.append(f"{s.name}: {s.error}")
            continue
        if s.local_sha256 and s.list_sha256 != s.local_sha256:
            what = "manifest" if s.format else "list"
            problems.append(f"{s.name}: {s.checked or posixpath.join(s.data_dir, LIST_NAME)} has sha256 "
                            f"{s.list_sha256[:16]}…, the local {what} {s.local_sha256[:16]}…")
        if s.missing:
            first = ", ".join(s.missing_first[:3])
            problems.append(f"{s.name}: {s.missing} listed file(s) missing under {s.data_dir}"
                            + (f" (first: {first})" if first else ""))
        if s.duplicates:
            problems.append(f"{s.name}: {s.duplicates} path(s) listed twice")
        for conflict in s.label_conflicts:
            problems.append(f"{s.name}: label conflict: {conflict}")
        problems += [f"{s.name}: {p}" for p in s.problems if not (s.missing and "missing" in p)]
        if not s.verified and not (s.missing or s.duplicates or s.label_conflicts or s.problems):
            problems.append(f"{s.name}: verification failed")
    counted = [s for s in statuses if not s.error and s.images is not None]
    if len(counted) > 1:
        # the most common counts; among equally common ones, those of a host holding the local list, then rank order
        votes = Counter((s.images, s.classes) for s in counted)
        local = {(s.images, s.classes) for s in counted if s.list_sha256 and s.list_sha256 == s.local_sha256}
        ref = max(votes, key=lambda counts: (votes[counts], counts in local))
        for s in counted:
            if (s.images, s.classes) != ref:
                problems.append(f"{s.name}: {s.images} images / {s.classes} classes, other hosts "
                                f"{ref[0]} images / {ref[1]} classes")
    return problems


__all__ = ["FORMATS", "DataStageError", "HostDataStatus", "compare", "read_local_format", "read_local_list",
           "rsync_argv", "ssh_command", "stage_data", "stage_format"]
