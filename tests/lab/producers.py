"""Other RDMA programs ("producers" of logs) under the lab's faults, as data, and their recorder.

perftest is the fault matrix's program (scenarios.py). The same faults also break the programs that
people run next: UCX's ``ucx_perftest``, libfabric's ``fi_pingpong``, Open MPI's ``mpirun`` (pml ucx, over
ssh between the guests), rdma_cm's ``rping`` and ``ucmatose``, and libibverbs' ``ibv_rc_pingpong``. Each
``ProducerRun`` is one producer under one fault: the fault's setup steps, user and memlock limit come
from the scenario of that name in scenarios.py (``"healthy"`` is the untouched baseline), and where the
fault is a wrong option (GID index, device name) the producer's own spelling of it is given here.

Recordings: ``fixtures/lab/<pair>/<fault>/<producer>/{server.log,client.log,meta.json}``. ``meta.json``
states the commands, the environment variables, each side's exit code, whether it was interrupted at
its bound, ``expect`` (the cause slug a diagnosis should ideally conclude, ``"none"`` for a healthy
run; the fault's true cause even where the logs alone cannot show it, with ``alternatives`` for what
the logs cannot tell apart) and ``lines`` (what each side's log must keep containing).

    python -m tests.lab.producers --list
    python -m tests.lab.producers --pair bookworm [--producer rping] [--fault healthy] [--out DIR]
"""
from __future__ import annotations

import argparse
import datetime
import json
import shlex
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from .scenarios import BY_NAME as SCENARIOS, CAUSES, PAIR_ORDER, PAIRS, SERVER_IP, Side, Step

HEALTHY = "healthy"


@dataclass(frozen=True)
class Producer:
    """One program and how it is run when nothing is wrong."""
    name: str                              # recording folder, e.g. "ucx_perftest-rc"
    program: str                           # the binary both hosts must have
    client: str                            # "{server}" is the server's address
    server: Optional[str] = None           # None: one command drives both hosts (mpirun)
    env: Tuple[Tuple[str, str], ...] = ()  # written before the command, as a user types it
    client_host: str = "h2"
    server_host: str = "h1"
    user: Optional[str] = None             # who runs it (None = root)
    ready: Optional[str] = None            # text the server prints once it waits (None: wait ready_delay)
    ready_delay: float = 3.0
    client_timeout: float = 40.0
    server_grace: float = 8.0
    pairs: Tuple[str, ...] = tuple(PAIR_ORDER)
    notes: str = ""


@dataclass(frozen=True)
class ProducerRun:
    producer: Producer
    fault: str                                   # "healthy" or a scenario name of scenarios.py
    expect: str                                  # cause slug, or "none"
    alternatives: Tuple[str, ...] = ()
    server_args: str = ""                        # appended to the server's command for this fault
    client_args: str = ""
    client: Optional[str] = None                 # replaces the client command (e.g. another device)
    server_env: Tuple[Tuple[str, str], ...] = ()  # added to (or replacing) the producer's env
    client_env: Tuple[Tuple[str, str], ...] = ()
    extra_setup: Tuple[Step, ...] = ()           # steps the scenario does not have (producer-specific)
    no_server: bool = False                      # the fault is that the server is not running
    server_lines: Tuple[str, ...] = ()
    client_lines: Tuple[str, ...] = ()
    client_timeout: Optional[float] = None
    pairs: Optional[Tuple[str, ...]] = None
    notes: str = ""

    @property
    def name(self) -> str:
        return "%s/%s" % (self.fault, self.producer.name)

    @property
    def scenario(self):
        return None if self.fault == HEALTHY else SCENARIOS[self.fault]

    @property
    def setup(self) -> Tuple[Step, ...]:
        sc = self.scenario
        return (sc.setup if sc else ()) + self.extra_setup

    def run_pairs(self) -> Tuple[str, ...]:
        return self.pairs if self.pairs is not None else self.producer.pairs

    def bound(self) -> float:
        return self.client_timeout or self.producer.client_timeout

    @staticmethod
    def _merge(base, extra) -> Tuple[Tuple[str, str], ...]:
        merged = dict(base)
        merged.update(dict(extra))
        return tuple(merged.items())

    def _faulty_side(self, role: str) -> Dict:
        """User and memlock limit that the scenario gives its side of this role (e.g. a server as lab, 64 KiB)."""
        sc = self.scenario
        side = getattr(sc, role, None) if sc else None
        if side is None or (side.user is None and side.memlock_kib is None):
            return {}
        return {"user": side.user, "memlock_kib": side.memlock_kib}

    def server_side(self) -> Optional[Side]:
        p = self.producer
        if p.server is None or self.no_server:
            return None
        env = self._merge(p.env, self.server_env)
        cmd = (p.server + " " + self.server_args).strip()
        kw = dict({"user": p.user}, **self._faulty_side("server"))
        return Side(_with_env(env, cmd), host=p.server_host, **kw)

    def client_side(self) -> Side:
        p = self.producer
        env = self._merge(p.env, self.client_env)
        cmd = ((self.client or p.client) + " " + self.client_args).strip().format(server=SERVER_IP)
        # mpirun drives both ranks from the server host: the scenario's server-side user/limit lands on it
        kw = dict({"user": p.user}, **self._faulty_side("server" if p.server is None else "client"))
        return Side(_with_env(env, cmd), host=p.client_host, **kw)

    def env(self) -> Dict[str, Dict[str, str]]:
        p = self.producer
        out = {"client": dict(self._merge(p.env, self.client_env))}
        if self.server_side() is not None:
            out["server"] = dict(self._merge(p.env, self.server_env))
        return out


def _with_env(env, cmd: str) -> str:
    return " ".join(["%s=%s" % (k, shlex.quote(v)) for k, v in env] + [cmd])


# ---- the producers ---------------------------------------------------------------------------------------
# Under TCG a guest runs rxe at 10-20 MB/s and answers slowly: the UCX timeouts are raised so that slowness
# is not taken for loss; everything else is the programs' defaults.
UCX_COMMON = (("UCX_NET_DEVICES", "rxe0:1"),)
IBV_RC = Producer(
    "ibv_rc_pingpong", "ibv_rc_pingpong", server="ibv_rc_pingpong -d rxe0 -g 1 -n 100",
    client="ibv_rc_pingpong -d rxe0 -g 1 -n 100 {server}", ready="local address",
    notes="-g 1 is the RoCEv2 GID of the IPv4 address (rxe has no IB LIDs, so a GID index is required).")
RPING = Producer(
    "rping", "rping", server="rping -s -a {server} -v -C 10".format(server=SERVER_IP),
    client="rping -c -a {server} -v -C 10", ready=None, ready_delay=3.0)
UCMATOSE = Producer("ucmatose", "ucmatose", server="ucmatose", client="ucmatose -s {server}", ready=None)
UCX_RC = Producer(
    "ucx_perftest-rc", "ucx_perftest", server="ucx_perftest",
    client="ucx_perftest {server} -t tag_lat -n 200", client_timeout=45,
    env=(("UCX_TLS", "rc_verbs,ud_verbs,self"),) + UCX_COMMON, ready=None, ready_delay=4.0,
    notes="rc_verbs needs an auxiliary transport (ud_verbs) for its wire-up.")
FI_MSG = Producer(
    "fi_pingpong-msg", "fi_pingpong", server="fi_pingpong -p verbs -e msg -I 100 -S 1024",
    client="fi_pingpong -p verbs -e msg -I 100 -S 1024 {server}", ready=None)
MPI = Producer(
    "mpirun-ucx", "mpirun", client_host="h1", user="lab",
    client="mpirun -np 2 --host 192.0.2.1,192.0.2.2 --mca pml ucx -x UCX_TLS=rc_verbs,ud_verbs,self "
           "-x UCX_NET_DEVICES=rxe0:1 python3 /lab/src/tests/lab/mpi_pingpong.py 50",
    client_timeout=90, pairs=("bookworm", "trixie"),
    notes="Rank 0 runs on h1 (where mpirun is typed), rank 1 on h2, launched over ssh as user lab. "
          "Open MPI needs the same version on every host: bookworm has 4.1, trixie 5.0, so no mixed pair.")

PRODUCERS: Dict[str, Producer] = {p.name: p for p in (IBV_RC, RPING, UCMATOSE, UCX_RC, FI_MSG, MPI)}


def _runs() -> List[ProducerRun]:
    R = ProducerRun
    runs: List[ProducerRun] = []
    # ibv_rc_pingpong
    runs += [
        R(IBV_RC, HEALTHY, "none"),
        R(IBV_RC, "gid-index-empty-client", "wrong-gid-index", client="ibv_rc_pingpong -d rxe0 -g 5 -n 100 {server}"),
        R(IBV_RC, "mtu-netdev-mismatch", "mtu-mismatch", server_args="-m 4096", client_args="-m 4096",
          client_timeout=20,
          notes="Both sides ask for a 4096-byte path MTU after h2's netdev went to 9000; h1's is 1500."),
        R(IBV_RC, "firewall-drop-udp-4791", "firewall-blocks-port", alternatives=("packet-loss",), client_timeout=20),
        R(IBV_RC, "memlock-64k-nonroot-server", "memlock-limit", server_args="-s 1048576", client_args="-s 1048576",
          notes="1 MiB messages: the buffer cannot be pinned under a 64 KiB limit (4 KiB ones could)."),
        R(IBV_RC, "netdev-down-server", "port-down", client_timeout=30),
        R(IBV_RC, "wrong-device-name-client", "wrong-device-name", client="ibv_rc_pingpong -d rxe1 -g 1 -n 100 {server}"),
        R(IBV_RC, "ib-uverbs-not-loaded-server", "kernel-module-missing", alternatives=("no-rdma-device",)),
        R(IBV_RC, "server-not-running", "server-not-running", no_server=True),
    ]
    # rdma_cm programs: no device or GID option (rdma_cm picks them from the address)
    runs += [
        R(RPING, HEALTHY, "none"),
        R(RPING, "firewall-drop-udp-4791", "firewall-blocks-port", alternatives=("packet-loss",), client_timeout=30),
        R(RPING, "netdev-down-server", "port-down", client_timeout=30),
        R(RPING, "ib-uverbs-not-loaded-server", "kernel-module-missing", alternatives=("no-rdma-device",)),
        R(RPING, "server-not-running", "server-not-running", no_server=True),
        R(UCMATOSE, HEALTHY, "none"),
        R(UCMATOSE, "firewall-drop-udp-4791", "firewall-blocks-port", alternatives=("packet-loss",), client_timeout=30),
        R(UCMATOSE, "ib-uverbs-not-loaded-server", "kernel-module-missing", alternatives=("no-rdma-device",)),
        R(UCMATOSE, "server-not-running", "server-not-running", no_server=True),
    ]
    # UCX: on bookworm (UCX 1.13.1) the healthy baseline itself fails on rxe under TCG (see docs/lab.md)
    runs += [
        R(UCX_RC, HEALTHY, "none",
          notes="On UCX 1.13.1 both sides abort after about 35 s with 'UD endpoint ...: unhandled timeout error': "
                "the ud_verbs wire-up endpoints never get their acknowledgements on rxe (UCX_UD_TIMEOUT=10m only "
                "turns it into a hang; rc_verbs without ud_verbs has no auxiliary transport). A healthy UCX "
                "baseline was not reached; the recording is the real failure."),
        R(UCX_RC, "wrong-device-name-client", "wrong-device-name", client_env=(("UCX_NET_DEVICES", "rxe1:1"),)),
        R(UCX_RC, "server-not-running", "server-not-running", no_server=True),
    ]
    # libfabric (verbs provider, FI_EP_MSG over rdma_cm)
    runs += [
        R(FI_MSG, HEALTHY, "none"),
        R(FI_MSG, "firewall-drop-udp-4791", "firewall-blocks-port", alternatives=("packet-loss",), client_timeout=30),
        R(FI_MSG, "wrong-device-name-client", "wrong-device-name", client_args="-d rxe1"),
        R(FI_MSG, "ib-uverbs-not-loaded-server", "kernel-module-missing", alternatives=("no-rdma-device",)),
        R(FI_MSG, "server-not-running", "server-not-running", no_server=True),
    ]
    # Open MPI: one command on h1; the faults of the "server" host land on rank 0 and the launcher
    runs += [
        R(MPI, HEALTHY, "none",
          notes="pml ucx inherits UCX 1.13.1's ud_verbs wire-up failure on rxe: rank 1 aborts in MPI_Barrier with "
                "'UD endpoint ...: unhandled timeout error' and mpirun reports the abort."),
        R(MPI, "wrong-device-name-client", "wrong-device-name",
          client=MPI.client.replace("UCX_NET_DEVICES=rxe0:1", "UCX_NET_DEVICES=rxe1:1")),
    ]
    return runs


# What each recorded log must keep containing ("server lines", "client lines"), read off the recordings.
CONNECT_FAILED = "Couldn't connect to %s:18515" % SERVER_IP
LINES: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {
    "healthy/ibv_rc_pingpong": (("100 iters in",), ("100 iters in",)),
    "gid-index-empty-client/ibv_rc_pingpong": (("Failed to modify QP to RTR", "Couldn't connect to remote QP"),
                                               ("GID ::\n", "Couldn't read/write remote address")),
    "mtu-netdev-mismatch/ibv_rc_pingpong": (("remote address:",), ("remote address:",)),
    "firewall-drop-udp-4791/ibv_rc_pingpong": (("remote address:",), ("remote address:",)),
    "memlock-64k-nonroot-server/ibv_rc_pingpong": (("Couldn't register MR",), (CONNECT_FAILED,)),
    "netdev-down-server/ibv_rc_pingpong": (("local address:",), (CONNECT_FAILED,)),
    "wrong-device-name-client/ibv_rc_pingpong": (("local address:",), ("IB device rxe1 not found",)),
    "ib-uverbs-not-loaded-server/ibv_rc_pingpong": (("IB device rxe0 not found",), (CONNECT_FAILED,)),
    "server-not-running/ibv_rc_pingpong": ((), (CONNECT_FAILED,)),
    "healthy/rping": (("server DISCONNECT EVENT...",), ("ping data: rdma-ping-9", "client DISCONNECT EVENT...")),
    # both sides print nothing at all until interrupted: only the prompt and the ^C (meta: timed_out)
    "firewall-drop-udp-4791/rping": (("rping -s -a 192.0.2.1",), ("rping -c -a 192.0.2.1",)),
}


# Recorded so far on the bookworm pair only; the other runs are planned (no pairs) until recorded.
RECORDED_PAIRS = ("bookworm",)


def _with_lines(run: ProducerRun) -> ProducerRun:
    from dataclasses import replace
    if run.name not in LINES:
        return replace(run, pairs=())
    server, client = LINES[run.name]
    return replace(run, server_lines=server, client_lines=client, pairs=run.pairs or RECORDED_PAIRS)


RUNS: List[ProducerRun] = [_with_lines(r) for r in _runs()]
BY_NAME: Dict[str, ProducerRun] = {r.name: r for r in RUNS}


def for_pair(pair: str) -> List[ProducerRun]:
    return [r for r in RUNS if pair in r.run_pairs()]


def validate() -> List[str]:
    problems = []
    seen = set()
    for r in RUNS:
        if r.name in seen:
            problems.append("duplicate run %s" % r.name)
        seen.add(r.name)
        if r.fault != HEALTHY and r.fault not in SCENARIOS:
            problems.append("%s: fault %r is no scenario of scenarios.py" % (r.name, r.fault))
        for slug in (r.expect,) + r.alternatives:
            if slug != "none" and slug not in CAUSES:
                problems.append("%s: unknown cause slug %r" % (r.name, slug))
        for pair in r.run_pairs():
            if pair not in PAIRS:
                problems.append("%s: unknown pair %r" % (r.name, pair))
    return problems


# ---- recording -------------------------------------------------------------------------------------------
def _wait_ready(vm, handle: int, ready: Optional[str], delay: float, timeout: float = 30.0) -> Dict:
    """Until the server printed ``ready`` (or, without a marker, for ``delay`` seconds) or exited."""
    deadline = time.monotonic() + (timeout if ready else delay)
    while True:
        snap = vm.peek(handle)
        text = snap["stdout"] + snap.get("stderr", "")
        if (ready and ready in text) or not snap["running"] or time.monotonic() > deadline:
            return snap
        time.sleep(0.3)


def run_producer(lab, run: ProducerRun, out_dir: Optional[Path] = None, recorder: Optional[str] = None) -> Dict:
    """Resets the lab, puts the fault in place, runs the producer's server and client, writes the recording."""
    from .runner import _rlimits, _terminal_text
    from .vm import LabError

    started = time.monotonic()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    lab.reset()
    setup_log = []
    for step in run.setup:
        result = lab.hosts[step.host].run(step.sh, timeout=60)
        setup_log.append({"host": step.host, "sh": step.sh, "rc": result.rc, "output": result.output[-500:]})
        if not result.ok:
            raise LabError("%s: setup step failed on %s: %s\n%s" % (run.name, step.host, step.sh, result.output))
    p = run.producer
    server, client = run.server_side(), run.client_side()
    server_result = None
    server_start: Dict = {}
    handle = None
    try:
        if server is not None:
            svm = lab.hosts[server.host]
            handle = svm.spawn(server.cmd, user=server.user, pty=True, rlimits=_rlimits(server))
            snap = _wait_ready(svm, handle, p.ready, p.ready_delay)
            server_start = {"ready": bool(p.ready and p.ready in snap["stdout"]), "exited_early": not snap["running"],
                            "seconds": snap["seconds"]}
        cvm = lab.hosts[client.host]
        client_result = cvm.run(client.cmd, timeout=run.bound(), user=client.user, pty=True,
                                rlimits=_rlimits(client))
        if server is not None:
            server_result = svm.wait(handle, timeout=p.server_grace)
            handle = None
    finally:
        if handle is not None:
            try:
                svm.kill(handle)
            except LabError:
                pass
    logs = {"client.log": _terminal_text(client, client_result)}
    if server is not None:
        logs["server.log"] = _terminal_text(server, server_result)

    def side_meta(side: Side, result, bound: float) -> Dict:
        return {"host": side.host, "release": lab.releases[side.host], "user": side.user or "root",
                "memlock_kib": side.memlock_kib, "command": side.cmd,
                "exit_code": None if result is None else result.rc,
                "timed_out": None if result is None else result.timed_out,
                "seconds": None if result is None else result.seconds, "bound_seconds": bound}

    sc = run.scenario
    meta = {
        "producer": p.name, "program": p.program, "fault": run.fault, "pair": lab.pair_name,
        "fault_description": sc.fault if sc else "none: the healthy baseline",
        "faulty": sc.faulty if sc else None,
        "setup": setup_log,
        "env": run.env(),
        "server": side_meta(server, server_result, p.server_grace) if server else None,
        "server_start": server_start,
        "client": side_meta(client, client_result, run.bound()),
        "bounds": {"client_timeout": run.bound(), "server_grace_after_client": p.server_grace,
                   "note": "a side still running at its bound was interrupted (SIGINT, then SIGKILL after 1 s); "
                           "its log ends in ^C"},
        "expect": run.expect, "alternatives": list(run.alternatives),
        "lines": {"server": list(run.server_lines), "client": list(run.client_lines)},
        "notes": " ".join(x for x in (p.notes, run.notes) if x),
        "hosts": {name: dict(vm.info, address=vm.address) for name, vm in lab.hosts.items()},
        "date": date,
        "seconds": round(time.monotonic() - started, 1),
        "recorder": recorder or " ".join(shlex.quote(a) for a in [Path(sys.executable).name] + sys.argv),
    }
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        for stale in out_dir.glob("*.log"):
            stale.unlink()
        for name, text in logs.items():
            (out_dir / name).write_text(text)
        (out_dir / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    meta["_logs"] = logs
    return meta


def available(lab, producer: Producer) -> bool:
    """The producer's program is installed on every host of the lab."""
    return all(vm.run("command -v %s" % producer.program, timeout=30).ok for vm in lab.hosts.values())


def record(pairs: List[str], producers: Optional[List[str]], faults: Optional[List[str]], out: Path,
           recorder: Optional[str] = None) -> int:
    from .record import _recover
    from .vm import Lab, LabError

    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(SystemExit(143)))
    failures = 0
    lab = None
    started = time.monotonic()
    try:
        for pair in pairs:
            runs = [r for r in for_pair(pair) if (producers is None or r.producer.name in producers)
                    and (faults is None or r.fault in faults)]
            if not runs:
                continue
            if lab is None:
                lab = Lab(*PAIRS[pair])
                lab.start()
            else:
                lab.ensure(*PAIRS[pair])
            missing = {r.producer.name for r in runs if not available(lab, r.producer)}
            for r in runs:
                if r.producer.name in missing:
                    print("[lab-producers] %s / %s: %s not installed, skipped" % (pair, r.name, r.producer.program))
                    continue
                print("[lab-producers] %s / %s ..." % (pair, r.name), end=" ", flush=True)
                try:
                    meta = run_producer(lab, r, out / pair / r.fault / r.producer.name, recorder=recorder)
                except (LabError, OSError) as exc:
                    failures += 1
                    print("ERROR: %s" % exc, flush=True)
                    _recover(lab)
                    continue
                s, c = meta["server"] or {}, meta["client"]
                print("%.1f s  server rc=%s%s  client rc=%s%s" % (
                    meta["seconds"], s.get("exit_code"), " (bound)" if s.get("timed_out") else "",
                    c["exit_code"], " (bound)" if c["timed_out"] else ""), flush=True)
    finally:
        if lab is not None:
            lab.close()
    print("[lab-producers] total %.1f s, %d error(s)" % (time.monotonic() - started, failures))
    return 1 if failures else 0


def refresh_meta(out: Path) -> int:
    """Rewrites the table's judgement (expect, alternatives, lines, notes) into the recordings' meta.json,
    leaving what the lab recorded untouched; returns how many were rewritten."""
    count = 0
    for path in sorted(out.glob("*/*/*/meta.json")):
        run = BY_NAME.get("%s/%s" % (path.parent.parent.name, path.parent.name))
        if run is None:
            continue
        meta = json.loads(path.read_text())
        meta.update({"expect": run.expect, "alternatives": list(run.alternatives),
                     "lines": {"server": list(run.server_lines), "client": list(run.client_lines)},
                     "notes": " ".join(x for x in (run.producer.notes, run.notes) if x)})
        path.write_text(json.dumps(meta, indent=2) + "\n")
        count += 1
    return count


def main(argv: Optional[List[str]] = None) -> int:
    from .vm import REPO
    parser = argparse.ArgumentParser(prog="python -m tests.lab.producers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", action="append", choices=sorted(PAIRS))
    parser.add_argument("--producer", action="append", choices=sorted(PRODUCERS))
    parser.add_argument("--fault", action="append", metavar="NAME", help="healthy or a scenario name (repeatable)")
    parser.add_argument("--out", type=Path, default=REPO / "fixtures" / "lab")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--refresh-meta", action="store_true",
                        help="rewrite expect/lines/notes of the recordings under --out from the table, and exit")
    args = parser.parse_args(argv)
    if args.refresh_meta:
        print("%d meta.json rewritten" % refresh_meta(args.out))
        return 0
    if args.list:
        for r in RUNS:
            print("%-46s %-22s %s" % (r.name, r.expect, ",".join(r.run_pairs())))
        return 0
    pairs = [p for p in PAIR_ORDER if p in (args.pair or PAIR_ORDER)]
    recorder = " ".join(["python", "-m", "tests.lab.producers"] + [shlex.quote(a) for a in (argv or sys.argv[1:])])
    return record(pairs, args.producer, args.fault, args.out, recorder=recorder)


if __name__ == "__main__":
    sys.exit(main())
