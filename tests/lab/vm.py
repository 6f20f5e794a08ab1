"""QEMU VMs joined by one virtual wire, running the real Soft-RoCE (rdma_rxe) stack.

    with Lab("bookworm", "trixie") as lab:      # h1 = 192.0.2.1 (bookworm), h2 = 192.0.2.2 (trixie)
        lab.reset()                              # healthy baseline, verified
        r = lab.h2.run("ib_write_bw -d rxe0 192.0.2.1", timeout=30, pty=True)
        lab.replace("h2", "bookworm")            # same wire, another release
    with Lab("bookworm", "bookworm", "trixie") as lab:   # h1..h3 = 192.0.2.1..3 on one L2 segment

Design:
* TCG (``-accel tcg -cpu max``): KVM guests hang on these machines. One vCPU, 1 GiB each.
* Two hosts: the wire is a pair of UDP sockets on 127.0.0.1 (``-netdev socket,udp=…,localaddr=…``)
  with ports picked free at start, so two labs can coexist. Three or more hosts: every VM sends its
  frames to a hub process on 127.0.0.1 (``hub.py``) that forwards them like a learning switch, so the
  hosts share one L2 segment. The guests' only NIC is that wire; no user-mode networking. Inside,
  only 192.0.2.1 (h1) .. 192.0.2.N (hN) are used.
* The control plane is a virtio-serial port ("ctl") exposed as a unix socket in a private temp dir,
  spoken to by ``guest_agent.py`` (started by the image's init from the 9p-shared repo). It also
  carries TCP streams: ``LabVM.forward(22)`` gives the host a loopback port that reaches the guest's
  sshd without any network between host and guest.
* ssh: the lab makes one user key and one host key per lab (``ssh-keygen`` on the host, else in h1),
  installs them in every guest at setup (authorised for root and ``lab``, known to every guest as the
  host key of 192.0.2.*), starts sshd, and the guests ssh to each other over the wire (Open MPI).
* ``-snapshot``: the cached image is never written; every boot starts from the same state.
* Every wait has a deadline; VMs die with their parent (PR_SET_PDEATHSIG) and on ``close()``/exit.
"""
from __future__ import annotations

import atexit
import base64
import ctypes
import itertools
import json
import os
import queue
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional

from . import image as lab_image

REPO = lab_image.REPO
MAX_HOSTS = 8             # h1..h8 = 192.0.2.1..8 (192.0.2.3 is the matrix's "nobody" only in two-host labs)


def host_address(name: str) -> str:
    return "192.0.2.%d" % host_index(name)


def host_mac(name: str) -> str:
    return "52:54:00:c0:02:%02x" % host_index(name)


def host_index(name: str) -> int:
    if not (name.startswith("h") and name[1:].isdigit() and 1 <= int(name[1:]) <= MAX_HOSTS):
        raise ValueError("hosts are h1..h%d, not %r" % (MAX_HOSTS, name))
    return int(name[1:])


ADDRESSES = {"h1": "192.0.2.1", "h2": "192.0.2.2"}
MACS = {"h1": "52:54:00:c0:02:01", "h2": "52:54:00:c0:02:02"}
PEER = {"h1": "h2", "h2": "h1"}
PREFIX = 24
NETDEV = "eth0"
RXE = "rxe0"
BOOT_TIMEOUT = float(os.environ.get("RDMADOCTOR_LAB_BOOT_TIMEOUT", "180"))
PING_TIMEOUT = 15.0       # a guest whose agent does not answer a ping this long is taken as gone
MEMORY_MB = 1024
GUEST_PYTHONPATH = "/lab/src:/lab/site"
PERFTEST_BINARIES = ["ib_write_bw", "ib_write_lat", "ib_read_bw", "ib_read_lat", "ib_send_bw", "ib_send_lat",
                     "ib_atomic_bw", "ib_atomic_lat", "raw_ethernet_bw", "raw_ethernet_lat", "rping", "ucmatose",
                     "udaddy", "ibv_rc_pingpong", "ibv_ud_pingpong"]


# Other RDMA programs the lab runs (tests/lab/producers.py): killed by the baseline like perftest.
PRODUCER_BINARIES = ["ucx_perftest", "fi_pingpong", "mpirun", "mpiexec", "orterun", "orted", "prterun", "prte",
                     "prted"]
MPI_PROGRAM = "/lab/src/tests/lab/mpi_pingpong.py"   # the MPI ranks are python3: killed by their path
SSHD_CONFIG = """\
# rdmadoctor lab: key logins only, no DNS (the guests have no resolver), quick to accept
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UseDNS no
"""
SSH_CLIENT_CONFIG = """\
# rdmadoctor lab: the guests ssh to each other over the wire with the lab's key and host key
Host *
    BatchMode yes
    StrictHostKeyChecking yes
    ConnectTimeout 20
    LogLevel ERROR
"""


_WRITE_FILES = """
import json, os, pwd, sys
for path, text, mode, owner in json.load(sys.stdin):
    entry = pwd.getpwnam(owner)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if path.endswith("/.ssh/id_ed25519"):
        os.chmod(os.path.dirname(path), 0o700)
        os.chown(os.path.dirname(path), entry.pw_uid, entry.pw_gid)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, int(mode, 8))
    os.chown(path, entry.pw_uid, entry.pw_gid)
"""


class LabError(RuntimeError):
    pass


class GuestGone(LabError):
    """A guest is gone: QEMU exited (a kernel panic reboots, and ``-no-reboot`` makes that an exit), its control
    connection closed, or its agent no longer answers a ping. The guest failed, not the command it ran."""

    def __init__(self, message: str, host: str, console: str):
        super().__init__(message)
        self.host, self.console = host, console


@dataclass
class Result:
    rc: Optional[int]
    output: str
    timed_out: bool
    seconds: float
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.rc == 0 and not self.timed_out

    @classmethod
    def from_answer(cls, answer: Dict) -> "Result":
        out, err = answer.get("stdout", ""), answer.get("stderr", "")
        return cls(rc=answer.get("rc"), output=out + err, timed_out=bool(answer.get("timed_out")),
                   seconds=float(answer.get("seconds") or 0.0), stdout=out, stderr=err)


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pdeathsig():
    """Runs in the qemu child: die with the thread that started it (the lab's owner)."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    os.setsid()


_LIVE: "weakref.WeakSet[LabVM]" = weakref.WeakSet()


@atexit.register
def _kill_all():
    for vm in list(_LIVE):
        vm.kill_qemu()


class AgentClient:
    """JSON lines over the VM's control socket; calls may overlap (answers are matched by id)."""

    def __init__(self, path: Path, deadline: float):
        self.sock = None
        while True:
            try:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                sock.connect(str(path))
                self.sock = sock
                break
            except OSError:
                sock.close()
                if time.monotonic() > deadline:
                    raise LabError("control socket %s never appeared" % path)
                time.sleep(0.1)
        self.ids = itertools.count(1)
        self.pending: Dict[int, Dict] = {}
        self.streams: Dict[int, "queue.Queue"] = {}  # stream id -> chunks from the guest (None = EOF)
        self.cond = threading.Condition()
        self.closed = False
        self.send_lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        buffer = b""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    try:
                        answer = json.loads(line)
                    except ValueError:
                        continue
                    if "stream" in answer and "id" not in answer:  # bytes of a forwarded TCP stream
                        sink = self.streams.get(answer["stream"])
                        if sink is not None:
                            sink.put(base64.b64decode(answer["data"]) if "data" in answer else None)
                        continue
                    with self.cond:
                        self.pending[answer.get("id")] = answer
                        self.cond.notify_all()
        except OSError:
            pass
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        for sink in list(self.streams.values()):
            sink.put(None)

    def send(self, request: Dict) -> int:
        rid = next(self.ids)
        request = dict(request, id=rid)
        self.post(request)
        return rid

    def post(self, request: Dict) -> None:
        """Sends without waiting (for requests the agent does not answer, e.g. stream bytes)."""
        with self.send_lock:
            try:
                self.sock.sendall((json.dumps(request) + "\n").encode())
            except OSError:
                with self.cond:
                    self.closed = True
                    self.cond.notify_all()
                raise

    def receive(self, rid: int, timeout: float) -> Optional[Dict]:
        deadline = time.monotonic() + timeout
        with self.cond:
            while rid not in self.pending:
                left = deadline - time.monotonic()
                if left <= 0 or self.closed:
                    return None
                self.cond.wait(min(left, 1.0))
            return self.pending.pop(rid)

    def call(self, request: Dict, timeout: float) -> Dict:
        rid = self.send(request)
        answer = self.receive(rid, timeout)
        if answer is None:
            raise LabError("agent did not answer %s within %.0f s%s" % (
                request.get("op"), timeout, " (connection closed)" if self.closed else ""))
        if "error" in answer:
            raise LabError("agent error for %s: %s" % (request.get("op"), answer["error"]))
        return answer

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class LabVM:
    """One lab host: a QEMU process, its console log and its control agent."""

    def __init__(self, name: str, release: str, wire_local: int, wire_remote: int, workdir: Path,
                 image: Optional[lab_image.Image] = None, site: Optional[Path] = None):
        self.name, self.release = name, release
        self.address = host_address(name)
        self.wire_local, self.wire_remote = wire_local, wire_remote
        self.workdir = workdir
        self.image = image or lab_image.ensure_image(release)
        self.site = site or lab_image.ensure_site()
        self.ctl_path = workdir / ("%s.ctl" % name)
        self.console_path = workdir / ("%s-%s.console" % (name, release))
        self.proc: Optional[subprocess.Popen] = None
        self.agent: Optional[AgentClient] = None
        self.boot_seconds: Optional[float] = None
        self.info: Dict = {}
        self.forwards: Dict[int, int] = {}      # guest port -> host port on 127.0.0.1
        self._listeners: List[socket.socket] = []
        self._unresponsive = False              # QEMU runs, but the agent stopped answering (GuestGone)

    # ---- lifecycle -------------------------------------------------------------------------------
    def argv(self) -> List[str]:
        append = ("console=ttyS0 root=/dev/vda rw rootfstype=ext4 init=/lab-init net.ifnames=0 quiet "
                  "panic=-1 mitigations=off lab.host=%s" % self.name)
        return [
            "qemu-system-x86_64", "-accel", "tcg", "-cpu", "max", "-m", str(MEMORY_MB), "-smp", "1",
            "-nographic", "-no-reboot", "-snapshot", "-nodefaults", "-serial", "stdio",
            "-kernel", str(self.image.kernel), "-initrd", str(self.image.initrd), "-append", append,
            "-drive", "file=%s,format=raw,if=virtio" % self.image.rootfs,
            "-netdev", "socket,id=n0,udp=127.0.0.1:%d,localaddr=127.0.0.1:%d" % (self.wire_remote, self.wire_local),
            "-device", "virtio-net-pci,netdev=n0,mac=%s" % host_mac(self.name),
            "-virtfs", "local,path=%s,mount_tag=src,security_model=none,readonly=on" % REPO,
            "-virtfs", "local,path=%s,mount_tag=site,security_model=none,readonly=on" % self.site,
            "-device", "virtio-serial",
            "-chardev", "socket,id=ctl,path=%s,server=on,wait=off" % self.ctl_path,
            "-device", "virtserialport,chardev=ctl,name=ctl",
        ]

    def start(self) -> None:
        """Starts QEMU (call from the thread that owns the lab: the VM dies with that thread)."""
        lab_image.require_tools(["qemu-system-x86_64"])
        if self.ctl_path.exists():
            self.ctl_path.unlink()
        self._started = time.monotonic()
        self._console = open(self.console_path, "wb")
        self.proc = subprocess.Popen(self.argv(), stdout=self._console, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=_pdeathsig)
        _LIVE.add(self)

    def wait_ready(self, timeout: float = BOOT_TIMEOUT) -> None:
        """Waits until the agent answers a ping; fails early if QEMU exits."""
        deadline = self._started + timeout
        while not self.ctl_path.exists():
            self._check_alive()
            if time.monotonic() > deadline:
                raise LabError("%s: QEMU made no control socket%s" % (self.name, self.console_tail()))
            time.sleep(0.1)
        self.agent = AgentClient(self.ctl_path, deadline)
        while True:
            self._check_alive()
            rid = self.agent.send({"op": "ping"})
            if self.agent.receive(rid, 2.0):
                break
            if time.monotonic() > deadline:
                raise LabError("%s (%s): agent not ready after %.0f s%s" % (
                    self.name, self.release, timeout, self.console_tail()))
        self.boot_seconds = round(time.monotonic() - self._started, 1)
        self.info = self._collect_info()

    def boot(self, timeout: float = BOOT_TIMEOUT) -> None:
        self.start()
        self.wait_ready(timeout)

    def _check_alive(self):
        if self.proc is None or self.proc.poll() is not None:
            raise LabError("%s: QEMU exited (rc %s)%s" % (
                self.name, None if self.proc is None else self.proc.returncode, self.console_tail()))

    @property
    def alive(self) -> bool:
        """QEMU runs, the control connection is open and the agent was not found unresponsive (says nothing about
        the guest's RDMA state)."""
        return (self.proc is not None and self.proc.poll() is None and self.agent is not None
                and not self.agent.closed and not self._unresponsive)

    def responsive(self, timeout: float = PING_TIMEOUT) -> bool:
        """The agent answers a ping within `timeout` (it answers each request in a thread of its own, so a long
        command does not delay it)."""
        if not self.alive:
            return False
        try:
            rid = self.agent.send({"op": "ping"})
        except OSError:
            return False
        return self.agent.receive(rid, timeout) is not None

    def gone(self, cause: BaseException) -> GuestGone:
        """The error for a guest that is gone, with QEMU's exit status and the console's last lines."""
        if self.proc is not None and self.agent is not None and self.agent.closed:
            try:
                self.proc.wait(timeout=5)  # a panicking guest's QEMU exits moments after the connection closes
            except subprocess.TimeoutExpired:
                pass
        rc = None if self.proc is None else self.proc.poll()
        if rc is not None:
            state = "QEMU exited with status %s" % rc
        elif self.agent is None or self.agent.closed:
            state = "QEMU still runs but the control connection closed"
        else:
            self._unresponsive = True
            state = "QEMU still runs but the guest's agent does not answer a ping within %.0f s" % PING_TIMEOUT
        tail = self.console_tail(60)
        return GuestGone("%s (%s) is gone: %s (%s: %s)%s" % (
            self.name, self.release, state, type(cause).__name__, cause, tail), self.name, tail)

    def _call(self, request: Dict, timeout: float) -> Dict:
        if self.agent is None:
            raise LabError("%s is not running" % self.name)
        try:
            return self.agent.call(request, timeout)
        except (LabError, OSError) as error:
            # an answer that says error came from a live agent; no answer, or a closed connection, may mean the
            # guest is gone
            if isinstance(error, OSError) or not self.responsive():
                raise self.gone(error) from error
            raise

    def console_tail(self, lines: int = 25) -> str:
        try:
            text = self.console_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n--- %s console (last %d lines) ---\n%s" % (self.name, lines, "\n".join(text.splitlines()[-lines:]))

    def shutdown(self, timeout: float = 15) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None and self.agent is not None:
            try:
                self.agent.send({"op": "run", "sh": "sync; echo 1 > /proc/sys/kernel/sysrq; "
                                 "echo o > /proc/sysrq-trigger", "timeout": 5})
                self.proc.wait(timeout=timeout)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill_qemu()

    def kill_qemu(self) -> None:
        for listener in self._listeners:
            try:
                listener.close()
            except OSError:
                pass
        self._listeners, self.forwards = [], {}
        if self.agent is not None:
            self.agent.close()
            self.agent = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if getattr(self, "_console", None):
            self._console.close()
        _LIVE.discard(self)

    # ---- commands --------------------------------------------------------------------------------
    def _request(self, cmd, timeout: float, user: Optional[str], pty: bool, env: Optional[Dict],
                 rlimits: Optional[Dict], stdin: Optional[str] = None) -> Dict:
        request = {"timeout": timeout, "pty": pty}
        if stdin is not None:
            request["stdin"] = stdin
        if isinstance(cmd, (list, tuple)):
            request["argv"] = list(cmd)
        else:
            request["sh"] = cmd
        if user:
            request["user"] = user
        if env:
            request["env"] = env
        if rlimits:
            request["rlimits"] = rlimits
        return request

    def run(self, cmd, timeout: float = 60, user: Optional[str] = None, pty: bool = False,
            env: Optional[Dict] = None, rlimits: Optional[Dict] = None, stdin: Optional[str] = None) -> Result:
        """Runs a command (a shell string or an argv list) and waits for it (killed at ``timeout``)."""
        answer = self._call(dict(self._request(cmd, timeout, user, pty, env, rlimits, stdin), op="run"),
                            timeout + 15)
        return Result.from_answer(answer)

    def put(self, path: str, text: str, mode: str = "0644", owner: str = "root") -> None:
        """Writes a file in the guest (as root), then sets its mode and owner."""
        script = "umask 077 && mkdir -p \"$(dirname '{p}')\" && cat > '{p}' && chmod {m} '{p}' && chown {o}: '{p}'"
        self.sh(script.format(p=path, m=mode, o=owner), stdin=text)

    def sh(self, cmd: str, timeout: float = 60, stdin: Optional[str] = None) -> str:
        """Runs a root shell command that must succeed; returns its stdout."""
        result = self.run(cmd, timeout=timeout, stdin=stdin)
        if not result.ok:
            raise LabError("%s: command failed (rc %s%s): %s\n%s" % (
                self.name, result.rc, ", timed out" if result.timed_out else "", cmd, result.output[-2000:]))
        return result.stdout

    def spawn(self, cmd, user: Optional[str] = None, pty: bool = False, env: Optional[Dict] = None,
              rlimits: Optional[Dict] = None) -> int:
        answer = self._call(dict(self._request(cmd, 0, user, pty, env, rlimits), op="spawn"), 30)
        return answer["handle"]

    def peek(self, handle: int) -> Dict:
        return self._call({"op": "peek", "handle": handle}, 30)

    def wait(self, handle: int, timeout: float) -> Result:
        return Result.from_answer(self._call({"op": "wait", "handle": handle, "timeout": timeout}, timeout + 15))

    def kill(self, handle: int) -> None:
        self._call({"op": "kill", "handle": handle}, 30)

    # ---- TCP through the control channel ----------------------------------------------------------
    def forward(self, guest_port: int) -> int:
        """A port on the host's 127.0.0.1 whose connections reach the guest's 127.0.0.1:``guest_port``.

        The bytes travel over the control channel (the agent's ``connect``/``send``/``close``), not over
        a network: the guests keep the wire as their only NIC. Lives as long as this VM's agent."""
        if guest_port in self.forwards:
            return self.forwards[guest_port]
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        self._listeners.append(listener)
        port = listener.getsockname()[1]
        self.forwards[guest_port] = port
        threading.Thread(target=self._accept_loop, args=(listener, guest_port), daemon=True).start()
        return port

    def _accept_loop(self, listener: socket.socket, guest_port: int) -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(conn, guest_port), daemon=True).start()

    def _relay(self, conn: socket.socket, guest_port: int) -> None:
        agent = self.agent
        try:
            if agent is None:
                return
            stream = agent.call({"op": "connect", "port": guest_port}, 30)["stream"]
        except (LabError, OSError):
            conn.close()
            return
        sink: "queue.Queue" = queue.Queue()
        agent.streams[stream] = sink

        def to_host():
            while True:
                chunk = sink.get()
                try:
                    if chunk is None:
                        conn.shutdown(socket.SHUT_WR)
                        return
                    conn.sendall(chunk)
                except OSError:
                    return

        writer = threading.Thread(target=to_host, daemon=True)
        writer.start()
        try:
            while True:
                data = conn.recv(65536)
                if not data:
                    break
                agent.post({"op": "send", "stream": stream, "data": base64.b64encode(data).decode()})
        except OSError:
            pass
        try:
            agent.post({"op": "close", "stream": stream})
        except OSError:
            pass
        writer.join(timeout=30)
        agent.streams.pop(stream, None)
        conn.close()

    def python_env(self) -> Dict[str, str]:
        return {"PYTHONPATH": GUEST_PYTHONPATH, "PYTHONPYCACHEPREFIX": "/tmp/pycache"}

    # ---- facts -----------------------------------------------------------------------------------
    def _collect_info(self) -> Dict:
        script = ("echo kernel=$(uname -r); "
                  "dpkg-query -W -f '${Package}=${Version}\\n' perftest rdma-core python3 linux-image-amd64 "
                  "ucx-utils libfabric-bin openmpi-bin 2>/dev/null; "
                  "echo perftest_version=$(ib_write_bw -V 2>&1 | head -1)")
        info = {}
        for line in self.sh(script, timeout=60).splitlines():
            if "=" in line:
                key, value = line.split("=", 1)
                info[key.strip().replace("-", "_")] = value.strip()
        info["release"] = self.release
        info["image"] = self.image.path.name
        return info


class Lab:
    """Hosts on one wire, each with its own release: h1 = 192.0.2.1, h2 = 192.0.2.2 (and h3.. = .3..).

    ``Lab(h1, h2)`` is the two-host lab (a direct UDP wire); ``Lab(h1, h2, h3, ...)`` boots three or more
    on one L2 segment through the hub (``hub.py``); ``wire="hub"`` uses the hub for two hosts too."""

    def __init__(self, h1: str = "bookworm", h2: str = "bookworm", *more: str, workdir: Optional[Path] = None,
                 wire: Optional[str] = None):
        releases = (h1, h2) + tuple(more)
        if len(releases) > MAX_HOSTS:
            raise ValueError("at most %d hosts" % MAX_HOSTS)
        self.releases = {"h%d" % (i + 1): r for i, r in enumerate(releases)}
        self.wire = wire or ("pair" if len(releases) == 2 else "hub")
        if self.wire not in ("pair", "hub") or (self.wire == "pair" and len(releases) != 2):
            raise ValueError("wire is 'pair' (two hosts) or 'hub'")
        self._own_workdir = workdir is None
        self.workdir = Path(workdir or tempfile.mkdtemp(prefix="rdmadoctor-lab-"))
        self.ports: Dict[str, int] = {}
        for name in self.releases:
            port = free_udp_port()
            while port in self.ports.values():
                port = free_udp_port()
            self.ports[name] = port
        self.hub_port: Optional[int] = None
        self.hub: Optional[subprocess.Popen] = None
        self.hosts: Dict[str, LabVM] = {}
        self.timings: Dict[str, float] = {}
        self.ssh_dir = self.workdir / "ssh"

    # ---- lifecycle -------------------------------------------------------------------------------
    def __enter__(self) -> "Lab":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def h1(self) -> LabVM:
        return self.hosts["h1"]

    @property
    def h2(self) -> LabVM:
        return self.hosts["h2"]

    @property
    def names(self) -> List[str]:
        return list(self.releases)

    @property
    def pair_name(self) -> str:
        distinct = set(self.releases.values())
        return next(iter(distinct)) if len(distinct) == 1 else "mixed"

    def _remote_port(self, name: str) -> int:
        """Where ``name``'s frames go: the hub, or on the two-host wire the other host's port."""
        if self.wire == "hub":
            return self.hub_port
        return self.ports[PEER[name]]

    def _make_vm(self, name: str, release: str, image: Optional[lab_image.Image] = None,
                 site: Optional[Path] = None) -> LabVM:
        return LabVM(name, release, self.ports[name], self._remote_port(name), self.workdir, image, site)

    def _start_hub(self) -> None:
        self.hub_port = free_udp_port()
        while self.hub_port in self.ports.values():
            self.hub_port = free_udp_port()
        argv = [sys.executable, "-m", "tests.lab.hub", "--listen", str(self.hub_port)]
        for port in self.ports.values():
            argv += ["--port", str(port)]
        self.hub = subprocess.Popen(argv, cwd=str(REPO), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, preexec_fn=_pdeathsig)
        line = self.hub.stdout.readline().decode(errors="replace")
        if "ready" not in line:
            raise LabError("the lab's hub did not start: %s" % line.strip())

    def start(self) -> None:
        started = time.monotonic()
        lab_image.require_tools(["qemu-system-x86_64"])
        images = lab_image.ensure_images(sorted(set(self.releases.values())))
        site = lab_image.ensure_site()
        self.timings["images"] = round(time.monotonic() - started, 1)
        try:
            if self.wire == "hub":
                self._start_hub()
            for name, release in self.releases.items():
                vm = self._make_vm(name, release, images[release], site)
                vm.start()
                self.hosts[name] = vm
            with ThreadPoolExecutor(max_workers=len(self.hosts)) as pool:
                list(pool.map(lambda vm: vm.wait_ready(), self.hosts.values()))
            self.timings["boot"] = round(time.monotonic() - started - self.timings["images"], 1)
            self.setup_rdma()
        except BaseException:
            self.close()
            raise
        self.timings["start"] = round(time.monotonic() - started, 1)

    def replace(self, name: str, release: str) -> LabVM:
        """Shuts ``name`` down and boots ``release`` in its place on the same wire (same ports, address)."""
        started = time.monotonic()
        vm = self._boot_in_place(name, release)
        try:
            self.reset()
        except BaseException:
            vm.kill_qemu()
            raise
        self.timings["replace-%s-%s" % (name, release)] = round(time.monotonic() - started, 1)
        return vm

    def _boot_in_place(self, name: str, release: str) -> LabVM:
        """``replace`` up to the baseline: a booted guest with RDMA and ssh set up."""
        old = self.hosts.pop(name, None)
        if old is not None:
            if old.alive:
                old.shutdown()
            else:
                old.kill_qemu()            # a gone guest cannot be asked to power off
        vm = self._make_vm(name, release)
        vm.start()
        self.hosts[name] = vm
        try:
            vm.wait_ready()
            self.releases[name] = release
            self._setup_host(vm)
            self._setup_ssh(vm)
        except BaseException:
            vm.kill_qemu()
            raise
        return vm

    def ensure(self, h1: str, h2: str, *more: str) -> None:
        """Makes the lab run these releases, replacing the hosts that differ and the hosts that are gone."""
        wanted = {"h%d" % (i + 1): release for i, release in enumerate((h1, h2) + tuple(more))}
        unknown = sorted(set(wanted) - set(self.releases))
        if unknown:
            raise LabError("this lab has no host %s" % ", ".join(unknown))
        booted = [name for name, release in wanted.items() if name not in self.hosts or self.releases[name] != release]
        for name in booted:
            started = time.monotonic()
            self._boot_in_place(name, wanted[name])
            self.timings["replace-%s-%s" % (name, wanted[name])] = round(time.monotonic() - started, 1)
        # the hosts kept may be gone too: revived before the baseline, which needs every host
        self.revive(reset=bool(booted))

    def revive(self, reset: bool = False) -> List[str]:
        """Boots a fresh guest in the place of every host that is gone (``alive`` is false, or its agent does not
        answer a ping), then the baseline when one was booted (or `reset`); returns their names. The gone guest's
        console is kept beside the new one's, as ``<host>-<release>-gone-<n>.console``."""
        revived = [name for name, vm in self.hosts.items() if not vm.responsive()]
        for name in revived:
            vm = self.hosts[name]
            if vm.console_path.exists():
                n = len(list(self.workdir.glob("%s-%s-gone-*.console" % (name, vm.release)))) + 1
                shutil.copyfile(vm.console_path, self.workdir / ("%s-%s-gone-%d.console" % (name, vm.release, n)))
            self._boot_in_place(name, self.releases[name])
        if revived or reset:
            self.reset()
        return revived

    def close(self) -> None:
        if self.hosts:
            with ThreadPoolExecutor(max_workers=len(self.hosts)) as pool:
                list(pool.map(lambda vm: vm.shutdown(), list(self.hosts.values())))
        for vm in self.hosts.values():
            vm.kill_qemu()
        self.hosts = {}
        if self.hub is not None:
            self.hub.kill()
            self.hub.wait(timeout=10)
            self.hub = None
        if self._own_workdir and not os.environ.get("RDMADOCTOR_LAB_KEEP"):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def both(self, fn):
        """Runs fn(vm) on every host in parallel (both of a two-host lab); returns {name: result}."""
        with ThreadPoolExecutor(max_workers=max(1, len(self.hosts))) as pool:
            futures = {name: pool.submit(fn, vm) for name, vm in self.hosts.items()}
            return {name: f.result() for name, f in futures.items()}

    every = both

    # ---- ssh between the guests, and from the host through the control channel -----------------
    def _ssh_keys(self) -> Dict[str, str]:
        """The lab's user key and host key (made once per lab): {"user", "user.pub", "host", "host.pub"}."""
        files = {"user": self.ssh_dir / "id_ed25519", "host": self.ssh_dir / "ssh_host_ed25519_key"}
        if not all(p.exists() for p in files.values()):
            self.ssh_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
            for role, path in files.items():
                comment = "rdmadoctor-lab-%s" % role
                if shutil.which("ssh-keygen"):
                    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                                   check=True, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
                else:  # no OpenSSH on the host: the guest's ssh-keygen makes it
                    vm = next(iter(self.hosts.values()))
                    vm.sh("rm -f /tmp/labkey /tmp/labkey.pub && ssh-keygen -q -t ed25519 -N '' -C %s -f /tmp/labkey"
                          % comment)
                    path.write_text(vm.sh("cat /tmp/labkey"))
                    Path(str(path) + ".pub").write_text(vm.sh("cat /tmp/labkey.pub && rm -f /tmp/labkey*"))
                os.chmod(path, 0o600)
            (self.ssh_dir / "known_hosts").write_text(
                "lab-guest %s\n" % " ".join((self.ssh_dir / "ssh_host_ed25519_key.pub").read_text().split()[:2]))
        return {"user": files["user"].read_text(), "user.pub": Path(str(files["user"]) + ".pub").read_text(),
                "host": files["host"].read_text(), "host.pub": Path(str(files["host"]) + ".pub").read_text()}

    @property
    def ssh_key(self) -> Path:
        """The private key that every guest authorises for root and ``lab``."""
        return self.ssh_dir / "id_ed25519"

    def ssh_command(self, name: str, user: str = "root") -> List[str]:
        """ssh argv that reaches host ``name``'s sshd from this machine (127.0.0.1, through the control
        channel), checking the lab's host key: e.g. ``lab.ssh_command("h1") + ["hostname"]``."""
        vm = self.hosts[name]
        return ["ssh", "-F", "none", "-i", str(self.ssh_key), "-p", str(vm.forward(22)),
                "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes", "-o", "HostKeyAlias=lab-guest",
                "-o", "UserKnownHostsFile=%s" % (self.ssh_dir / "known_hosts"), "-o", "ConnectTimeout=20",
                "-o", "LogLevel=ERROR", "%s@127.0.0.1" % user]

    def _setup_ssh(self, vm: LabVM) -> None:
        """Keys, known hosts, /etc/hosts and a running sshd in one guest."""
        keys = self._ssh_keys()
        host_pub = " ".join(keys["host.pub"].split()[:2])
        hosts = "127.0.0.1 localhost\n" + "".join(
            "%s %s\n" % (host_address(n), n) for n in sorted(set(self.releases) | {"h1", "h2"}, key=host_index))
        files = [("/etc/hosts", hosts, "0644", "root"),
                 ("/etc/ssh/ssh_host_ed25519_key", keys["host"], "0600", "root"),
                 ("/etc/ssh/ssh_host_ed25519_key.pub", keys["host.pub"], "0644", "root"),
                 ("/etc/ssh/ssh_known_hosts", "192.0.2.*,h?,h??,localhost,127.0.0.1 %s\n" % host_pub, "0644", "root"),
                 ("/etc/ssh/ssh_config.d/rdmadoctor-lab.conf", SSH_CLIENT_CONFIG, "0644", "root"),
                 ("/etc/ssh/sshd_config.d/rdmadoctor-lab.conf", SSHD_CONFIG, "0644", "root")]
        for user, home in (("root", "/root"), (lab_image.LAB_USER, "/home/%s" % lab_image.LAB_USER)):
            files += [(home + "/.ssh/id_ed25519", keys["user"], "0600", user),
                      (home + "/.ssh/id_ed25519.pub", keys["user.pub"], "0644", user),
                      (home + "/.ssh/authorized_keys", keys["user.pub"], "0600", user)]
        # one round trip (each request costs a second or more under TCG): the guest's python3 writes them all
        vm.sh("python3 -c %s" % shlex.quote(_WRITE_FILES), stdin=json.dumps(files), timeout=60)
        # an account whose password field starts with "!" is "locked" and sshd refuses it even for keys
        vm.sh("usermod -p '*' %s && mkdir -p /run/sshd && chmod 0755 /run/sshd && "
              "(pgrep -x sshd >/dev/null || /usr/sbin/sshd)" % lab_image.LAB_USER, timeout=60)
        vm.forward(22)

    # ---- RDMA setup and the healthy baseline -----------------------------------------------------
    def setup_rdma(self) -> None:
        self.both(self._setup_host)
        self._ssh_keys()
        self.both(self._setup_ssh)
        self.reset()

    @staticmethod
    def _setup_host(vm: LabVM) -> None:
        vm.sh("modprobe rdma_rxe && modprobe ib_uverbs && modprobe rdma_ucm && "
              "ip link set {dev} mtu 1500 up && ip addr replace {ip}/{p} dev {dev} && "
              "(test -e /sys/class/infiniband/{rxe} || rdma link add {rxe} type rxe netdev {dev})".format(
                  dev=NETDEV, ip=vm.address, p=PREFIX, rxe=RXE), timeout=60)

    @staticmethod
    def baseline_script(vm: LabVM) -> str:
        """Shell that returns a host to the healthy baseline; idempotent, each step tolerant."""
        return "\n".join([
            "exec 2>&1",
            # leftover test programs and helpers (SIGKILL; zombies are harmless and filtered below)
            "pkill -KILL -x '%s'" % "|".join(PERFTEST_BINARIES + PRODUCER_BINARIES),
            # a bracket in the pattern so that it does not match this shell's own command line
            "pkill -KILL -f '[%s]%s'" % (MPI_PROGRAM[0], MPI_PROGRAM[1:]),
            "nft flush ruleset",
            "tc qdisc del dev %s root 2>/dev/null" % NETDEV,
            "sysctl -qw net.ipv4.tcp_syn_retries=6",
            "modprobe -a rdma_rxe ib_uverbs rdma_ucm",
            "for l in $(ip -o link show | awk -F': ' '{print $2}' | cut -d@ -f1); do "
            "case $l in lo|%s) ;; *) ip link del $l;; esac; done" % NETDEV,
            "ip link set %s mtu 1500 up" % NETDEV,
            # re-address only when needed: every change of the IPv4 address rewrites rxe's GID table
            "[ \"$(ip -o -4 addr show dev {d} | awk '{{print $4}}')\" = {a}/{p} ] || "
            "{{ ip addr flush dev {d}; ip addr add {a}/{p} dev {d}; }}".format(d=NETDEV, a=vm.address, p=PREFIX),
            "ip neigh flush dev %s" % NETDEV,
            # (a plain flush leaves the entries set by hand, which a fault may have made)
            "ip neigh flush dev %s nud permanent" % NETDEV,
            "test -e /sys/class/infiniband/%s || rdma link add %s type rxe netdev %s" % (RXE, RXE, NETDEV),
            # what Debian's rdma-core udev rules would do (udevd does not run in the lab guests)
            "chmod 0666 /dev/infiniband/uverbs* /dev/infiniband/rdma_cm 2>/dev/null",
            # sshd (the producers' Open MPI launches over it); started at setup, restarted if a fault killed it
            "test ! -e /etc/ssh/ssh_host_ed25519_key || pgrep -x sshd >/dev/null || "
            "{ mkdir -p /run/sshd; /usr/sbin/sshd; }",
            "rm -f /tmp/facts.json",
            # the producers' Open MPI runs raise the lab user's memlock limit for ssh logins; the baseline has none
            "rm -f /etc/security/limits.d/rdmadoctor-lab.conf",
            "true",
        ])

    @staticmethod
    def state_script(vm: LabVM) -> str:
        return "\n".join([
            "exec 2>&1",
            "i=0; while [ $i -lt 50 ]; do "
            "  s=$(cat /sys/class/infiniband/%s/ports/1/state 2>/dev/null); "
            "  g=$(cat /sys/class/infiniband/%s/ports/1/gids/1 2>/dev/null); "
            "  case \"$s/$g\" in *ACTIVE/0000:0000:0000:0000:0000:ffff:*) break;; esac; sleep 0.2; i=$((i+1)); done"
            % (RXE, RXE),
            "echo state=$(cat /sys/class/infiniband/%s/ports/1/state 2>/dev/null)" % RXE,
            "echo gid1=$(cat /sys/class/infiniband/%s/ports/1/gids/1 2>/dev/null)" % RXE,
            "echo mtu=$(cat /sys/class/net/%s/mtu)" % NETDEV,
            "echo addr=$(ip -o -4 addr show dev %s | awk '{print $4}' | tr '\\n' ' ')" % NETDEV,
            "echo links=$(ls /sys/class/net | tr '\\n' ' ')",
            "echo nft=$(nft list ruleset | wc -l)",
            "echo qdisc=$(tc qdisc show dev %s | grep -c netem)" % NETDEV,
            "echo modules=$(for m in rdma_rxe ib_uverbs rdma_ucm; do [ -d /sys/module/$m ] && printf '%s,' $m; done)",
            "echo procs=$(ps -eo stat=,comm= | awk '$1 !~ /^Z/ {print $2}' | grep -cxE '%s')"
            % "|".join(PERFTEST_BINARIES),
            "echo devmodes=$(stat -c %a /dev/infiniband/uverbs0 /dev/infiniband/rdma_cm 2>/dev/null | tr '\\n' ',')",
        ])

    def reset(self, attempts: int = 2) -> Dict[str, Dict[str, str]]:
        """Returns both hosts to the healthy baseline and verifies it (raises LabError if it is not)."""
        problems: List[str] = []
        for _ in range(attempts):
            # one round trip per host: the baseline, then the state it reached
            states = self.both(lambda vm: self._parse_state(
                vm.run(self.baseline_script(vm) + "\n" + self.state_script(vm), timeout=90).output))
            problems = []
            for name, st in states.items():
                vm = self.hosts[name]
                want = {
                    "state": "4: ACTIVE", "mtu": "1500", "addr": "%s/%d" % (vm.address, PREFIX),
                    "links": "eth0 lo", "nft": "0", "qdisc": "0", "modules": "rdma_rxe,ib_uverbs,rdma_ucm,",
                    "procs": "0", "devmodes": "666,666,",
                }
                for key, value in want.items():
                    if st.get(key) != value:
                        problems.append("%s %s=%r (want %r)" % (name, key, st.get(key), value))
                if not st.get("gid1", "").endswith(_mapped_gid_tail(vm.address)):
                    problems.append("%s gid1=%r" % (name, st.get("gid1")))
            if not problems:
                pings = self.both(lambda vm: None if vm.name == "h1" else vm.run(
                    "ping -c 1 -W 3 %s" % self.h1.address, timeout=15))
                for name in self.names:
                    if pings.get(name) is not None and not pings[name].ok:
                        problems.append("%s cannot ping h1: %s" % (name, pings[name].output[-300:]))
                if not problems:
                    return states
        raise LabError("lab baseline not reached: " + "; ".join(problems))

    @staticmethod
    def _parse_state(text: str) -> Dict[str, str]:
        state = {}
        for line in text.splitlines():
            if "=" in line:
                key, value = line.split("=", 1)
                state[key.strip()] = value.strip()
        return state


def _mapped_gid_tail(address: str) -> str:
    a, b, c, d = (int(x) for x in address.split("."))
    return "ffff:%02x%02x:%02x%02x" % (a, b, c, d)
