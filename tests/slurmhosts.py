"""A real Slurm cluster on one Linux machine, built on tests/nethosts.py's network-namespace hosts.

    with SlurmHosts(Path("/tmp/slurm")) as cluster:
        env = cluster.env()                       # SLURM_CONF=<workdir>/slurm.conf for srun, sbatch, squeue, ...
        subprocess.run(["srun", "-N", "2", "hostname"], env=env)    # prints h2 and h3
        rc = cluster.kill_node_during("h3", job, started)           # h3 killed while job() runs, then back

    NetHosts h1   slurmctld (SlurmctldHost=h1)
    NetHosts h2   slurmd (NodeName=h2)          partition "debug": h2, h3 (the default)
    NetHosts h3   slurmd (NodeName=h3)
    this machine  munged (one key; every daemon and client uses its socket through AuthInfo), the clients

Each daemon runs inside its host's namespaces (network, UTS, PID, mount; as NetHosts.start_docker starts
dockerd), so `kill_node("h3")` (NetHosts.stop_host) kills slurmd, slurmstepd and every task on h3 at once, and
`restart_node("h3")` brings it back (ReturnToService=2 puts it into service again). Accounting as sites keep it:
slurmdbd on h1 storing into a MariaDB server of its own (h1, 127.0.0.1, a data directory under the workdir), the
cluster registered with sacctmgr, so `sacct` answers for every job and step. No cgroups:
ProctrackType=proctrack/linuxproc, TaskPlugin=task/none. Each node has one GPU as a GRES (gres.conf; a character
device of /dev/null's numbers, no GPU): select/cons_tres, which gives a job's steps its GPUs (CUDA_VISIBLE_DEVICES),
and every job whole nodes (the partition is OverSubscribe=EXCLUSIVE, as select/linear gave them).

Needs root, what NetHosts needs, and Debian's slurmctld, slurmd, slurmdbd, slurm-client, munge and
mariadb-server; `start()` raises RuntimeError naming the missing package.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from nethosts import STD_PATH, NetHosts, _cgroup_script, _reap, _which, start_free

PARTITION = "debug"
NODES = ("h2", "h3")
CONTROLLER = "h1"
READY_TIMEOUT_S = 60.0
TOOLS = (("slurmctld", "slurmctld"), ("slurmd", "slurmd"), ("srun", "slurm-client"), ("salloc", "slurm-client"),
         ("squeue", "slurm-client"), ("scancel", "slurm-client"), ("scontrol", "slurm-client"),
         ("sinfo", "slurm-client"), ("sacct", "slurm-client"), ("sacctmgr", "slurm-client"), ("slurmdbd", "slurmdbd"),
         ("munged", "munge"), ("mungekey", "munge"), ("mariadbd", "mariadb-server"),
         ("mariadb-install-db", "mariadb-server"), ("mariadb", "mariadb-client"))
DB_USER, DB_PASS, DB_PORT, DBD_PORT = "slurm", "kit-test-only", 3306, 6819  # inside h1's network namespace


def missing_prerequisites() -> list[str]:
    return [f"{tool} (Debian package {pkg})" for tool, pkg in TOOLS if _which(tool) is None]


class SlurmHosts:
    """slurmctld on h1, slurmd on h2 and h3 (NetHosts), munged here; a context manager (start() / close())."""

    def __init__(self, workdir: Path, prefix: str = "ks", subnet: str = "172.30.213"):
        self.workdir = Path(workdir).resolve()
        self.prefix, self.subnet = prefix, subnet
        self.net: NetHosts | None = None
        self.conf = self.workdir / "slurm.conf"
        self.munge_socket = self.workdir / "munge" / "munge.socket"
        self._munged: subprocess.Popen | None = None
        self._daemons: dict[str, subprocess.Popen] = {}

    def __enter__(self) -> SlurmHosts:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def env(self) -> dict[str, str]:
        """This machine's environment with SLURM_CONF pointing at the test cluster (for the clients)."""
        return dict(os.environ, SLURM_CONF=str(self.conf))

    def start(self) -> SlurmHosts:
        missing = missing_prerequisites()
        if missing:
            raise RuntimeError("Slurm test cluster cannot start; missing: " + "; ".join(missing)
                               + ". Install: scripts/install_system_deps.sh")
        try:
            self.net = start_free(3, self.workdir / "hosts", prefix=self.prefix, subnet=self.subnet)
            self._start_munged()
            self._write_conf()
            self._start_accounting()
            self._start_daemon(CONTROLLER, ["slurmctld", "-D", "-i", "-f", str(self.conf)])
            for node in NODES:
                self._start_slurmd(node)
            self.wait_idle(NODES)
        except BaseException:
            self.close()
            raise
        return self

    def close(self) -> None:
        if self.net is not None:
            self.net.close()  # kills every daemon and task in the hosts' namespaces
            self.net = None
        for p in [*self._daemons.values(), *([self._munged] if self._munged else [])]:
            _reap(p)
        self._daemons.clear()
        self._munged = None

    def kill_node(self, name: str) -> None:
        """A dead compute node: slurmd, slurmstepd and every task on it SIGKILLed (NetHosts.stop_host)."""
        self.net.stop_host(name)
        _reap(self._daemons.pop(name))

    def restart_node(self, name: str) -> None:
        """The node back: its host (sshd) and a fresh slurmd; returns when Slurm lists it idle again."""
        self.net.start_host(name)
        self._start_slurmd(name)
        self.wait_idle([name])

    def kill_node_during(self, name: str, job: Callable[[], int], started: Callable[[], None],
                         timeout: float = 180) -> int:
        """job() (a kit command: its exit code) in a thread of its own; the node killed (kill_node) once started()
        returns, brought back (restart_node) once job() ended (at most timeout seconds later); job()'s exit code."""
        result = {}
        worker = threading.Thread(target=lambda: result.setdefault("rc", job()))
        worker.start()
        try:
            started()
            self.kill_node(name)
            worker.join(timeout=timeout)
            assert not worker.is_alive(), f"the job still runs {timeout:.0f} s after {name} was killed"
        finally:
            self.restart_node(name)
        return result["rc"]

    def run(self, argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
        """A Slurm client command from this machine (scontrol, squeue, ...); text output, no raise."""
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=self.env())

    def node_states(self) -> dict[str, str]:
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"]).stdout
        return dict(line.split() for line in out.splitlines() if line.strip())

    def jobs(self) -> list[str]:
        """Jobs and steps the controller still lists ("id state" lines)."""
        jobs = self.run(["squeue", "-h", "-o", "%i %T"]).stdout.split("\n")
        steps = self.run(["squeue", "-h", "-s", "-o", "%i"]).stdout.split("\n")
        return [line for line in jobs + steps if line.strip()]

    def wait_idle(self, nodes, timeout: float = READY_TIMEOUT_S) -> None:
        end = time.monotonic() + timeout
        while True:
            states = self.node_states()
            if all(states.get(n) == "idle" for n in nodes):
                return
            if time.monotonic() > end:
                raise RuntimeError(f"Slurm nodes not idle after {timeout:.0f} s: {states}\n{self.logs()}")
            time.sleep(0.5)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                         for p in sorted([*self.workdir.glob("*.log"), *self.workdir.glob("*.out")]))

    # ---- internals --------------------------------------------------------------------------

    def _start_munged(self) -> None:
        mdir = self.munge_socket.parent
        mdir.mkdir(parents=True, exist_ok=True)
        mdir.chmod(0o700)
        key = mdir / "munge.key"
        if not key.exists():
            subprocess.run([_which("mungekey"), "-c", "-k", str(key)], check=True, capture_output=True)
        key.chmod(0o600)
        self._munged = subprocess.Popen(
            [_which("munged"), "-F", "--force", f"--socket={self.munge_socket}", f"--key-file={key}",
             f"--pid-file={mdir / 'munged.pid'}", f"--seed-file={mdir / 'munged.seed'}",
             f"--log-file={self.workdir / 'munged.log'}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=open(self.workdir / "munged.err", "ab"),
            start_new_session=True)
        end = time.monotonic() + 10
        while not self.munge_socket.exists():
            if self._munged.poll() is not None or time.monotonic() > end:
                raise RuntimeError("munged did not start: "
                                   + (self.workdir / "munged.err").read_text(errors="replace")[-2000:])
            time.sleep(0.05)

    def _start_accounting(self) -> None:
        """MariaDB (its own data directory) and slurmdbd on h1; the cluster registered for sacct."""
        w, ctl = self.workdir, self.net.host(CONTROLLER)
        data, sock = w / "mariadb", w / "mariadb.sock"
        made = subprocess.run([_which("mariadb-install-db"), "--no-defaults", f"--datadir={data}", "--user=root",
                               "--auth-root-authentication-method=socket", "--skip-test-db"],
                              capture_output=True, text=True)
        if made.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {(made.stderr or made.stdout)[-2000:]}")
        self._start_daemon("mariadb", ["mariadbd", "--no-defaults", f"--datadir={data}", f"--socket={sock}",
                                       "--user=root", "--bind-address=127.0.0.1", f"--port={DB_PORT}",
                                       f"--pid-file={w / 'mariadb.pid'}", f"--log-error={w / 'mariadb.log'}"],
                           host=CONTROLLER)
        sql = (f"CREATE USER '{DB_USER}'@'127.0.0.1' IDENTIFIED BY '{DB_PASS}'; "
               f"GRANT ALL ON slurm_acct_db.* TO '{DB_USER}'@'127.0.0.1';")
        self._until(lambda: subprocess.run([_which("mariadb"), f"--socket={sock}", "-e", sql],
                                           capture_output=True).returncode == 0, "MariaDB", "mariadb.log")
        dbd = self.conf.with_name("slurmdbd.conf")  # slurmdbd reads it beside SLURM_CONF's slurm.conf
        dbd.write_text(f"""\
# written by tests/slurmhosts.py
AuthType=auth/munge
AuthInfo=socket={self.munge_socket}
DbdHost={CONTROLLER}
DbdAddr={ctl.address}
DbdPort={DBD_PORT}
SlurmUser=root
PidFile={w / 'slurmdbd.pid'}
LogFile={w / 'slurmdbd.log'}
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={DB_PORT}
StorageUser={DB_USER}
StoragePass={DB_PASS}
StorageLoc=slurm_acct_db
""")
        dbd.chmod(0o600)
        self._start_daemon("slurmdbd", ["slurmdbd", "-D"], host=CONTROLLER)
        self._until(lambda: self.run(["sacctmgr", "-n", "list", "cluster"]).returncode == 0, "slurmdbd",
                    "slurmdbd.log")
        added = self.run(["sacctmgr", "-i", "add", "cluster", "kittest"])
        if added.returncode != 0 and "already exists" not in added.stdout + added.stderr:
            raise RuntimeError(f"sacctmgr add cluster failed: {added.stdout}{added.stderr}")

    def _until(self, ready, what: str, log: str) -> None:
        end = time.monotonic() + READY_TIMEOUT_S
        while not ready():
            if time.monotonic() > end:
                tail = (self.workdir / log).read_text(errors="replace")[-2000:] if (self.workdir / log).exists() else ""
                raise RuntimeError(f"{what} did not come up in {READY_TIMEOUT_S:.0f} s:\n{tail}\n{self.logs()}")
            time.sleep(0.5)

    def _write_conf(self) -> None:
        w, net = self.workdir, self.net
        (w / "state").mkdir(exist_ok=True)
        ctl = net.host(CONTROLLER)
        # this machine's topology as slurmd finds it (each node is this machine)
        found = subprocess.run([_which("slurmd"), "-C"], capture_output=True, text=True).stdout.split("\n")[0]
        topology = " ".join(f for f in found.split() if f.split("=")[0] in ("CPUs", "Boards", "SocketsPerBoard",
                                                                               "CoresPerSocket", "ThreadsPerCore"))
        nodes = "\n".join(f"NodeName={n} NodeAddr={net.host(n).address} {topology} Gres=gpu:1 State=UNKNOWN"
                          for n in NODES)
        # one GPU per node as Slurm counts them, so a job may ask for --gpus-per-node=1 and its steps are given
        # CUDA_VISIBLE_DEVICES=0. Slurm drops a file-less GPU from a node's GRES: the "device" is a character
        # device of /dev/null's numbers (no node has a GPU; the tests' GPU is the STAND-IN nvidia-smi)
        device = w / "dev" / "nvidia0"
        device.parent.mkdir(exist_ok=True)
        if not device.exists():
            os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
        self.conf.with_name("gres.conf").write_text(
            "# written by tests/slurmhosts.py\n" + "".join(f"NodeName={n} Name=gpu File={device}\n" for n in NODES))
        self.conf.write_text(f"""\
# written by tests/slurmhosts.py
ClusterName=kittest
SlurmctldHost={CONTROLLER}({ctl.address})
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.munge_socket}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={w / 'state'}
SlurmdSpoolDir={w / 'spool-%n'}
SlurmctldPidFile={w / 'slurmctld.pid'}
SlurmdPidFile={w / 'slurmd-%n.pid'}
SlurmctldLogFile={w / 'slurmctld.log'}
SlurmdLogFile={w / 'slurmd-%n.log'}
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SchedulerType=sched/backfill
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SlurmdTimeout=10
SlurmctldTimeout=10
MessageTimeout=5
KillWait=5
InactiveLimit=0
MinJobAge=600
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost={ctl.address}
AccountingStoragePort={DBD_PORT}
AccountingStoragePass={self.munge_socket}
JobAcctGatherType=jobacct_gather/none
TaskProlog={self._task_prolog()}
GresTypes=gpu
{nodes}
PartitionName={PARTITION} Nodes={','.join(NODES)} Default=YES MaxTime=INFINITE State=UP OverSubscribe=EXCLUSIVE
""")

    def _task_prolog(self) -> Path:
        """Each node's tasks get DOCKER_HOST of the node's own engine, once NetHosts.start_docker started one (as a
        site's TaskProlog sets up a task's environment)."""
        script = self.workdir / "task-prolog.sh"
        lines = [f'{n}) s={self.net.docker_socket(n)} ;;' for n in NODES]
        script.write_text("#!/bin/sh\n# written by tests/slurmhosts.py\ncase \"$SLURMD_NODENAME\" in\n"
                          + "\n".join(lines) + "\n*) exit 0 ;;\nesac\n"
                          + '[ -S "$s" ] && echo "export DOCKER_HOST=unix://$s"\nexit 0\n')
        script.chmod(0o755)
        return script

    def start_docker(self, node: str, seed: Path | None = None) -> Path:
        """The node's own Docker engine (NetHosts.start_docker); its tasks reach it through DOCKER_HOST."""
        return self.net.start_docker(node, seed=seed)

    def _start_slurmd(self, node: str) -> None:
        (self.workdir / f"spool-{node}").mkdir(exist_ok=True)
        # slurmd initialises its cgroup plugin even with proctrack/linuxproc: mount them as here (as dockerd's)
        mounted = self.net.run(node, ["sh", "-c", _cgroup_script()])
        if mounted.returncode != 0:
            raise RuntimeError(f"mounting cgroups on test node {node} failed: {mounted.stderr.strip()}")
        self._start_daemon(node, ["slurmd", "-D", "-N", node, "-f", str(self.conf)])

    def _start_daemon(self, name: str, argv: list[str], host: str | None = None) -> None:
        """argv inside host `host`'s namespaces (default: `name`'s; as NetHosts.start_docker starts dockerd)."""
        sshd = self.net._sshd_pid(self.net.host(host or name))
        if sshd is None:
            raise RuntimeError(f"test host {name} is not running")
        enter = [_which("nsenter") or "nsenter", f"--target={sshd}", "--net", "--uts", "--pid", "--mount", "--"]
        log = open(self.workdir / f"{argv[0]}-{name}.out", "ab")
        try:
            self._daemons[name] = subprocess.Popen(
                [*enter, shutil.which(argv[0], path=STD_PATH) or argv[0], *argv[1:]], stdin=subprocess.DEVNULL,
                stdout=log, stderr=log, start_new_session=True, env=dict(os.environ, SLURM_CONF=str(self.conf)))
        finally:
            log.close()
