"""Other RDMA programs ("producers" of logs) under the lab's faults, as data, and their recorder.

perftest is the fault matrix's program (scenarios.py). The same faults also break the programs that
people run next: UCX's ``ucx_perftest``, libfabric's ``fi_pingpong``, Open MPI's ``mpirun`` (pml ucx, over
ssh between the guests; pml ob1 with btl tcp as a control), rdma_cm's ``rping`` and ``ucmatose``, and
libibverbs' ``ibv_rc_pingpong``. Each ``ProducerRun`` is one producer under one scenario: the scenario's
setup steps, user and memlock limit come from the scenario of that name in scenarios.py (``"healthy"`` is
the untouched baseline), and where the fault is a wrong option (GID index, device name) the producer's
own spelling of it is given here.

Recordings: ``fixtures/lab/<pair>/<scenario>/<producer>/{server.log,client.log,meta.json}``. ``meta.json``
states the commands, the environment variables, each side's exit code, whether it was interrupted at
its bound, and three judgements:

* ``fault``: the cause slug of what the lab really did wrong (``"none"`` for the untouched baseline), also
  where it did not break the run (e.g. a 64 KiB memlock limit under a program with small buffers);
* ``expect``: the verdict an explain of the two logs must give, i.e. the cause an expert concludes from
  those logs alone (``"none"``: the run worked; ``"unknown"``: the logs cannot decide, and ``fault``
  must be among explain's candidates). Where the logs cannot tell the fault from another cause,
  ``expect`` is the logs' conclusion (the convention of scenarios.py's ``expect_explain``);
* ``alternatives``: the other causes the same logs fit.

``lines`` are what each side's log must keep containing.

    python -m tests.lab.producers --list
    python -m tests.lab.producers --pair bookworm [--producer rping] [--scenario healthy] [--out DIR]
"""
from __future__ import annotations

import argparse
import datetime
import json
import re
import shlex
import signal
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Tuple

from .scenarios import BY_NAME as SCENARIOS, PAIR_ORDER, PAIRS, SERVER_IP, WRONG_IP, Side, Step

HEALTHY = "healthy"
UNLIMITED = -1    # memlock_kib: RLIM_INFINITY


def cause_slugs() -> FrozenSet[str]:
    """The cause vocabulary (docs/causes.md), which the producers' judgements use."""
    from .vm import REPO
    text = (REPO / "docs" / "causes.md").read_text()
    return frozenset(re.findall(r"^\| `([a-z0-9-]+)` \|", text, re.M)) | {"unknown"}


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
    memlock_kib: Optional[int] = None      # the user's memlock limit where the scenario sets none
    setup: Tuple[Step, ...] = ()           # root steps before every run (e.g. limits.conf for ssh logins)
    ready: Optional[str] = None            # text the server prints once it waits (None: wait ready_delay)
    ready_delay: float = 3.0
    client_timeout: float = 40.0
    server_grace: float = 8.0
    pairs: Tuple[str, ...] = tuple(PAIR_ORDER)
    notes: str = ""


@dataclass(frozen=True)
class Judgement:
    """What a recording's logs must make explain say (expect), what was really wrong (fault), and the other
    causes the same logs fit (alternatives)."""
    expect: str
    fault: str
    alternatives: Tuple[str, ...] = ()


@dataclass(frozen=True)
class ProducerRun:
    producer: Producer
    scenario: str                                # "healthy" or a scenario name of scenarios.py
    expect: str                                  # verdict explain must give: cause slug, "none" or "unknown"
    fault: str = ""                              # what the lab did wrong (cause slug or "none"); "" = expect
    alternatives: Tuple[str, ...] = ()
    server_args: str = ""                        # appended to the server's command for this run
    client_args: str = ""
    client: Optional[str] = None                 # replaces the client command (e.g. another device)
    server: Optional[str] = None                 # replaces the server command
    server_env: Tuple[Tuple[str, str], ...] = ()  # added to (or replacing) the producer's env
    client_env: Tuple[Tuple[str, str], ...] = ()
    extra_setup: Tuple[Step, ...] = ()           # steps the scenario does not have (producer-specific)
    no_server: bool = False                      # the fault is that the server is not running
    server_lines: Tuple[str, ...] = ()
    client_lines: Tuple[str, ...] = ()
    pair_lines: Tuple[Tuple[str, Tuple[Tuple[str, ...], Tuple[str, ...]]], ...] = ()  # a pair's own key lines
    client_timeout: Optional[float] = None
    pairs: Optional[Tuple[str, ...]] = None
    planned: bool = False                        # not recorded yet: no recording is required
    on_pair: Tuple[Tuple[str, "Judgement"], ...] = ()   # where a pair's logs say something else
    notes: str = ""

    @property
    def name(self) -> str:
        return "%s/%s" % (self.scenario, self.producer.name)

    @property
    def truth(self) -> str:
        return self.fault or self.expect

    def lines(self, pair: Optional[str] = None) -> Dict[str, Tuple[str, ...]]:
        """What each side's log keeps containing on ``pair``: {"server": (...), "client": (...)}."""
        server, client = dict(self.pair_lines).get(pair) or (self.server_lines, self.client_lines)
        return {"server": server, "client": client}

    def judgement(self, pair: Optional[str] = None) -> "Judgement":
        """(expect, fault, alternatives) of this run's recording on ``pair``."""
        own = dict(self.on_pair).get(pair) if pair else None
        return own or Judgement(self.expect, self.truth, self.alternatives)

    @property
    def definition(self):
        """The scenario of scenarios.py whose setup, users and limits this run reuses (None: healthy)."""
        return None if self.scenario == HEALTHY else SCENARIOS[self.scenario]

    @property
    def setup(self) -> Tuple[Step, ...]:
        sc = self.definition
        return self.producer.setup + (sc.setup if sc else ()) + self.extra_setup

    def target_pairs(self) -> Tuple[str, ...]:
        """The pairs the recorder runs it on."""
        return self.pairs if self.pairs is not None else self.producer.pairs

    def run_pairs(self) -> Tuple[str, ...]:
        """The pairs where a recording must exist (none while planned)."""
        return () if self.planned else self.target_pairs()

    def bound(self) -> float:
        return self.client_timeout or self.producer.client_timeout

    @staticmethod
    def _merge(base, extra) -> Tuple[Tuple[str, str], ...]:
        merged = dict(base)
        merged.update(dict(extra))
        return tuple(merged.items())

    def _side_kw(self, role: str) -> Dict:
        """User and memlock limit of a side: the scenario's for that role (e.g. a server as lab with 64 KiB),
        else the producer's."""
        p = self.producer
        sc = self.definition
        side = getattr(sc, role, None) if sc else None
        if side is not None and (side.user is not None or side.memlock_kib is not None):
            return {"user": side.user, "memlock_kib": side.memlock_kib}
        return {"user": p.user, "memlock_kib": p.memlock_kib}

    def server_side(self) -> Optional[Side]:
        p = self.producer
        if p.server is None or self.no_server:
            return None
        env = self._merge(p.env, self.server_env)
        cmd = ((self.server or p.server) + " " + self.server_args).strip()
        return Side(_with_env(env, cmd), host=p.server_host, **self._side_kw("server"))

    def client_side(self) -> Side:
        p = self.producer
        env = self._merge(p.env, self.client_env)
        cmd = ((self.client or p.client) + " " + self.client_args).strip().format(server=SERVER_IP)
        # mpirun drives both ranks from the server host: the scenario's server-side user/limit lands on it
        return Side(_with_env(env, cmd), host=p.client_host,
                    **self._side_kw("server" if p.server is None else "client"))

    def env(self) -> Dict[str, Dict[str, str]]:
        p = self.producer
        out = {"client": dict(self._merge(p.env, self.client_env))}
        if self.server_side() is not None:
            out["server"] = dict(self._merge(p.env, self.server_env))
        return out


def _with_env(env, cmd: str) -> str:
    return " ".join(["%s=%s" % (k, shlex.quote(v)) for k, v in env] + [cmd])


# ---- the producers ---------------------------------------------------------------------------------------
# UCX's UD transport (ud_verbs, and rc_verbs' wire-up, which goes over UD) checks the destination GID of
# every packet it receives on RoCE (uct_ud_iface_check_grh, src/uct/ib/ud/base/ud_iface.h) and silently
# drops those that do not match; on rdma_rxe every UD packet is dropped that way, so the endpoints never
# see an acknowledgement and abort ("UD endpoint ...: unhandled timeout error") or hang.
# UCX_UD_ETH_DGID_CHECK=n turns the check off: with it UD and RC work on rxe on both UCX releases.
UCX_RXE = (("UCX_NET_DEVICES", "rxe0:1"), ("UCX_UD_ETH_DGID_CHECK", "n"))
UCX_CLIENT = "ucx_perftest {server} -t tag_lat -n 200"
IBV_RC = Producer(
    "ibv_rc_pingpong", "ibv_rc_pingpong", server="ibv_rc_pingpong -d rxe0 -g 1 -n 100",
    client="ibv_rc_pingpong -d rxe0 -g 1 -n 100 {server}", ready="local address",
    notes="-g 1 is the RoCEv2 GID of the IPv4 address (rxe has no IB LIDs, so a GID index is required).")
RPING = Producer(
    "rping", "rping", server="rping -s -a {server} -v -C 10".format(server=SERVER_IP),
    client="rping -c -a {server} -v -C 10", ready=None, ready_delay=3.0)
UCMATOSE = Producer("ucmatose", "ucmatose", server="ucmatose", client="ucmatose -s {server}", ready=None)
UCX_RC = Producer(
    "ucx_perftest-rc", "ucx_perftest", server="ucx_perftest", client=UCX_CLIENT, client_timeout=50,
    env=(("UCX_TLS", "rc_verbs,ud_verbs,self"),) + UCX_RXE, ready="Waiting for connection", ready_delay=4.0,
    notes="rc_verbs needs an auxiliary transport (ud_verbs) for its wire-up; UCX_UD_ETH_DGID_CHECK=n lets UD "
          "work on rdma_rxe.")
UCX_RC_DEFAULTS = replace(
    UCX_RC, name="ucx_perftest-rc-dgid-check", env=(("UCX_TLS", "rc_verbs,ud_verbs,self"), UCX_RXE[0]),
    notes="The same run without UCX_UD_ETH_DGID_CHECK=n: UCX's UD drops every packet rdma_rxe delivers.")
UCX_UD = replace(
    UCX_RC, name="ucx_perftest-ud", env=(("UCX_TLS", "ud_verbs,self"),) + UCX_RXE,
    notes="UD only (no RC): UCX_UD_ETH_DGID_CHECK=n lets UD work on rdma_rxe.")
UCX_TCP = replace(
    UCX_RC, name="ucx_perftest-tcp", env=(("UCX_TLS", "tcp,self"), ("UCX_NET_DEVICES", "eth0")),
    notes="The control: UCX over TCP on the same netdev, no RDMA.")
FI_MSG = Producer(
    "fi_pingpong-msg", "fi_pingpong", server="fi_pingpong -p verbs -e msg -I 100 -S 1024",
    client="fi_pingpong -p verbs -e msg -I 100 -S 1024 {server}", env=(("FI_LOG_LEVEL", "warn"),), ready=None,
    notes="-S 1024: without it fi_pingpong walks every size up to 64 KiB and beyond at about 1.5 MB/s.")
# ofi_rxm sizes its verbs CQ as (rx + tx queue size) x FI_UNIVERSE_SIZE (default 256) = 65536 entries
# (rxm_ep_msg_cq_open, prov/rxm/src/rxm_ep.c); rdma_rxe allows 32767 (ibv_devinfo -v: max_cqe).
FI_RDM = Producer(
    "fi_pingpong-rdm", "fi_pingpong", server='fi_pingpong -p "verbs;ofi_rxm" -e rdm -I 100 -S 1024',
    client='fi_pingpong -p "verbs;ofi_rxm" -e rdm -I 100 -S 1024 {server}',
    env=(("FI_LOG_LEVEL", "warn"), ("FI_UNIVERSE_SIZE", "32")), ready=None,
    notes="FI_EP_RDM over verbs is the ofi_rxm utility provider on verbs MSG endpoints. FI_UNIVERSE_SIZE=32 keeps "
          "rxm's CQ (rx + tx size, times the universe size) within rdma_rxe's 32767 entries.")
FI_RDM_DEFAULTS = replace(
    FI_RDM, name="fi_pingpong-rdm-universe-default", env=(("FI_LOG_LEVEL", "warn"),),
    notes="The same run without FI_UNIVERSE_SIZE: rxm asks for a 65536-entry CQ, rdma_rxe allows 32767.")
MPI_LIMITS = tuple(Step(h, "printf 'lab - memlock unlimited\\n' > /etc/security/limits.d/rdmadoctor-lab.conf")
                   for h in ("h1", "h2"))
MPI_SCRIPT = "python3 /lab/src/tests/lab/mpi_pingpong.py 50"
MPI = Producer(
    "mpirun-ucx", "mpirun", client_host="h1", user="lab", memlock_kib=UNLIMITED, setup=MPI_LIMITS,
    client="mpirun -np 2 --host h1,h2 --mca pml ucx -x UCX_TLS=rc_verbs,ud_verbs,self "
           "-x UCX_NET_DEVICES=rxe0:1 -x UCX_UD_ETH_DGID_CHECK=n " + MPI_SCRIPT,
    client_timeout=90, pairs=("bookworm", "trixie"),
    notes="Rank 0 runs on h1 (where mpirun is typed), rank 1 on h2, launched over ssh as user lab. The lab user's "
          "memlock limit is unlimited, as MPI sites set it (mpirun's own limit, and limits.conf for the ssh "
          "login that starts rank 1). Open MPI needs the same version on every host: bookworm has 4.1, "
          "trixie 5.0, so no mixed pair.")
MPI_DEFAULT_LIMITS = replace(
    MPI, name="mpirun-ucx-memlock-default", memlock_kib=None, setup=(),
    notes="The same run with the distribution's memlock limit for an unprivileged user (8 MiB): UCX cannot "
          "register its receive pools.")
MPI_TCP = replace(
    MPI, name="mpirun-tcp", client="mpirun -np 2 --host h1,h2 --mca pml ob1 --mca btl tcp,self " + MPI_SCRIPT,
    notes="The control: Open MPI over TCP (pml ob1, btl tcp), no RDMA.")

PRODUCERS: Dict[str, Producer] = {p.name: p for p in (
    IBV_RC, RPING, UCMATOSE, UCX_RC, UCX_RC_DEFAULTS, UCX_UD, UCX_TCP, FI_MSG, FI_RDM, FI_RDM_DEFAULTS,
    MPI, MPI_DEFAULT_LIMITS, MPI_TCP)}


def _runs() -> List[ProducerRun]:
    R = ProducerRun
    runs: List[ProducerRun] = []
    # The same picture gets the same expectation whatever the producer: the TCP side channel (ibv_rc_pingpong's,
    # ucx_perftest's and fi_pingpong's out-of-band exchange) timing out while the server waits is a firewall
    # or a wrong address, as in the perftest matrix, whatever took the server's link down; RoCE traffic that
    # starts and then gets no answer is loss on the path; an rdma_cm connection that never completes, with
    # no word on either side, cannot be told apart at all.
    tcp_timeout = dict(expect="firewall-blocks-port", fault="port-down",
                       alternatives=("wrong-peer-address", "port-down"))
    roce_stalls = dict(expect="packet-loss", fault="firewall-blocks-port", alternatives=("firewall-blocks-port",))
    cm_silent = dict(expect="unknown", alternatives=("packet-loss", "firewall-blocks-port", "port-down"))
    no_device = dict(expect="unknown", fault="kernel-module-missing", alternatives=("no-rdma-device",))
    # UCX prints no GID: two hosts that timed out on each other fit GIDs of different types (openucx/ucx#7785)
    # as well as packets dropped on the way, so its logs cannot decide
    ucx_stalls = dict(expect="unknown", fault="firewall-blocks-port",
                      alternatives=("wrong-gid-index", "packet-loss", "library-bug"))
    # ibv_rc_pingpong
    runs += [
        R(IBV_RC, HEALTHY, "none"),
        R(IBV_RC, "gid-index-empty-client", "wrong-gid-index", alternatives=("gid-missing",),
          client="ibv_rc_pingpong -d rxe0 -g 5 -n 100 {server}",
          notes="The client's GID prints as '::' (an empty entry); its command line shows -g 5."),
        R(IBV_RC, "mtu-netdev-mismatch", "mtu-mismatch", alternatives=("packet-loss",),
          server_args="-m 4096", client_args="-m 4096", client_timeout=20,
          notes="Both sides ask for a 4096-byte path MTU after h2's netdev went to 9000; h1's is 1500. The logs show "
                "the -m 4096 and a stall after the address exchange."),
        R(IBV_RC, "firewall-drop-udp-4791", client_timeout=20, **roce_stalls),
        R(IBV_RC, "memlock-64k-nonroot-server", "memlock-limit", server_args="-s 1048576", client_args="-s 1048576",
          notes="1 MiB messages: the buffer cannot be pinned under a 64 KiB limit (4 KiB ones could)."),
        R(IBV_RC, "netdev-down-server", client_timeout=30, **tcp_timeout),
        R(IBV_RC, "wrong-device-name-client", "wrong-device-name",
          client="ibv_rc_pingpong -d rxe1 -g 1 -n 100 {server}"),
        R(IBV_RC, "ib-uverbs-not-loaded-server", "unknown", fault="kernel-module-missing",
          alternatives=("no-rdma-device", "wrong-device-name"),
          notes="'IB device rxe0 not found' is the same text for a misspelt name and for no device at all."),
        R(IBV_RC, "server-not-running", "server-not-running", no_server=True),
        R(IBV_RC, "gid-index-link-local-client", "wrong-gid-index", alternatives=("gid-missing",),
          client="ibv_rc_pingpong -d rxe0 -g 0 -n 100 {server}", client_timeout=20,
          notes="The client's -g 0 is the fe80:: link-local GID, the server's -g 1 the IPv4 address's RoCE v2 GID: "
                "the server cannot move its QP to RTR towards a GID of the other type."),
        R(IBV_RC, "port-mismatch-client", "option-mismatch", client_args="-p 18600", client_timeout=20,
          notes="The client connects to 18600, the server listens on the default 18515 (rc_pingpong.c)."),
        R(IBV_RC, "size-client-larger", "option-mismatch", client_args="-s 8192", client_timeout=20,
          notes="The client sends 8 KiB messages into the server's receive buffers of the default 4 KiB: the "
                "server's receive completes in error, the client's send with a remote error."),
        R(IBV_RC, "device-permission-denied-server", "device-permission-denied",
          notes="The server, run by user lab, cannot open /dev/infiniband/uverbs0 (root-only): 'Couldn't get context "
                "for rxe0' under a prompt that is not root's."),
        R(IBV_RC, "firewall-drop-tcp-18515", "firewall-blocks-port", alternatives=("wrong-peer-address",),
          client_timeout=30, pairs=("bookworm",)),
        R(IBV_RC, "wrong-address-tcp", "wrong-peer-address", alternatives=("firewall-blocks-port",),
          client="ibv_rc_pingpong -d rxe0 -g 1 -n 100 %s" % WRONG_IP, client_timeout=30, pairs=("bookworm",),
          notes="The server printed its GID, ::ffff:192.0.2.1 (its RDMA netdev's address); the client aimed at "
                "192.0.2.3, which nobody has."),
    ]
    # rdma_cm programs: no device or GID option (rdma_cm picks them from the address)
    for prod in (RPING, UCMATOSE):
        runs += [
            R(prod, HEALTHY, "none"),
            R(prod, "mtu-netdev-mismatch", "unknown", fault="mtu-mismatch", alternatives=("packet-loss",),
              server_args="-S 16384", client_args="-S 16384", client_timeout=30,
              notes="16 KiB messages, so that packets exceed h1's MTU."),
            R(prod, "firewall-drop-udp-4791", fault="firewall-blocks-port", client_timeout=30,
              **dict(cm_silent, alternatives=("packet-loss", "port-down"))),
            R(prod, "memlock-64k-nonroot-server", "none", fault="memlock-limit",
              notes="Its buffers are small: the run works under a 64 KiB limit."),
            R(prod, "netdev-down-server", fault="port-down", client_timeout=30,
              **dict(cm_silent, alternatives=("packet-loss", "firewall-blocks-port"))),
            R(prod, "ib-uverbs-not-loaded-server", **no_device),
            R(prod, "server-not-running", "server-not-running", no_server=True),
        ]
    runs += [
        R(RPING, "wrong-address-rdma-cm", "unknown", fault="wrong-peer-address",
          alternatives=("wrong-peer-address", "rdma-cm-address-not-on-rdma-netdev"),
          client="rping -c -a %s -v -C 10" % WRONG_IP, client_timeout=40, pairs=("bookworm",),
          notes="rdma_resolve_addr() gets no ARP answer for 192.0.2.3 (ADDR_ERROR, -110): a wrong address and a peer "
                "whose interface is down print the same."),
        R(RPING, "port-mismatch-client", "option-mismatch", client_args="-p 7175", client_timeout=20,
          pairs=("bookworm",), notes="The client connects to 7175, the server listens on rping's default 7174."),
    ]
    # UCX
    runs += [
        R(UCX_RC, HEALTHY, "none"),
        R(UCX_RC, "gid-index-empty-client", "wrong-gid-index", client_env=(("UCX_IB_GID_INDEX", "5"),)),
        R(UCX_RC, "mtu-netdev-mismatch", "none", fault="mtu-mismatch", client_args="-s 16384",
          notes="16 KiB messages, so that packets exceed h1's MTU."),
        R(UCX_RC, "firewall-drop-udp-4791", **ucx_stalls),
        R(UCX_RC, "memlock-64k-nonroot-server", "memlock-limit"),
        R(UCX_RC, "netdev-down-server", **tcp_timeout),
        R(UCX_RC, "wrong-device-name-client", "wrong-device-name", client_env=(("UCX_NET_DEVICES", "rxe1:1"),)),
        R(UCX_RC, "ib-uverbs-not-loaded-server", **no_device),
        R(UCX_RC, "server-not-running", "server-not-running", no_server=True),
        R(UCX_RC, "port-mismatch-client", "option-mismatch", client_args="-p 13338", client_timeout=30,
          pairs=("bookworm",), notes="The client connects to 13338, the server listens on the default 13337."),
        R(UCX_RC, "wrong-address-tcp", "unknown", fault="wrong-peer-address",
          alternatives=("wrong-peer-address", "firewall-blocks-port"), client=UCX_CLIENT.format(server=WRONG_IP),
          client_timeout=40, pairs=("bookworm",),
          notes="connect() ends in 'No route to host' (no ARP answer): a firewall's host-prohibited reject ends "
                "the same."),
        R(UCX_RC_DEFAULTS, HEALTHY, "unknown", fault="library-bug",
          alternatives=("wrong-gid-index", "firewall-blocks-port", "packet-loss"),
          notes="The logs are those of lost UD packets (the same as with UDP 4791 dropped): nothing in them says "
                "that UCX itself dropped them. UCX_UD_ETH_DGID_CHECK=n is the workaround."),
        R(UCX_UD, HEALTHY, "none"),
        R(UCX_UD, "gid-index-empty-client", "wrong-gid-index", client_env=(("UCX_IB_GID_INDEX", "5"),)),
        R(UCX_UD, "firewall-drop-udp-4791", **ucx_stalls),
        R(UCX_TCP, HEALTHY, "none"),
        R(UCX_TCP, "firewall-drop-udp-4791", "none", fault="firewall-blocks-port",
          notes="UDP 4791 is RoCE's port; UCX over TCP does not use it."),
    ]
    # libfabric: verbs MSG endpoints over rdma_cm, and RDM (ofi_rxm over verbs)
    for prod in (FI_MSG, FI_RDM):
        runs += [
            R(prod, HEALTHY, "none"),
            R(prod, "mtu-netdev-mismatch", "unknown", fault="mtu-mismatch", alternatives=("packet-loss",),
              server=prod.server.replace("-S 1024", "-S 16384"), client=prod.client.replace("-S 1024", "-S 16384"),
              notes="16 KiB messages, so that packets exceed h1's MTU."),
            R(prod, "firewall-drop-udp-4791", fault="firewall-blocks-port", client_timeout=30,
              **dict(cm_silent, alternatives=("packet-loss", "port-down"))),
            R(prod, "netdev-down-server", client_timeout=30, **tcp_timeout),
            R(prod, "wrong-device-name-client", "wrong-device-name", client_args="-d rxe1"),
            R(prod, "ib-uverbs-not-loaded-server", **no_device),
            R(prod, "server-not-running", "server-not-running", no_server=True),
        ]
    runs += [
        R(FI_MSG, "memlock-64k-nonroot-server", "none", fault="memlock-limit",
          notes="1 KiB messages: the run works under a 64 KiB limit."),
        R(FI_RDM, "memlock-64k-nonroot-server", "unknown", fault="memlock-limit",
          alternatives=("device-limit-exceeded",), client_timeout=30,
          notes="rxm cannot set up the connection's buffers and rejects it (EBUSY); the client retries; neither "
                "side names memory."),
        R(FI_RDM_DEFAULTS, HEALTHY, "device-limit-exceeded"),
        R(FI_MSG, "wrong-address-tcp", "unknown", fault="wrong-peer-address",
          alternatives=("wrong-peer-address", "firewall-blocks-port"),
          client=FI_MSG.client.format(server=WRONG_IP), client_timeout=40, pairs=("bookworm",),
          notes="The control connection's connect() ends in 'No route to host' (no ARP answer for 192.0.2.3)."),
    ]
    # Open MPI: one command on h1; the faults of the "server" host land on rank 0 and the launcher
    mpi_ucx = MPI.client.replace("-x UCX_NET_DEVICES=rxe0:1", "%s")
    runs += [
        R(MPI, HEALTHY, "none"),
        R(MPI, "gid-index-empty-client", "wrong-gid-index",
          client=mpi_ucx % "-x UCX_NET_DEVICES=rxe0:1 -x UCX_IB_GID_INDEX=5"),
        R(MPI, "mtu-netdev-mismatch", "none", fault="mtu-mismatch"),
        R(MPI, "firewall-drop-udp-4791", client_timeout=120, **ucx_stalls),
        R(MPI, "memlock-64k-nonroot-server", "memlock-limit"),
        R(MPI, "netdev-down-server", "unknown", fault="port-down"),
        R(MPI, "wrong-device-name-client", "wrong-device-name", client=mpi_ucx % "-x UCX_NET_DEVICES=rxe1:1"),
        R(MPI, "ib-uverbs-not-loaded-server", **no_device),
        R(MPI, "server-not-running", "server-not-running", extra_setup=(Step("h2", "pkill -x sshd; true"),),
          notes="For mpirun the peer that is not running is h2's sshd, which starts rank 1."),
        R(MPI_DEFAULT_LIMITS, HEALTHY, "memlock-limit"),
        R(MPI_TCP, HEALTHY, "none"),
        R(MPI_TCP, "firewall-drop-udp-4791", "none", fault="firewall-blocks-port",
          notes="UDP 4791 is RoCE's port; Open MPI over TCP does not use it."),
        R(MPI_TCP, "ib-uverbs-not-loaded-server", "none", fault="kernel-module-missing",
          notes="btl tcp needs no RDMA device."),
    ]
    # The mixed pair runs ucx_perftest 1.13.1 (h1) against 1.18.1 (h2): the server misreads the client's test
    # parameters and every run fails there before the fault matters, unless one side fails first on its own.
    mixed_ucx = Judgement("unknown", "perftest-version-mismatch", ("option-mismatch",))
    fails_mixed = {"healthy/ucx_perftest-rc", "mtu-netdev-mismatch/ucx_perftest-rc",
                   "firewall-drop-udp-4791/ucx_perftest-rc", "healthy/ucx_perftest-rc-dgid-check",
                   "healthy/ucx_perftest-ud", "firewall-drop-udp-4791/ucx_perftest-ud", "healthy/ucx_perftest-tcp",
                   "firewall-drop-udp-4791/ucx_perftest-tcp"}
    return [replace(r, on_pair=(("mixed", mixed_ucx),)) if r.name in fails_mixed else r for r in runs]


# What each recorded log must keep containing ("server lines", "client lines"), read off the recordings of
# every pair (PAIR_LINES: what one pair's logs keep instead); a run without an entry is planned.
CONNECT_FAILED = "Couldn't connect to %s:18515" % SERVER_IP
REMOTE = "remote address:"
INTERRUPTED = "^C\n"      # a side that printed nothing telling (or only warnings) until its bound
UD_TIMEOUT = "unhandled timeout error"
UCX_ACCEPTED = "Accepted connection from 192.0.2.2"
UCX_FINAL = "Final:"
UCX_UNREACHABLE = "ucp_ep_create() failed: Destination is unreachable"
UCX_MEMLOCK = "Please set max locked memory (ulimit -l) to 'unlimited' (current: 64 kbytes)"
UCX_TIMED_OUT = "connect() failed: Connection timed out"
UCX_REFUSED = "connect() failed: Connection refused"
UCX_NO_RXE0 = "network device 'rxe0:1' is not available"
UCX_NO_RXE1 = "network device 'rxe1:1' is not available"
# a 1.13.1 ucx_perftest server reads a 1.18.1 client's parameters as options never given, then fails
UCX_MIXED = (("-d '' ignored for UCP test", "ucp_ep_create() failed: Invalid parameter"),
             ("send() failed: Connection reset by peer",))
FI_TABLE = "bytes   #sent   #ack     total"
FI_NO_DEVICE = "fi_getinfo(): util/pingpong.c:"
FI_CTRL_CLOSED = "ctrl/read: no data or remote connection closed"
FI_FLUSHED = "cq_readerr: Work Request Flushed Error"
MPI_DONE = ("# rank 0 of 2 on h1", "# rank 1 of 2 on h2", "# done")
MPI_NO_PML = "No components were able to be opened in the pml framework"
LINES: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {
    "healthy/ibv_rc_pingpong": (("100 iters in",), ("100 iters in",)),
    "gid-index-empty-client/ibv_rc_pingpong": (("Failed to modify QP to RTR", "Couldn't connect to remote QP"),
                                               ("GID ::\n", "Couldn't read/write remote address")),
    "mtu-netdev-mismatch/ibv_rc_pingpong": ((REMOTE,), (REMOTE,)),
    "firewall-drop-udp-4791/ibv_rc_pingpong": ((REMOTE,), (REMOTE,)),
    "memlock-64k-nonroot-server/ibv_rc_pingpong": (("Couldn't register MR",), (CONNECT_FAILED,)),
    "netdev-down-server/ibv_rc_pingpong": (("local address:",), (CONNECT_FAILED,)),
    "wrong-device-name-client/ibv_rc_pingpong": (("local address:",), ("IB device rxe1 not found",)),
    "ib-uverbs-not-loaded-server/ibv_rc_pingpong": (("IB device rxe0 not found",), (CONNECT_FAILED,)),
    "server-not-running/ibv_rc_pingpong": ((), (CONNECT_FAILED,)),
    "gid-index-link-local-client/ibv_rc_pingpong": (("GID ::ffff:192.0.2.1", "Failed to modify QP to RTR"),
                                                    ("GID fe80::", "Couldn't read/write remote address")),
    "port-mismatch-client/ibv_rc_pingpong": (("local address:",), ("Couldn't connect to 192.0.2.1:18600",)),
    "size-client-larger/ibv_rc_pingpong": (("Failed status local QP operation error (2)",),
                                           ("Failed status remote operation error (11)",)),
    "device-permission-denied-server/ibv_rc_pingpong": (("lab@h1:~$ ibv_rc_pingpong", "Couldn't get context for rxe0"),
                                                        (CONNECT_FAILED,)),
    "firewall-drop-tcp-18515/ibv_rc_pingpong": (("local address:",), (CONNECT_FAILED,)),
    "wrong-address-tcp/ibv_rc_pingpong": (("GID ::ffff:192.0.2.1",), ("Couldn't connect to 192.0.2.3:18515",)),
    # the client's "client DISCONNECT EVENT..." comes from its cm thread, which main() may stop first (rping.c: the
    # thread returns when its eventfd is written, before it reads a pending event): its last ping is certain
    "healthy/rping": (("server DISCONNECT EVENT...",), ("ping data: rdma-ping-9",)),
    "mtu-netdev-mismatch/rping": (("server ping data: rdma-ping-0", "server DISCONNECT EVENT..."),
                                  ("rping -c -a 192.0.2.1 -v -C 10 -S 16384\n^C",)),
    # both sides print nothing at all until interrupted: only the prompt and the ^C (meta: timed_out)
    "firewall-drop-udp-4791/rping": (("rping -s -a 192.0.2.1 -v -C 10\n^C",), ("rping -c -a 192.0.2.1 -v -C 10\n^C",)),
    "memlock-64k-nonroot-server/rping": (("server DISCONNECT EVENT...",), ("ping data: rdma-ping-9",)),
    "netdev-down-server/rping": (("rping -s -a 192.0.2.1 -v -C 10\n^C",), ("rping -c -a 192.0.2.1 -v -C 10\n^C",)),
    "ib-uverbs-not-loaded-server/rping": (("No RDMA devices were detected",), ("rping -c -a 192.0.2.1 -v -C 10\n^C",)),
    # rping's cm thread calls exit() as soon as its event handler fails (librdmacm/examples/rping.c, cm_thread), racing
    # the main thread's "wait for CONNECTED state 4" and "connect error -1": only the event line is certain
    "server-not-running/rping": ((), ("cma event RDMA_CM_EVENT_REJECTED, error 8",)),
    "wrong-address-rdma-cm/rping": ((), ("cma event RDMA_CM_EVENT_ADDR_ERROR, error -110",)),
    "port-mismatch-client/rping": ((), ("cma event RDMA_CM_EVENT_REJECTED, error 8",)),
    "healthy/ucmatose": (("test complete", "return status 0"), ("test complete", "return status 0")),
    "mtu-netdev-mismatch/ucmatose": (("completing sends",), ("receiving data transfers\n^C",)),
    "firewall-drop-udp-4791/ucmatose": (("cmatose: starting server\n^C",), ("cmatose: connecting\n^C",)),
    "memlock-64k-nonroot-server/ucmatose": (("return status 0",), ("return status 0",)),
    "netdev-down-server/ucmatose": (("cmatose: starting server\n^C",), ("cmatose: connecting\n^C",)),
    "ib-uverbs-not-loaded-server/ucmatose": (("No RDMA devices were detected",), ("cmatose: connecting\n^C",)),
    "server-not-running/ucmatose": ((), ("cmatose: event: RDMA_CM_EVENT_REJECTED, error: 8", "return status 8")),
    "healthy/ucx_perftest-rc": ((UCX_ACCEPTED,), (UCX_FINAL,)),
    "gid-index-empty-client/ucx_perftest-rc": ((UCX_ACCEPTED,), (UCX_NO_RXE0,)),
    "mtu-netdev-mismatch/ucx_perftest-rc": ((UCX_ACCEPTED,), (UCX_FINAL,)),
    "firewall-drop-udp-4791/ucx_perftest-rc": ((UD_TIMEOUT,), (UD_TIMEOUT,)),
    "memlock-64k-nonroot-server/ucx_perftest-rc": ((UCX_MEMLOCK,), (INTERRUPTED,)),
    "netdev-down-server/ucx_perftest-rc": (("Waiting for connection...",), (UCX_TIMED_OUT,)),
    "wrong-device-name-client/ucx_perftest-rc": ((UCX_ACCEPTED,), (UCX_NO_RXE1, UCX_UNREACHABLE)),
    "ib-uverbs-not-loaded-server/ucx_perftest-rc": ((UCX_NO_RXE0,), ()),
    "server-not-running/ucx_perftest-rc": ((), (UCX_REFUSED,)),
    "port-mismatch-client/ucx_perftest-rc": (("Waiting for connection...",), (UCX_REFUSED,)),
    "wrong-address-tcp/ucx_perftest-rc": (("Waiting for connection...",), ("connect() failed: No route to host",)),
    "healthy/ucx_perftest-rc-dgid-check": ((UD_TIMEOUT,), (UD_TIMEOUT,)),
    "healthy/ucx_perftest-ud": ((UCX_ACCEPTED,), (UCX_FINAL,)),
    "gid-index-empty-client/ucx_perftest-ud": ((UCX_ACCEPTED,), (UCX_NO_RXE0,)),
    "firewall-drop-udp-4791/ucx_perftest-ud": ((UD_TIMEOUT,), (UD_TIMEOUT,)),
    "healthy/ucx_perftest-tcp": ((UCX_ACCEPTED,), (UCX_FINAL,)),
    "firewall-drop-udp-4791/ucx_perftest-tcp": ((UCX_ACCEPTED,), (UCX_FINAL,)),
    "healthy/fi_pingpong-msg": ((FI_TABLE,), (FI_TABLE,)),
    "mtu-netdev-mismatch/fi_pingpong-msg": ((), (INTERRUPTED,)),
    "firewall-drop-udp-4791/fi_pingpong-msg": ((INTERRUPTED,), (INTERRUPTED,)),
    "memlock-64k-nonroot-server/fi_pingpong-msg": ((FI_TABLE,), (FI_TABLE,)),
    "netdev-down-server/fi_pingpong-msg": ((INTERRUPTED,), ("failed to connect: Connection timed out",)),
    "wrong-device-name-client/fi_pingpong-msg": ((INTERRUPTED,), (FI_NO_DEVICE,)),
    "ib-uverbs-not-loaded-server/fi_pingpong-msg": ((FI_NO_DEVICE,), (FI_CTRL_CLOSED,)),
    "server-not-running/fi_pingpong-msg": ((), ("failed to connect: Connection refused",)),
    "wrong-address-tcp/fi_pingpong-msg": ((), ("failed to connect: No route to host",)),
    "healthy/fi_pingpong-rdm": ((FI_TABLE,), (FI_TABLE,)),
    "mtu-netdev-mismatch/fi_pingpong-rdm": ((FI_FLUSHED,), (INTERRUPTED,)),
    "firewall-drop-udp-4791/fi_pingpong-rdm": ((INTERRUPTED,), (INTERRUPTED,)),
    "memlock-64k-nonroot-server/fi_pingpong-rdm": (("rdma_reject: Device or resource busy (-16)",),
                                                   ("fi_eq_readerr: err: Connection refused (111)",)),
    "netdev-down-server/fi_pingpong-rdm": ((INTERRUPTED,), ("failed to connect: Connection timed out",)),
    "wrong-device-name-client/fi_pingpong-rdm": ((FI_CTRL_CLOSED,), (FI_NO_DEVICE,)),
    "ib-uverbs-not-loaded-server/fi_pingpong-rdm": ((FI_NO_DEVICE,), (FI_CTRL_CLOSED,)),
    "server-not-running/fi_pingpong-rdm": ((), ("failed to connect: Connection refused",)),
    "healthy/fi_pingpong-rdm-universe-default": (("Unable to create verbs CQ", "unable to open MSG CQ",
                                                  "ret=-22 (Invalid argument)"), (FI_CTRL_CLOSED,)),
    "healthy/mpirun-ucx": ((), MPI_DONE),
    "gid-index-empty-client/mpirun-ucx": ((), (UCX_NO_RXE0, MPI_NO_PML)),
    "mtu-netdev-mismatch/mpirun-ucx": ((), MPI_DONE),
    "firewall-drop-udp-4791/mpirun-ucx": ((), (UD_TIMEOUT,)),
    "memlock-64k-nonroot-server/mpirun-ucx": ((), (UCX_MEMLOCK,)),
    "netdev-down-server/mpirun-ucx": ((), ()),
    "wrong-device-name-client/mpirun-ucx": ((), (UCX_NO_RXE1, MPI_NO_PML)),
    "ib-uverbs-not-loaded-server/mpirun-ucx": ((), (UCX_NO_RXE0,)),
    "server-not-running/mpirun-ucx": ((), ("ssh: connect to host h2 port 22: Connection refused",)),
    "healthy/mpirun-ucx-memlock-default": ((), ("Please set max locked memory (ulimit -l) to 'unlimited' "
                                                "(current: 8192 kbytes)",)),
    "healthy/mpirun-tcp": ((), MPI_DONE),
    "firewall-drop-udp-4791/mpirun-tcp": ((), MPI_DONE),
    "ib-uverbs-not-loaded-server/mpirun-tcp": ((), MPI_DONE),
}
PAIR_LINES: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...]]] = {
    "mixed/%s" % name: UCX_MIXED for name in (
        "healthy/ucx_perftest-rc", "mtu-netdev-mismatch/ucx_perftest-rc", "firewall-drop-udp-4791/ucx_perftest-rc",
        "healthy/ucx_perftest-rc-dgid-check", "healthy/ucx_perftest-ud", "firewall-drop-udp-4791/ucx_perftest-ud",
        "healthy/ucx_perftest-tcp", "firewall-drop-udp-4791/ucx_perftest-tcp")}
PAIR_LINES.update({
    "bookworm/netdev-down-server/mpirun-ucx": ((), ("ssh: connect to host h2 port 22: Network is unreachable",)),
    "trixie/netdev-down-server/mpirun-ucx": ((), ("Segmentation fault",)),
})


def _with_lines(run: ProducerRun) -> ProducerRun:
    if run.name not in LINES:
        return replace(run, planned=True)
    server, client = LINES[run.name]
    on_pair = tuple((key.split("/", 1)[0], lines) for key, lines in PAIR_LINES.items()
                    if key.split("/", 1)[1] == run.name)
    return replace(run, server_lines=server, client_lines=client, pair_lines=on_pair)


RUNS: List[ProducerRun] = [_with_lines(r) for r in _runs()]
BY_NAME: Dict[str, ProducerRun] = {r.name: r for r in RUNS}


def for_pair(pair: str) -> List[ProducerRun]:
    """The runs the recorder runs on this pair (planned ones included)."""
    return [r for r in RUNS if pair in r.target_pairs()]


def validate() -> List[str]:
    problems = []
    seen = set()
    slugs = cause_slugs()
    for r in RUNS:
        if r.name in seen:
            problems.append("duplicate run %s" % r.name)
        seen.add(r.name)
        if r.scenario != HEALTHY and r.scenario not in SCENARIOS:
            problems.append("%s: %r is no scenario of scenarios.py" % (r.name, r.scenario))
        judgements = [r.judgement()] + [j for _, j in r.on_pair]
        for pair, _ in r.on_pair:
            if pair not in r.target_pairs():
                problems.append("%s: judgement for %r, where it does not run" % (r.name, pair))
        for j in judgements:
            for slug in (j.expect, j.fault) + j.alternatives:
                if slug != "none" and slug not in slugs:
                    problems.append("%s: unknown cause slug %r" % (r.name, slug))
            if j.fault == "unknown":
                problems.append("%s: the fault is a cause slug or none, never unknown" % r.name)
            if j.expect == "unknown" and j.fault == "none":
                problems.append("%s: an unknown verdict needs the true fault" % r.name)
            if j.expect in j.alternatives:
                problems.append("%s: the expectation is not its own alternative" % r.name)
        for pair in r.target_pairs():
            if pair not in PAIRS:
                problems.append("%s: unknown pair %r" % (r.name, pair))
    return problems


# ---- recording -------------------------------------------------------------------------------------------
# A program that repeats one error until it is interrupted (UCX retrying a registration that the memlock limit
# refuses prints about 130 KB/s under TCG) would make a recording of megabytes: the recorder keeps the head and
# the tail of such a log and says in one line, and in meta.json's "left_out", how much it left out between.
KEEP_HEAD, KEEP_TAIL = 48 * 1024, 8 * 1024


def keep(text: str) -> Tuple[str, Optional[Dict[str, int]]]:
    """``text`` if it is short; else its first and last lines (about KEEP_HEAD and KEEP_TAIL bytes) around a
    line saying what was left out, and {"lines", "bytes"} left out."""
    if len(text.encode()) <= KEEP_HEAD + KEEP_TAIL:
        return text, None
    lines = text.splitlines(keepends=True)
    head, size = [], 0
    for line in lines:
        if size + len(line.encode()) > KEEP_HEAD:
            break
        head.append(line)
        size += len(line.encode())
    tail, size = [], 0
    for line in reversed(lines[len(head):]):
        if size + len(line.encode()) > KEEP_TAIL:
            break
        tail.insert(0, line)
        size += len(line.encode())
    middle = lines[len(head):len(lines) - len(tail)]
    dropped = {"lines": len(middle), "bytes": len("".join(middle).encode())}
    marker = "[... %d lines (%d bytes) left out by the lab's recorder ...]\n" % (dropped["lines"], dropped["bytes"])
    return "".join(head) + marker + "".join(tail), dropped


def _rlimits(side: Side) -> Optional[Dict[str, int]]:
    if side.memlock_kib is None:
        return None
    return {"memlock": -1 if side.memlock_kib == UNLIMITED else side.memlock_kib * 1024}


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
    from .runner import _terminal_text
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
    left_out = {}
    for name in list(logs):
        logs[name], dropped = keep(logs[name])
        if dropped:
            left_out[name] = dropped

    def side_meta(side: Side, result, bound: float) -> Dict:
        return {"host": side.host, "release": lab.releases[side.host], "user": side.user or "root",
                "memlock_kib": side.memlock_kib, "command": side.cmd,
                "exit_code": None if result is None else result.rc,
                "timed_out": None if result is None else result.timed_out,
                "seconds": None if result is None else result.seconds, "bound_seconds": bound}

    sc = run.definition
    judged = run.judgement(lab.pair_name)
    meta = {
        "producer": p.name, "program": p.program, "scenario": run.scenario, "pair": lab.pair_name,
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
        "fault": judged.fault, "expect": judged.expect, "alternatives": list(judged.alternatives),
        "lines": {role: list(keep) for role, keep in run.lines(lab.pair_name).items()},
        "notes": " ".join(x for x in (p.notes, run.notes) if x),
        "left_out": left_out,
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


def record(pairs: List[str], producers: Optional[List[str]], scenarios: Optional[List[str]], out: Path,
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
                    and (scenarios is None or r.scenario in scenarios)]
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
                    meta = run_producer(lab, r, out / pair / r.scenario / r.producer.name, recorder=recorder)
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
        meta["scenario"] = run.scenario
        judged = run.judgement(path.parents[2].name)
        meta.update({"fault": judged.fault, "expect": judged.expect, "alternatives": list(judged.alternatives),
                     "lines": {role: list(keep) for role, keep in run.lines(path.parents[2].name).items()},
                     "notes": " ".join(x for x in (run.producer.notes, run.notes) if x)})
        path.write_text(json.dumps(meta, indent=2) + "\n")
        count += 1
    return count


def _said(folder: Path) -> str:
    """explain's verdict on a recording, as the table shows it (in this process: the CLI's own command)."""
    from typer.testing import CliRunner

    from rdmadoctor.cli import app
    logs = [str(folder / n) for n in ("server.log", "client.log") if (folder / n).is_file()]
    result = CliRunner().invoke(app, ["explain", "--json", *logs])
    try:
        verdict = json.loads(result.stdout)["verdict"]
    except ValueError:
        return "(no answer: %s)" % type(result.exception).__name__
    if verdict.get("cause") in (None, "unknown"):
        return "(%s)" % verdict.get("status")
    return "%s %s" % (verdict.get("status"), verdict.get("cause"))


def table(out: Path) -> str:
    """The docs' table of the producer recordings: key lines, judgement per pair, and explain's verdict today."""
    def cell(values: Dict[str, str]) -> str:
        groups: Dict[str, List[str]] = {}
        for pair, value in values.items():
            groups.setdefault(value, []).append(pair)
        if len(groups) == 1:
            return next(iter(groups))
        return "<br>".join("**%s**: %s" % (", ".join(pairs), value) for value, pairs in groups.items())

    def lines(keep) -> str:
        return " / ".join("`%s`" % k.replace("\n", " ").replace("|", "\\|") for k in keep) or "–"

    rows = ["| run | pairs | server keeps | client keeps | expect (fault; alternatives) | `explain` said |",
            "|---|---|---|---|---|---|"]
    for r in RUNS:
        pairs = [p for p in PAIR_ORDER if p in r.run_pairs() and (out / p / r.scenario / r.producer.name).is_dir()]
        if not pairs:
            continue
        judged = {}
        for p in pairs:
            j = r.judgement(p)
            extra = (["fault: " + j.fault] if j.fault != j.expect else []) + (
                ["alt.: " + ", ".join(j.alternatives)] if j.alternatives else [])
            judged[p] = j.expect + (" (%s)" % "; ".join(extra) if extra else "")
        rows.append("| `%s` | %s | %s | %s | %s | %s |" % (
            r.name, ", ".join(pairs), cell({p: lines(r.lines(p)["server"]) for p in pairs}),
            cell({p: lines(r.lines(p)["client"]) for p in pairs}), cell(judged),
            cell({p: _said(out / p / r.scenario / r.producer.name) for p in pairs})))
    return "\n".join(rows) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    from .vm import REPO
    parser = argparse.ArgumentParser(prog="python -m tests.lab.producers", description=__doc__.split("\n\n")[0])
    parser.add_argument("--pair", action="append", choices=sorted(PAIRS))
    parser.add_argument("--producer", action="append", choices=sorted(PRODUCERS))
    parser.add_argument("--scenario", "--fault", action="append", metavar="NAME",
                        help="healthy or a scenario name of scenarios.py (repeatable)")
    parser.add_argument("--out", type=Path, default=REPO / "fixtures" / "lab")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--table", action="store_true", help="print the docs' table of the recordings under --out")
    parser.add_argument("--refresh-meta", action="store_true",
                        help="rewrite expect/lines/notes of the recordings under --out from the table, and exit")
    args = parser.parse_args(argv)
    if args.refresh_meta:
        print("%d meta.json rewritten" % refresh_meta(args.out))
        return 0
    if args.table:
        sys.stdout.write(table(args.out))
        return 0
    if args.list:
        for r in RUNS:
            print("%-56s %-24s %-24s %s" % (r.name, r.expect, r.truth,
                                               ",".join(r.target_pairs()) + (" (planned)" if r.planned else "")))
        return 0
    pairs = [p for p in PAIR_ORDER if p in (args.pair or PAIR_ORDER)]
    recorder = " ".join(["python", "-m", "tests.lab.producers"] + [shlex.quote(a) for a in (argv or sys.argv[1:])])
    return record(pairs, args.producer, args.scenario, args.out, recorder=recorder)


if __name__ == "__main__":
    sys.exit(main())
