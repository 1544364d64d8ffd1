"""Real SSH test hosts on one Linux machine: network namespaces, each with its own sshd.

    with NetHosts(3, Path("/tmp/hosts")) as net:
        h1 = net.hosts[0]            # TestHost(name="h1", address="172.31.213.11", ...)
        subprocess.run(["ssh", "-F", str(net.ssh_config()), "h1", "hostname"])   # prints h1

Topology (all names start with the prefix, so leftovers of a crashed run can be found):

    root namespace                 <prefix>-sw (switch)            <prefix>-hN (one per host)
    <prefix>br0 <subnet>.254/24 == veth == br0 (bridge) == veth == eth0 <subnet>.1N/24, lo,
                                                                    sshd on :22: PID 1 of its own
                                                                    PID namespace, in its own UTS
                                                                    (hostname hN) and mount
                                                                    namespaces

Each host sees its own processes only (`ps -e` in an SSH session or via run()); stop_host()
SIGKILLs every process in the host's network namespace, which also ends its PID namespace.

The bridge lives in a namespace of its own, not in the root namespace: with br_netfilter loaded
(Docker loads it) bridged host-to-host traffic goes through the iptables FORWARD chain of the
bridge's namespace, and Docker sets that chain's policy to DROP. The switch namespace has no
rules at all, so hosts always reach each other; the root namespace reaches every host through
the <prefix>br0 veth.

Docker: start_docker(name) gives a host an engine of its own (dockerd inside the host's namespaces,
with its own data-root, exec-root, socket and pidfile); every SSH session on the host gets
DOCKER_HOST=unix://<that socket> from sshd's SetEnv, so a plain `docker load` over SSH talks to
that host's engine only. Killing the host (stop_host, close) kills its engine and containers too.

Auth is key-only (one ed25519 client key for root on every host); `known_hosts` holds every
host's key by address and by name. Every SSH session gets PATH=<bin_dir>:<standard dirs> and
KIT_TEST_HOST=hN from sshd's SetEnv, so a stub placed in bin_dir (e.g. nvidia-smi replaying a
recorded output) is found first. The hosts share this machine's file system, except that the
user's shell rc files (~/.bashrc, ~/.profile, ...) read empty inside them (a bind mount in the
host's own mount namespace), so that no rc line puts anything before bin_dir on PATH.

Needs root, iproute2 (`ip`), openssh-server (`sshd`), openssh-client (`ssh-keygen`) and
util-linux (`unshare`, `nsenter`); `NetHosts.start()` raises RuntimeError naming what is missing.

Concurrent runs: a NetHosts holds flock()s on its prefix and its subnet (under
/run/kit-nethosts) while it is up. A second NetHosts with the same prefix or subnet raises
HostsBusy; `start_free()` tries further prefix/subnet slots instead. A lock held by nobody
means any namespaces with that prefix are leftovers of a dead run: start() removes them.

No pytest in here: bench scripts use it too.
"""

from __future__ import annotations

import errno
import fcntl
import ipaddress
import json
import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from kit.run.command import CPU_OPENMP

# The tests' trainings share 2 cores with the other test worker: OpenMP threads that spin while they wait burn the
# cores the other worker's training needs (a gpu_proof test beside two busy loops: 25.1 s of CPU spinning, 13.7 s
# waiting passively, 13.9 s alone). The kit sets them for the CPU runs it starts; conftest for every other process
# of the tests (CPU_OPENMP), sshd's SetEnv for the test hosts' sessions.
LOCK_DIR = Path("/run/kit-nethosts")
SSHD_PRIVSEP_DIR = Path("/run/sshd")
STD_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
READY_TIMEOUT_S = 10.0
# hidden (an empty file bind-mounted over them) inside the hosts: e.g. pyenv/cargo lines in root's .bashrc
# would otherwise put their directories before bin_dir on PATH in every SSH session
RC_FILES = (".bashrc", ".profile", ".bash_profile", ".bash_login", ".bash_logout")
_PREFIX_RE = re.compile(r"^[a-z][a-z0-9]{0,7}$")


@dataclass(frozen=True)
class TestHost:
    __test__ = False  # not a pytest test class, though its name starts with "Test"

    name: str  # "h1", "h2", ... (also the hostname inside the host's UTS namespace)
    address: str  # e.g. "172.31.213.11"
    port: int  # 22
    user: str  # "root"
    key_file: Path  # private key (ed25519) accepted by every host
    bin_dir: Path  # first on PATH of every SSH session on that host (for stubs like nvidia-smi)
    netns: str  # network namespace name
    nic: str  # interface inside the namespace holding `address` ("eth0")


class HostsBusy(RuntimeError):
    """The prefix or subnet is in use by another live NetHosts (another process)."""


def missing_prerequisites() -> list[str]:
    """What this machine lacks for NetHosts (empty list: all there)."""
    missing = []
    if os.geteuid() != 0:
        missing.append("root (network namespaces need it; run as root)")
    for tool, pkg in (("ip", "iproute2"), ("sshd", "openssh-server"), ("ssh-keygen", "openssh-client"),
                      ("unshare", "util-linux"), ("nsenter", "util-linux")):
        if _which(tool) is None:
            missing.append(f"{tool} (Debian package {pkg})")
    if _which("sshd") is not None and _root_account_locked():
        missing.append("an unlocked root account: /etc/shadow has '!' for root, and sshd (UsePAM no) refuses "
                       "even key logins to locked accounts; fix: usermod -p '*' root")
    return missing


def _which(tool: str) -> str | None:
    return shutil.which(tool) or shutil.which(tool, path="/usr/local/sbin:/usr/sbin:/sbin")


def _root_account_locked() -> bool:
    try:
        for line in Path("/etc/shadow").read_text().splitlines():
            if line.startswith("root:"):
                return line.split(":")[1].startswith("!")
    except OSError:
        pass
    return False


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed (exit {proc.returncode}): {proc.stderr.strip()}")
    return proc


def _netns_list() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _netns_pids(ns: str) -> list[int]:
    out = _ip("netns", "pids", ns, check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def _link_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


def _is_pidns_init(pid: int) -> bool:
    """Whether pid is PID 1 of a PID namespace below ours (a host's sshd, or the command of a fresh run())."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("NSpid:"):
                ids = line.split()[1:]
                return len(ids) > 1 and ids[-1] == "1"
    except OSError:
        pass
    return False


def _kill_netns_processes(ns: str, deadline_s: float = 5.0) -> None:
    """SIGKILL every process in `ns` until none is left.

    PID-namespace inits go first: the kernel then kills and reaps everything in their PID namespace
    and their `unshare --fork` parent reaps them, so no orphan zombies are left for the machine's
    init to collect. Then the rest, repeatedly (a dying sshd may just have forked)."""
    end = time.monotonic() + deadline_s
    first = True
    while True:
        pids = [p for p in _netns_pids(ns) if p != os.getpid()]
        if not pids:
            return
        inits = [p for p in pids if _is_pidns_init(p)] if first else []
        for pid in inits or pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if inits:
            first = False
            while any(_alive(p) for p in inits) and time.monotonic() < end:
                time.sleep(0.002)
            continue
        if time.monotonic() > end:
            raise RuntimeError(f"processes in netns {ns} survive SIGKILL: {pids}")
        time.sleep(0.01)


def _alive(pid: int) -> bool:
    """pid exists and is not a zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def _remove_netns(ns: str) -> None:
    if ns in _netns_list():
        _kill_netns_processes(ns)
        _ip("netns", "delete", ns, check=False)


def _keygen(path: Path, comment: str) -> str:
    """An ed25519 key pair at path / path.pub (made if absent); returns the public key line."""
    if not path.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                       check=True, capture_output=True, text=True)
    return Path(f"{path}.pub").read_text().strip()


class NetHosts:
    """`count` SSH hosts in network namespaces; a context manager (start() / close())."""

    def __init__(self, count: int, workdir: Path, prefix: str = "kt", subnet: str = "172.31.213"):
        if not 1 <= count <= 99:
            raise ValueError(f"count must be 1..99, got {count}")
        if not _PREFIX_RE.match(prefix):
            raise ValueError(f"prefix must be a lowercase letter then up to 7 letters/digits, got {prefix!r}")
        net = ipaddress.ip_network(f"{subnet}.0/24")  # raises ValueError on a malformed subnet
        if not net.is_private:
            raise ValueError(f"subnet {subnet} is not a private range")
        self.count = count
        self.workdir = Path(workdir).resolve()
        self.prefix = prefix
        self.subnet = subnet
        self.bridge_link = f"{prefix}br0"  # root-namespace end of the link to the switch; holds <subnet>.254
        self.switch_ns = f"{prefix}-sw"
        self.key_file = self.workdir / "id_ed25519"
        self.known_hosts = self.workdir / "known_hosts"
        self.authorized_keys = self.workdir / "authorized_keys"
        self._empty_rc = self.workdir / "empty_rc"
        self.hosts: list[TestHost] = [
            TestHost(name=f"h{i}", address=f"{subnet}.{10 + i}", port=22, user="root", key_file=self.key_file,
                     bin_dir=self.workdir / f"h{i}" / "bin", netns=f"{prefix}-h{i}", nic="eth0")
            for i in range(1, count + 1)
        ]
        self._sshd: dict[str, subprocess.Popen] = {}
        self._dockerd: dict[str, subprocess.Popen] = {}
        self._locks: list[int] = []
        self._up = False
        self.startup_s: float | None = None

    # ---- public API -------------------------------------------------------------------------

    def __enter__(self) -> NetHosts:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def host(self, name: str) -> TestHost:
        for h in self.hosts:
            if h.name == name:
                return h
        raise KeyError(f"no test host {name!r} (have {', '.join(h.name for h in self.hosts)})")

    def start(self) -> NetHosts:
        if self._up:
            return self
        missing = missing_prerequisites()
        if missing:
            raise RuntimeError("SSH test hosts (network namespaces + sshd) cannot start; missing: "
                               + "; ".join(missing) + ". Install: scripts/install_system_deps.sh")
        t0 = time.monotonic()
        try:
            self._lock(f"prefix-{self.prefix}")
            self._lock(f"subnet-{self.subnet}")
            self._cleanup(self.prefix)  # leftovers of a crashed run with this prefix (nobody holds its lock)
            self._check_subnet_free()
            self._up = True
            self._make_files()
            self._make_network()
            for h in self.hosts:
                self._spawn_sshd(h)
            self._wait_ready(self.hosts)
        except BaseException:
            self.close()
            raise
        self.startup_s = time.monotonic() - t0
        return self

    def close(self) -> None:
        """Stop every sshd and process in the namespaces, delete namespaces and links. Idempotent."""
        if self._up:
            self._up = False
            try:
                self._cleanup(self.prefix)
            finally:
                for p in [*self._sshd.values(), *self._dockerd.values()]:
                    _reap(p)
                self._sshd.clear()
                self._dockerd.clear()
                for h in self.hosts:
                    shutil.rmtree(self._docker_run_dir(h.name), ignore_errors=True)
        for fd in self._locks:
            os.close(fd)  # releases the flock
        self._locks.clear()

    def ssh_config(self) -> Path:
        """An OpenSSH client config: `ssh -F <this> h1 cmd` works (key, known_hosts, strict checking)."""
        path = self.workdir / "ssh_config"
        blocks = []
        for h in self.hosts:
            blocks.append(
                f"Host {h.name}\n"
                f"    HostName {h.address}\n"
                f"    Port {h.port}\n"
                f"    User {h.user}\n"
                f"    IdentityFile {h.key_file}\n"
                f"    IdentitiesOnly yes\n"
                f"    UserKnownHostsFile {self.known_hosts}\n"
                f"    GlobalKnownHostsFile /dev/null\n"
                f"    StrictHostKeyChecking yes\n"
                f"    PasswordAuthentication no\n"
                f"    KbdInteractiveAuthentication no\n"
                f"    BatchMode yes\n"
                f"    ConnectTimeout 5\n"
            )
        path.write_text("\n".join(blocks))
        return path

    def stop_host(self, name: str) -> None:
        """A dead host: its sshd and every other process in its namespace are SIGKILLed.

        The address stays configured, so a TCP connect to it is refused at once (no timeout)."""
        h = self.host(name)
        _kill_netns_processes(h.netns)
        for procs in (self._sshd, self._dockerd):
            p = procs.pop(name, None)
            if p is not None:
                _reap(p)

    def start_host(self, name: str) -> None:
        """Bring a stopped host back (a fresh sshd with the same host key); no-op if it is up."""
        h = self.host(name)
        p = self._sshd.get(name)
        if p is not None and p.poll() is None:
            return
        self._spawn_sshd(h)
        self._wait_ready([h])

    def run(self, name: str, cmd: list[str], timeout: float | None = 60,
            input: str | None = None) -> subprocess.CompletedProcess:
        """Run cmd on host `name`, for checks: inside its namespaces (network, UTS, PID, mount: `ps -e`
        there lists that host's processes only), with the PATH and KIT_TEST_HOST of its SSH sessions.
        Text stdout/stderr are captured; a non-zero exit status does not raise."""
        h = self.host(name)
        env = dict(os.environ, PATH=f"{h.bin_dir}:{STD_PATH}", KIT_TEST_HOST=h.name,
                   DOCKER_HOST=f"unix://{self.docker_socket(name)}")
        sshd = self._sshd_pid(h)
        if sshd is not None:  # join the running host's namespaces
            argv = [_which("nsenter") or "nsenter", f"--target={sshd}", "--net", "--uts", "--pid", "--mount",
                    f"--wd={os.getcwd()}", "--", *cmd]
        else:  # a stopped host: fresh namespaces of the same kind
            argv = self._in_host(h, cmd)
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input, env=env)

    # ---- a Docker engine per host ----------------------------------------------------------

    def docker_socket(self, name: str) -> Path:
        """The host's own engine socket; SSH sessions on the host get DOCKER_HOST pointing at it."""
        return self._docker_run_dir(name) / "docker.sock"

    def docker_data_root(self, name: str) -> Path:
        return self.workdir / name / "docker-data"

    def _docker_run_dir(self, name: str) -> Path:
        # short: unix socket paths (this one and containerd's under exec-root) must stay under 108 bytes
        return Path("/run/kit-docker") / f"{self.prefix}-{name}"

    def start_docker(self, name: str, insecure_registries: Iterable[str] = (),
                     timeout_s: float = 60.0, path: Iterable[str] = (), env: dict[str, str] | None = None,
                     seed: Path | None = None) -> Path:
        """Start a dockerd of the host's own inside its namespaces: own data-root, exec-root, socket and
        pidfile (so images loaded into one host are not in another). Returns its socket; no-op if up.

        seed: a data-root holding images (tests/dockerparts.py seeded_data_root) the engine starts with: its image
        records copied, its layers hard-linked (read-only lowers of every container; a container writes its own).

        path: folders put first on dockerd's PATH (e.g. a stand-in nvidia-container-runtime-hook: dockerd offers
        `--gpus` only where it finds that hook on its PATH when it starts); env: more variables for dockerd (its
        OCI hooks get dockerd's environment)."""
        h = self.host(name)
        p = self._dockerd.get(name)
        if p is not None and p.poll() is None:
            return self.docker_socket(name)
        if _which("dockerd") is None:
            raise RuntimeError("dockerd not found (Debian package docker.io)")
        run_dir = self._docker_run_dir(name)
        run_dir.mkdir(parents=True, exist_ok=True)
        config = run_dir / "daemon.json"
        config.write_text("{}\n")  # not the machine's /etc/docker/daemon.json
        data_root = self.docker_data_root(name)
        data_root.mkdir(parents=True, exist_ok=True)
        if seed is not None and not (data_root / "overlay2").exists():
            for part, how in (("image", "-a"), ("overlay2", "-al")):
                subprocess.run(["cp", how, str(seed / part), str(data_root / part)], check=True)
        socket_path = self.docker_socket(name)
        argv = [_which("dockerd") or "dockerd", "--config-file", str(config), "--data-root", str(data_root),
                "--exec-root", str(run_dir / "exec"), "--pidfile", str(run_dir / "docker.pid"),
                "--host", f"unix://{socket_path}", "--iptables=false", "--ip6tables=false", "--bridge=none"]
        for reg in insecure_registries:
            argv += ["--insecure-registry", reg]
        sshd = self._sshd_pid(h)
        if sshd is None:
            raise RuntimeError(f"test host {name} is not running")
        enter = [_which("nsenter") or "nsenter", f"--target={sshd}", "--net", "--uts", "--pid", "--mount", "--"]
        # `ip netns exec` gave the host a fresh /sys without cgroups; dockerd needs them: mount them as here
        mounted = subprocess.run([*enter, "sh", "-c", _cgroup_script()], capture_output=True, text=True)
        if mounted.returncode != 0:
            raise RuntimeError(f"mounting cgroups on test host {name} failed: {mounted.stderr.strip()}")
        log = open(self.workdir / name / "dockerd.log", "ab")
        try:
            environ = dict(os.environ, **(env or {}))
            environ["PATH"] = ":".join([*path, environ.get("PATH") or STD_PATH])
            self._dockerd[name] = subprocess.Popen(
                [*enter, *argv], stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True,
                env=environ)
        finally:
            log.close()
        end = time.monotonic() + timeout_s
        while not _docker_ping(socket_path):
            if self._dockerd[name].poll() is not None or time.monotonic() > end:
                tail = (self.workdir / name / "dockerd.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"dockerd on test host {name} did not come up:\n{tail}")
            time.sleep(0.1)
        return socket_path

    def pids(self, name: str) -> list[int]:
        """Process ids (as seen from here, not inside the host) in host `name`'s network namespace:
        its sshd, sessions, and what they started."""
        return _netns_pids(self.host(name).netns)

    # ---- internals --------------------------------------------------------------------------

    def _lock(self, what: str) -> None:
        LOCK_DIR.mkdir(parents=True, exist_ok=True)
        path = LOCK_DIR / f"{what}.lock"
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip()
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise HostsBusy(f"SSH test hosts: {what} is in use by another live run ({holder or 'unknown'}); "
                                "use another prefix/subnet or start_free()") from None
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps({"pid": os.getpid(), "workdir": str(self.workdir)}).encode(), 0)
        self._locks.append(fd)

    def _cleanup(self, prefix: str) -> None:
        ns_re = re.compile(rf"^{re.escape(prefix)}-(h\d+|sw)$")
        for ns in _netns_list():
            if ns_re.match(ns):
                _remove_netns(ns)
        if _link_exists(f"{prefix}br0"):  # normally gone with the switch namespace
            _ip("link", "delete", f"{prefix}br0", check=False)

    def _check_subnet_free(self) -> None:
        net = ipaddress.ip_network(f"{self.subnet}.0/24")
        routes = json.loads(_ip("-j", "route", "show", "table", "all").stdout or "[]")
        for r in routes:
            dst = r.get("dst", "")
            if dst in ("", "default") or ":" in dst or r.get("type") in ("broadcast", "multicast"):
                continue
            try:
                other = ipaddress.ip_network(dst, strict=False)
            except ValueError:
                continue
            if other.prefixlen > 0 and other.overlaps(net):
                raise HostsBusy(f"SSH test hosts: subnet {net} overlaps route {dst} dev {r.get('dev')} "
                                "on this machine; pick another subnet")

    def _make_files(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        SSHD_PRIVSEP_DIR.mkdir(mode=0o755, parents=True, exist_ok=True)
        client_pub = _keygen(self.key_file, "kit-test-client")
        self.authorized_keys.write_text(client_pub + "\n")
        self._empty_rc.write_text("# the user's shell rc files are hidden on SSH test hosts (tests/nethosts.py)\n")
        known = []
        for h in self.hosts:
            hdir = self.workdir / h.name
            h.bin_dir.mkdir(parents=True, exist_ok=True)
            hostkey = hdir / "ssh_host_ed25519_key"
            keytype, blob = _keygen(hostkey, f"root@{h.name}").split()[:2]
            known.append(f"{h.address} {keytype} {blob}")
            known.append(f"{h.name} {keytype} {blob}")
            (hdir / "sshd_config").write_text(
                f"ListenAddress {h.address}:{h.port}\n"
                f"HostKey {hostkey}\n"
                f"PidFile {hdir / 'sshd.pid'}\n"
                f"AuthorizedKeysFile {self.authorized_keys}\n"
                "PasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\n"
                "PubkeyAuthentication yes\n"
                "PermitRootLogin prohibit-password\n"
                "StrictModes no\n"
                "UsePAM no\n"
                "UseDNS no\n"
                "PrintMotd no\n"
                "PrintLastLog no\n"
                "MaxStartups 100:30:200\n"
                "MaxSessions 50\n"
                "Subsystem sftp internal-sftp\n"
                f"SetEnv PATH={h.bin_dir}:{STD_PATH} KIT_TEST_HOST={h.name} DOCKER_HOST=unix://{self.docker_socket(h.name)}"
                f" {' '.join(f'{k}={v}' for k, v in CPU_OPENMP.items())}\n"
            )
        self.known_hosts.write_text("\n".join(known) + "\n")

    def _make_network(self) -> None:
        sw, br = self.switch_ns, self.bridge_link
        _ip("netns", "add", sw)
        _ip("-n", sw, "link", "add", "br0", "type", "bridge")
        _ip("-n", sw, "link", "set", "lo", "up")
        _ip("-n", sw, "link", "set", "br0", "up")
        # root namespace <-> switch
        _ip("link", "add", br, "type", "veth", "peer", "name", "up0", "netns", sw)
        _ip("-n", sw, "link", "set", "up0", "master", "br0", "up")
        _ip("addr", "add", f"{self.subnet}.254/24", "dev", br)
        _ip("link", "set", br, "up")
        for i, h in enumerate(self.hosts, start=1):
            _ip("netns", "add", h.netns)
            _ip("-n", sw, "link", "add", f"p{i}", "type", "veth", "peer", "name", h.nic, "netns", h.netns)
            _ip("-n", sw, "link", "set", f"p{i}", "master", "br0", "up")
            _ip("-n", h.netns, "addr", "add", f"{h.address}/24", "dev", h.nic)
            _ip("-n", h.netns, "link", "set", h.nic, "up")
            _ip("-n", h.netns, "link", "set", "lo", "up")

    def _in_host(self, h: TestHost, cmd: list[str]) -> list[str]:
        """argv running cmd as PID 1 of a fresh host h: its network namespace, the mount namespace
        `ip netns exec` makes (with /proc of the new PID namespace, and the user's shell rc files hidden
        so that they cannot put anything before bin_dir on PATH), a UTS namespace with hostname hN and a
        PID namespace. `unshare --fork` stays the parent: a Popen of this argv has unshare's pid."""
        home = Path(pwd.getpwnam(h.user).pw_dir)
        rcs = [str(home / f) for f in RC_FILES if (home / f).is_file()]
        script = 'hostname "$0" || exit 1\n'
        script += "".join(f"mount --bind {shlex.quote(str(self._empty_rc))} {shlex.quote(rc)} || exit 1\n"
                          for rc in rcs)
        script += 'exec "$@"\n'
        return [_which("ip") or "ip", "netns", "exec", h.netns,
                "unshare", "--uts", "--pid", "--fork", "--mount-proc", "--kill-child",
                "sh", "-c", script, h.name, *cmd]

    def _sshd_pid(self, h: TestHost) -> int | None:
        """sshd's pid (seen from here) of a running host: the child of its `unshare --fork`."""
        p = self._sshd.get(h.name)
        if p is None or p.poll() is not None:
            return None
        try:
            children = Path(f"/proc/{p.pid}/task/{p.pid}/children").read_text().split()
        except OSError:
            return None
        return int(children[0]) if children else None

    def _spawn_sshd(self, h: TestHost) -> None:
        hdir = self.workdir / h.name
        log = open(hdir / "sshd.log", "ab")  # handed to the child, closed right after
        try:
            self._sshd[h.name] = subprocess.Popen(
                self._in_host(h, [_which("sshd") or "sshd", "-D", "-e", "-f", str(hdir / "sshd_config")]),
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        finally:
            log.close()

    def _wait_ready(self, hosts: Iterable[TestHost], timeout_s: float = READY_TIMEOUT_S) -> None:
        pending = list(hosts)
        end = time.monotonic() + timeout_s
        while pending:
            for h in list(pending):
                p = self._sshd[h.name]
                if p.poll() is not None:
                    raise RuntimeError(f"sshd for test host {h.name} exited with {p.returncode}:\n{self._log(h)}")
                try:
                    with socket.create_connection((h.address, h.port), timeout=0.5):
                        pending.remove(h)
                except OSError:
                    pass
            if pending:
                if time.monotonic() > end:
                    names = ", ".join(h.name for h in pending)
                    raise RuntimeError(f"sshd not accepting connections after {timeout_s:.0f}s on {names}:\n"
                                       + "\n".join(self._log(h) for h in pending))
                time.sleep(0.005)

    def _log(self, h: TestHost) -> str:
        try:
            return (self.workdir / h.name / "sshd.log").read_text(errors="replace")[-4000:]
        except OSError:
            return "(no sshd log)"


def _cgroup_script() -> str:
    """Shell lines mounting this machine's cgroup hierarchies (as /proc/self/mounts lists them) again
    under /sys/fs/cgroup; nothing if already there."""
    lines = ["set -e", "if [ -n \"$(ls -A /sys/fs/cgroup 2>/dev/null)\" ]; then exit 0; fi"]
    for entry in Path("/proc/self/mounts").read_text().splitlines():
        _dev, mnt, fstype, opts = entry.split()[:4]
        if mnt == "/sys/fs/cgroup" or mnt.startswith("/sys/fs/cgroup/"):
            lines.append(f"mkdir -p {shlex.quote(mnt)}")
            lines.append(f"mount -t {shlex.quote(fstype)} -o {shlex.quote(opts)} {shlex.quote(fstype)} "
                         f"{shlex.quote(mnt)}")
    return "\n".join(lines) + "\n"


def _docker_ping(socket_path: Path) -> bool:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(str(socket_path))
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            return b" 200 " in s.recv(200)
    except OSError:
        return False


def _reap(p: subprocess.Popen) -> None:
    if p.poll() is None:
        try:
            p.kill()
        except ProcessLookupError:
            pass
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def start_free(count: int, workdir: Path, prefix: str = "kt", subnet: str = "172.31.213",
               slots: int = 8) -> NetHosts:
    """A started NetHosts on the first free slot: (prefix, subnet), then (prefix+"1", subnet+20), ...

    For concurrent test sessions on one machine: the others' hosts are left alone."""
    a, b, c = subnet.split(".")
    errors = []
    for slot in range(slots):
        pfx = prefix if slot == 0 else f"{prefix}{slot}"
        sub = subnet if slot == 0 else f"{a}.{b}.{(int(c) + 20 * slot) % 256}"
        net = NetHosts(count, Path(workdir) / (pfx if slot else ""), prefix=pfx, subnet=sub)
        try:
            return net.start()
        except HostsBusy as e:
            errors.append(str(e))
    raise HostsBusy("SSH test hosts: no free slot:\n" + "\n".join(errors))


NVIDIA_SMI_STUB = """#!/bin/sh
# nvidia-smi replaying recorded real outputs (tests/fixtures/nvidia-smi)
case "$*" in
  "topo -m") exec cat {topo} ;;
  "-q -x") exec cat {xml} ;;
  *) echo "nvidia-smi stub: unsupported arguments: $*" >&2; exit 2 ;;
esac
"""


def install_nvidia_smi(host: TestHost, xml: Path, topo: Path) -> Path:
    """Put an nvidia-smi on the host's PATH that replays a recorded `-q -x` and `topo -m` output."""
    stub = host.bin_dir / "nvidia-smi"
    stub.write_text(NVIDIA_SMI_STUB.format(xml=shlex.quote(str(xml)), topo=shlex.quote(str(topo))))
    stub.chmod(0o755)
    return stub


def write_inventory(net: NetHosts, root: Path, extra: Iterable[dict] = (), ssh: dict | None = None,
                    **host_keys) -> Path:
    """root/hosts.yaml for the hosts: their key and known_hosts, work_dir root/work/<host>, data_dir root/data.

    host_keys (gpus=8, python=..., ...) apply to every host; `extra` entries are appended as they are.
    """
    import yaml

    hosts = [{"name": h.name, "address": h.address, "port": h.port, "user": h.user, "key_file": str(h.key_file),
              "nic": h.nic, "data_dir": str(root / "data"), "work_dir": str(root / "work" / h.name),
              "runtime": "native", **host_keys} for h in net.hosts]
    path = root / "hosts.yaml"
    path.write_text(yaml.safe_dump({"schema_version": 1, "ssh": {"known_hosts": str(net.known_hosts), **(ssh or {})},
                                    "hosts": hosts + list(extra)}))
    return path


def hold_cpu(net: NetHosts, name: str, cores: float, cpus: str | None = None) -> list[Path]:
    """Host `name`'s sshd, and so every session it starts from now on, held to `cores` of CPU time by a cgroup of
    its own (v2 cpu.max where the cpu controller is on the unified hierarchy, else v1 cpu.cfs_quota_us), given that
    share before other processes of this machine (the highest weight: a loaded test machine still gives it its
    quota), and, with
    `cpus` ("0", "1-3"), to those CPUs (cpuset); the host's /sys/fs/cgroup is mounted so that its sessions see the
    limit. Returns the cgroups made (release_cpu undoes it)."""
    h = net.host(name)
    sshd = net._sshd_pid(h)
    if sshd is None:
        raise RuntimeError(f"test host {name} is not running")
    group, period = f"{net.prefix}-{name}", 10_000  # 10 ms periods: a held run is slowed evenly, not in bursts
    quota = str(max(int(cores * period), 1000))  # the kernel's least quota: 1 ms
    unified = Path("/sys/fs/cgroup")
    if "cpu" in ((unified / "cgroup.controllers").read_text().split() if (unified / "cgroup.controllers").is_file()
                 else []):
        wanted = ["+cpu"] + (["+cpuset"] if cpus else [])
        (unified / "cgroup.subtree_control").write_text(" ".join(wanted))
        made = [unified / group]
        made[0].mkdir(exist_ok=True)
        (made[0] / "cpu.max").write_text(f"{quota} {period}")
        (made[0] / "cpu.weight").write_text("10000")  # first to the CPU up to its quota, beside other processes
        if cpus:
            (made[0] / "cpuset.cpus").write_text(cpus)
    else:
        made = [unified / "cpu" / group]
        made[0].mkdir(exist_ok=True)
        (made[0] / "cpu.cfs_period_us").write_text(str(period))
        (made[0] / "cpu.cfs_quota_us").write_text(quota)
        (made[0] / "cpu.shares").write_text("262144")  # first to the CPU up to its quota, beside other processes
        if cpus:
            made.append(unified / "cpuset" / group)
            made[1].mkdir(exist_ok=True)
            (made[1] / "cpuset.cpus").write_text(cpus)
            (made[1] / "cpuset.mems").write_text((unified / "cpuset" / "cpuset.mems").read_text().strip())
    for cgroup in made:
        (cgroup / "cgroup.procs").write_text(str(sshd))
    enter = [_which("nsenter") or "nsenter", f"--target={sshd}", "--mount", "--"]
    mounted = subprocess.run([*enter, "sh", "-c", _cgroup_script()], capture_output=True, text=True)
    if mounted.returncode != 0:
        raise RuntimeError(f"mounting cgroups on test host {name} failed: {mounted.stderr.strip()}")
    return made


def release_cpu(made: list[Path]) -> None:
    """hold_cpu undone: what is left in its cgroups moved back to their roots, the cgroups removed."""
    for cgroup in made:
        root = cgroup.parent
        for pid in (cgroup / "cgroup.procs").read_text().split() if cgroup.is_dir() else []:
            try:
                (root / "cgroup.procs").write_text(pid)
            except OSError:  # gone meanwhile
                continue
        try:
            cgroup.rmdir()
        except OSError:
            pass
