"""stage_data: put train_list.txt (and, if asked, its image tree) on every host, verify it there, compare.

For each host, all hosts at once (one thread per host):
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
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from kit import REPO_ROOT
from kit.config.hosts import HostConfig, Inventory
from kit.core.inputs import InputError, KitError, read_input
from kit.hosts.connect import InventoryError, connect, quote_cmd
from kit.hosts.fanout import on_all, values

LIST_NAME = "train_list.txt"
IMAGE_TREE = "train"  # the subtree of the list's directory that images=True sends
VERIFY_TOOL = REPO_ROOT / "data_prep" / "verify_list.py"
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
    files_sent: int | None = None  # images=True: files rsync transferred (0: the tree was already there)
    error: str = ""  # why the host could not be staged or verified ('' when it could)

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
            "-o", f"ConnectTimeout={max(1, round(inv.connect_timeout))}"]
    if host.key_file:
        argv += ["-o", _ssh_option("IdentityFile", host.key_file), "-o", "IdentitiesOnly=yes"]
    return shlex.join(argv)


def rsync_argv(host: HostConfig, inv: Inventory, tree: Path) -> list[str]:
    """rsync of the local tree (a directory) into <data_dir>/ on host; an argv list, run without a shell."""
    address = f"[{host.address}]" if ":" in host.address else host.address
    # -s: the paths go over the rsync protocol, not through the remote shell (no splitting, no $(...))
    return ["rsync", "-a", "--partial", "-s", "--out-format=%i %n", "-e", ssh_command(host, inv),
            "--", str(tree), f"{address}:{host.data_dir.rstrip('/')}/"]


def _sent(out: str) -> int:
    """Regular files rsync sent, from --out-format=%i lines ('<f...' is a file sent to the remote)."""
    return sum(1 for line in out.splitlines() if line.startswith("<f"))


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
            proc = subprocess.run(rsync_argv(host, inv, tree), stdin=subprocess.DEVNULL, capture_output=True,
                                  text=True, errors="replace", check=False)
            if proc.returncode != 0:
                raise _Failed(f"rsync of {tree} failed (exit {proc.returncode}): {_last_line(proc.stderr)}")
            status.files_sent = _sent(proc.stdout)
            progress(host.name, "rsynced", f"{status.files_sent} file(s) sent")

        res = conn.run(quote_cmd([host.python, remote_tool, remote_list, "--json"]), hide=True, warn=True,
                       timeout=VERIFY_TIMEOUT_S)
    if res.exited not in (0, 1):
        raise _Failed(f"verify_list.py failed (exit {res.exited}): {_last_line(res.stderr) or _last_line(res.stdout)}")
    try:
        result = json.loads(res.stdout)
        status.list_sha256 = str(result["sha256"])
        status.images, status.classes = int(result["images"]), int(result["classes"])
        status.missing, status.missing_first = int(result["missing"]), list(result.get("missing_first", []))
        status.duplicates = int(result.get("duplicates", 0))
        status.label_conflicts = list(result.get("label_conflicts", []))
        status.verified = bool(result["ok"])
    except (ValueError, KeyError, TypeError) as exc:
        raise _Failed(f"verify_list.py printed no usable JSON ({type(exc).__name__}: {exc})") from None
    status.ok = status.verified and status.list_sha256 == local_sha
    progress(host.name, "verified", f"{status.images} images, {status.classes} classes, {status.missing} missing")


# --- all hosts -------------------------------------------------------------------------------

def stage_data(inv: Inventory, hosts: Sequence[HostConfig], train_list: str | Path, *, images: bool = False,
               progress: Progress | None = None) -> list[HostDataStatus]:
    """Stage the local train list (and with images=True its `train/` tree) on every host at once; verify there.

    Returns one status per host, in the order given; a host that fails has .error set (the others go on).
    Raises DataStageError before touching any host when the local list (or tree) cannot be used.
    """
    hosts = list(hosts)
    if not hosts:
        raise DataStageError("no hosts given")
    if len({h.name for h in hosts}) != len(hosts):
        raise DataStageError(f"a host is named twice: {', '.join(h.name for h in hosts)}")
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
        status = HostDataStatus(host.name, data_dir=host.data_dir, local_sha256=local_sha)
        try:
            _stage_host(host, inv, local, local_sha, tree, status, tell)
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
            problems.append(f"{s.name}: {s.data_dir}/{LIST_NAME} has sha256 {s.list_sha256[:16]}…, the local list "
                            f"{s.local_sha256[:16]}…")
        if s.missing:
            first = ", ".join(s.missing_first[:3])
            problems.append(f"{s.name}: {s.missing} listed file(s) missing under {s.data_dir}"
                            + (f" (first: {first})" if first else ""))
        if s.duplicates:
            problems.append(f"{s.name}: {s.duplicates} path(s) listed twice")
        for conflict in s.label_conflicts:
            problems.append(f"{s.name}: label conflict: {conflict}")
        if not s.verified and not (s.missing or s.duplicates or s.label_conflicts):
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


__all__ = ["DataStageError", "HostDataStatus", "compare", "read_local_list", "rsync_argv", "ssh_command",
           "stage_data"]
