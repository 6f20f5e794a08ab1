"""The lab's fault matrix, as data.

Each ``Scenario`` says how to break the healthy two-host baseline (``Lab.reset()``: h1 = 192.0.2.1,
h2 = 192.0.2.2, rxe0 on eth0, MTU 1500, no firewall, no netem), which perftest commands the user
then runs on the two sides, how long to let them run, and what rdmadoctor is expected to conclude:

* ``expect_explain``: the cause slug (docs/causes.md) that ``rdmadoctor explain`` must
  name from the two logs alone. Where the logs cannot tell two causes apart, it is what an expert
  would conclude from the logs, the other candidates are in ``alternatives`` and ``notes`` says why.
* ``expect_check``: the cause that ``rdmadoctor check`` must name when run on the ``faulty`` host
  while the fault is in place (None: not applicable, or not decided yet).
* ``healthy``: the run must work; ``explain`` must not diagnose a failure.
* ``server_lines`` / ``client_lines``: lines (substrings) that the recorded log of that side must
  contain on every pair; they pin down what the lab reproduces (both perftest generations).

Commands are written as the user types them. Hangs are bounded (``client_timeout``, ``server_grace``)
and the bound is written into the recording's meta.json; an interrupted side's log ends in ``^C``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from rdmadoctor.knowledge import causes

SERVER_IP = "192.0.2.1"
CLIENT_IP = "192.0.2.2"
WRONG_IP = "192.0.2.3"  # nobody on the wire has it

PAIRS: Dict[str, Tuple[str, str]] = {
    "bookworm": ("bookworm", "bookworm"),
    "trixie": ("trixie", "trixie"),
    "mixed": ("bookworm", "trixie"),  # h1 bookworm (perftest 4.5 / 6.06), h2 trixie (25.01 / 6.24)
}
ALL_PAIRS = tuple(PAIRS)
PAIR_ORDER = ("bookworm", "mixed", "trixie")  # a lab walks them replacing one host at a time


def pairs_from_env(environ=None) -> List[str]:
    """The pairs named in RDMADOCTOR_LAB_PAIRS (comma-separated), default all, in PAIR_ORDER."""
    import os
    value = (environ if environ is not None else os.environ).get("RDMADOCTOR_LAB_PAIRS", "")
    wanted = [p.strip() for p in value.split(",") if p.strip()]
    unknown = [p for p in wanted if p not in PAIRS]
    if unknown:
        raise ValueError("RDMADOCTOR_LAB_PAIRS: unknown pair(s) %s (known: %s)" % (unknown, ", ".join(PAIRS)))
    return [p for p in PAIR_ORDER if not wanted or p in wanted]

# The cause slugs of docs/causes.md (a public interface: never renamed).
# the project's cause vocabulary (docs/causes.md), which every expectation names
CAUSES = frozenset(causes.slugs()) | {"unknown"}


@dataclass(frozen=True)
class Side:
    """One perftest invocation, as the user typed it, on one host."""
    cmd: str
    host: str = "h1"
    user: Optional[str] = None           # None = root; "lab" = the unprivileged user of the image
    memlock_kib: Optional[int] = None    # RLIMIT_MEMLOCK (soft and hard) for this process

    def prompt(self) -> str:
        if self.user:
            return "%s@%s:~$ %s" % (self.user, self.host, self.cmd)
        return "root@%s:~# %s" % (self.host, self.cmd)


@dataclass(frozen=True)
class Step:
    """A root shell command on one host that puts the fault in place (must exit 0)."""
    host: str
    sh: str


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    client: Side
    server: Optional[Side] = None
    faulty: Optional[str] = None         # "h1", "h2", "both" (the two command lines disagree), None
    fault: str = ""                       # what the lab does to make the fault, in words
    setup: Tuple[Step, ...] = ()
    background: Tuple[Side, ...] = ()     # started (and left running) before the server
    client_timeout: float = 30.0          # bound for the client (it is interrupted, like Ctrl-C)
    server_grace: float = 8.0             # bound for the server once the client has ended
    server_start_timeout: float = 20.0    # wait for the server's banner (or its exit)
    expect_explain: Optional[str] = None  # "unknown": the logs cannot tell; the truth must be a candidate
    expect_check: Optional[str] = None
    check_host: Optional[str] = None      # where `rdmadoctor check` runs (default: the faulty host)
    check_user: Optional[str] = None      # ... as this user (default root), with this memlock limit
    check_memlock_kib: Optional[int] = None
    check_args: str = ""                  # e.g. "--peer 192.0.2.1 --probe-perftest"
    alternatives: Tuple[str, ...] = ()
    healthy: bool = False
    server_lines: Tuple[str, ...] = ()
    client_lines: Tuple[str, ...] = ()
    # what the server's log holds instead when a race it can lose ends it by SIGPIPE (exit 141): its next write met
    # the socket the client had closed (notes say which race)
    server_sigpipe_lines: Tuple[str, ...] = ()
    pairs: Tuple[str, ...] = ALL_PAIRS
    notes: str = ""

    def sides(self) -> List[Tuple[str, Side]]:
        return ([("server", self.server)] if self.server else []) + [("client", self.client)]

    def expected_lines(self, meta: dict) -> Tuple[Tuple[str, Tuple[str, ...]], ...]:
        """(side, lines its log must hold) for a recording's meta.json: the server's SIGPIPE outcome when it had it."""
        server = self.server_lines
        if self.server_sigpipe_lines and (meta.get("server") or {}).get("exit_code") == SIGPIPE_EXIT:
            server = self.server_sigpipe_lines
        return (("server", server), ("client", self.client_lines))


def _srv(cmd: str, **kw) -> Side:
    return Side(cmd, host=kw.pop("host", "h1"), **kw)


def _cli(cmd: str, target: str = SERVER_IP, **kw) -> Side:
    return Side("%s %s" % (cmd, target), host=kw.pop("host", "h2"), **kw)


def _nft(host: str, rule: str) -> Step:
    return Step(host, "nft add table inet filter && "
                      "nft add chain inet filter input '{ type filter hook input priority 0; policy accept; }' && "
                      "nft add rule inet filter input %s" % rule)


WB = "ib_write_bw -d rxe0"
SMALL = "-n 200"          # 200 x 64 KiB: about a second at the TCG lab's ~15 MB/s
TINY = "-n 100"

READ_KEYS = "ethernet_read_keys: Couldn't read remote address"
CLIENT_READ = "Unable to read from socket/rdma_cm"
SERVER_READ = "Unable to read to socket/rdma_cm"
BANNER = "* Waiting for client to connect... *"
COULDNT_CONNECT = "Couldn't connect to %s:18515" % SERVER_IP
RESULTS_HEADER = "#bytes     #iterations"
SIGPIPE_EXIT = 128 + 13          # the shell's status of a process SIGPIPE ended
SEED_RACE = ("The server's side is a race: it reads the client's first record and starts the test; if it reads the "
             "nine records left in its socket before the client's close arrives it prints READ_KEYS, else its next "
             "write meets the closed socket and SIGPIPE ends it (exit 141) after the results header (seen on loaded "
             "hosts). Either outcome is asserted (server_sigpipe_lines), and the diagnosis holds on both.")
# The requester stalls for good in these (HANG_NOTE): past perftest's own retry window (timeout 14, 7 retries:
# about 0.5 s) a longer bound adds nothing to the logs, and the matrix runs each on three pairs.
HANG_BOUND = 10.0
HANG_NOTE = ("rdma_rxe does not give up on a QP whose packets get no answer: no retry-exceeded "
             "completion (status 12) within the bound, the requester just stalls after the results "
             "header; the client is interrupted at the bound, then the server's socket read fails.")

SCENARIOS: List[Scenario] = [
    # ---- 1. healthy -------------------------------------------------------------------------------
    Scenario(
        "healthy-write-bw", "Healthy ib_write_bw pair", healthy=True,
        server=_srv("%s %s" % (WB, SMALL)), client=_cli("%s %s" % (WB, SMALL)),
        server_lines=(BANNER, "65536      200"), client_lines=("65536      200",),
        notes="Soft-RoCE over the TCG wire: 10-20 MB/s, active MTU 1024 at netdev MTU 1500."),
    Scenario(
        "healthy-send-bw", "Healthy ib_send_bw pair", healthy=True,
        server=_srv("ib_send_bw -d rxe0 %s" % SMALL), client=_cli("ib_send_bw -d rxe0 %s" % SMALL),
        server_lines=(BANNER, "65536      200"), client_lines=("65536      200",)),
    Scenario(
        "healthy-write-lat", "Healthy ib_write_lat pair", healthy=True,
        server=_srv("ib_write_lat -d rxe0 %s" % SMALL), client=_cli("ib_write_lat -d rxe0 %s" % SMALL),
        server_lines=(BANNER, "t_avg"), client_lines=("t_avg",)),
    Scenario(
        "healthy-read-lat", "Healthy ib_read_lat pair: the server measures nothing", healthy=True,
        server=_srv("ib_read_lat -d rxe0 %s" % SMALL), client=_cli("ib_read_lat -d rxe0 %s" % SMALL),
        server_lines=(BANNER, "remote address"), client_lines=("t_avg",),
        notes="Only the client posts RDMA reads and prints results; the server's log ends with perftest's dashes "
              "after the client's address, printed once it closed the side channel (read_lat.c). That is not a "
              "side that stopped after its addresses."),
    Scenario(
        "healthy-write-bw-server-h2", "Healthy ib_write_bw pair with the roles swapped (server on h2)",
        healthy=True, pairs=("mixed",),
        server=_srv("%s %s" % (WB, SMALL), host="h2"), client=_cli("%s %s" % (WB, SMALL), CLIENT_IP, host="h1"),
        server_lines=(BANNER, "65536      200"), client_lines=("65536      200",),
        notes="In the mixed pair: trixie server, bookworm client (the other scenarios have it the other way)."),

    # ---- 2. QP count ------------------------------------------------------------------------------
    Scenario(
        "qp-mismatch-client-10", "Server 1 QP (defaults), client --qp=10: the seed fault",
        faulty="both", fault="client --qp=10, server default (1 QP)",
        server=_srv(WB), client=_cli("%s --qp=10" % WB),
        expect_explain="qp-count-mismatch",
        server_lines=("3472328296395452464", READ_KEYS, SERVER_READ),
        server_sigpipe_lines=("Number of qps   : 1", RESULTS_HEADER),
        client_lines=("Number of qps   : 10", READ_KEYS, CLIENT_READ,
                      "Failed to exchange data between server and clients"),
        notes="Exactly the defaults otherwise. The server decodes key text as a report: garbage result row. " +
              SEED_RACE),
    Scenario(
        "qp-mismatch-server-10", "Server -q 10, client 1 QP (defaults)",
        faulty="both", fault="server -q 10, client default (1 QP)",
        server=_srv("%s -q 10" % WB), client=_cli(WB), client_timeout=HANG_BOUND,
        expect_explain="qp-count-mismatch",
        server_lines=("Number of qps   : 10", READ_KEYS, SERVER_READ),
        client_lines=("Number of qps   : 1", RESULTS_HEADER),
        notes="The client connects to the server's first QP while that QP is still in INIT and sends; "
              + HANG_NOTE),
    Scenario(
        "qp-mismatch-client-10-server-h2", "The seed fault with the roles swapped (server on h2)",
        faulty="both", fault="client --qp=10, server default (1 QP)", pairs=("mixed",),
        server=_srv(WB, host="h2"), client=_cli("%s --qp=10" % WB, CLIENT_IP, host="h1"),
        expect_explain="qp-count-mismatch",
        server_lines=(READ_KEYS,), server_sigpipe_lines=("Number of qps   : 1", RESULTS_HEADER),
        client_lines=("Number of qps   : 10", READ_KEYS),
        notes="In the mixed pair: trixie server, bookworm client. " + SEED_RACE),

    # ---- 3. other options differ ------------------------------------------------------------------
    Scenario(
        "all-sizes-client-only", "-a on the client only",
        faulty="both", fault="client -a (all sizes 2..8M), server one size",
        server=_srv("%s %s" % (WB, TINY)), client=_cli("%s %s -a" % (WB, TINY)), client_timeout=45,
        expect_explain="option-mismatch"),
    Scenario(
        "all-sizes-server-only", "-a on the server only",
        faulty="both", fault="server -a, client one size",
        server=_srv("%s %s -a" % (WB, TINY)), client=_cli("%s %s" % (WB, TINY)), client_timeout=30,
        expect_explain="option-mismatch"),
    Scenario(
        "size-client-larger", "Client -s 65536, server -s 1024",
        faulty="both", fault="client message size larger than the server's buffer",
        server=_srv("%s -s 1024 %s" % (WB, TINY)), client=_cli("%s -s 65536 %s" % (WB, TINY)),
        client_timeout=20, expect_explain="option-mismatch"),
    Scenario(
        "conn-type-server-uc", "Server -c UC, client -c RC (default)",
        faulty="both", fault="connection types differ",
        server=_srv("%s -c UC %s" % (WB, TINY)), client=_cli("%s -c RC %s" % (WB, TINY)),
        client_timeout=HANG_BOUND,
        expect_explain="option-mismatch"),
    Scenario(
        "conn-type-client-uc", "Server -c RC (default), client -c UC",
        faulty="both", fault="connection types differ",
        server=_srv("%s -c RC %s" % (WB, TINY)), client=_cli("%s -c UC %s" % (WB, TINY)), client_timeout=20,
        expect_explain="option-mismatch"),
    Scenario(
        "rdma-cm-server-only", "-R on the server only",
        faulty="both", fault="server -R (rdma_cm), client TCP exchange",
        server=_srv("%s -R %s" % (WB, TINY)), client=_cli("%s %s" % (WB, TINY)), server_grace=5,
        expect_explain="option-mismatch", alternatives=("server-not-running",),
        client_lines=(COULDNT_CONNECT,),
        notes="A -R server opens no TCP port; the client's TCP connect is refused."),
    Scenario(
        "rdma-cm-client-only", "-R on the client only",
        faulty="both", fault="client -R (rdma_cm), server TCP exchange",
        server=_srv("%s %s" % (WB, TINY)), client=_cli("%s -R %s" % (WB, TINY)), server_grace=5,
        expect_explain="option-mismatch", server_lines=(BANNER,)),
    Scenario(
        "binary-write-server-read-client", "ib_write_bw server, ib_read_bw client",
        faulty="both", fault="different test binaries",
        server=_srv("%s %s" % (WB, TINY)), client=_cli("ib_read_bw -d rxe0 %s" % TINY), client_timeout=20,
        expect_explain="option-mismatch"),
    Scenario(
        "send-size-client-larger", "ib_send_bw, client -s 65536, server -s 1024",
        faulty="both", fault="the client's SENDs are larger than the server's receive buffers",
        server=_srv("ib_send_bw -d rxe0 -s 1024 %s" % TINY), client=_cli("ib_send_bw -d rxe0 -s 65536 %s" % TINY),
        client_timeout=20, server_lines=("Failed status 2: wr_id 0",), client_lines=("Failed status 11: wr_id 0",),
        pairs=("bookworm",), expect_explain="option-mismatch",
        notes="Completion statuses: the receiver's receive queue and the sender's send queue "
              "(docs/completion-statuses.md)."),
    Scenario(
        "binary-send-server-write-client", "ib_send_bw server, ib_write_bw client",
        faulty="both", fault="different test binaries: the send server's buffer has no remote write access",
        server=_srv("ib_send_bw -d rxe0 %s" % TINY), client=_cli("%s %s" % (WB, TINY)), client_timeout=20,
        server_lines=(READ_KEYS,), client_lines=("Failed status 10: wr_id 0",),
        pairs=("bookworm",), expect_explain="option-mismatch"),
    Scenario(
        "binary-send-server-read-client", "ib_send_bw server, ib_read_bw client",
        faulty="both", fault="different test binaries: the send server's QP is not opened for RDMA READ",
        server=_srv("ib_send_bw -d rxe0 %s" % TINY), client=_cli("ib_read_bw -d rxe0 %s" % TINY), client_timeout=20,
        server_lines=(READ_KEYS,), client_lines=("Failed status 9: wr_id 0",),
        pairs=("bookworm",), expect_explain="option-mismatch"),
    Scenario(
        "binary-write-server-atomic-client", "ib_write_bw server, ib_atomic_bw client",
        faulty="both", fault="different test binaries: the write server's QP is not opened for atomics",
        server=_srv("%s %s" % (WB, TINY)), client=_cli("ib_atomic_bw -d rxe0 %s" % TINY), client_timeout=20,
        server_lines=(READ_KEYS,), client_lines=("Failed status 9: wr_id 0",),
        pairs=("bookworm",), expect_explain="option-mismatch"),
    Scenario(
        "binary-write-server-send-client", "ib_write_bw server, ib_send_bw client",
        faulty="both", fault="different test binaries: the write server posts no receives",
        server=_srv("%s %s" % (WB, TINY)), client=_cli("ib_send_bw -d rxe0 %s" % TINY), client_timeout=HANG_BOUND,
        server_lines=("ethernet_read_data: Couldn't read reports",), client_lines=(RESULTS_HEADER,),
        pairs=("bookworm",), expect_explain="option-mismatch",
        notes="perftest gives RC QPs infinite RNR retries (rnr_retry 7), so no status 13: the sender waits."),
    Scenario(
        "ud-send-size-client-larger", "ib_send_bw -c UD, client -s 1024, server -s 512",
        faulty="both", fault="UD messages larger than the server's receive buffers",
        server=_srv("ib_send_bw -d rxe0 -c UD -s 512 %s" % TINY),
        client=_cli("ib_send_bw -d rxe0 -c UD -s 1024 %s" % TINY), client_timeout=20,
        server_lines=("Failed status 2: wr_id 0",), client_lines=(READ_KEYS,),
        pairs=("bookworm",), expect_explain="option-mismatch",
        notes="UD has no acknowledgements: only the receiver can see that the message did not fit."),
    Scenario(
        "bidir-client-only", "-b on the client only",
        faulty="both", fault="client -b (bidirectional), server unidirectional",
        server=_srv("%s %s" % (WB, TINY)), client=_cli("%s -b %s" % (WB, TINY)), client_timeout=20,
        expect_explain="option-mismatch"),
    Scenario(
        "bidir-server-only", "-b on the server only",
        faulty="both", fault="server -b (bidirectional), client unidirectional",
        server=_srv("%s -b %s" % (WB, TINY)), client=_cli("%s %s" % (WB, TINY)), client_timeout=20,
        expect_explain="option-mismatch"),

    # ---- 4. side channel --------------------------------------------------------------------------
    Scenario(
        "server-not-running", "Client started, no server on h1",
        faulty="h1", fault="no server process", client=_cli("%s %s" % (WB, TINY)),
        expect_explain="server-not-running", expect_check="server-not-running", check_host="h2",
        check_args="--peer 192.0.2.1 --probe-perftest",
        client_lines=(COULDNT_CONNECT,)),
    Scenario(
        "port-mismatch-client", "Client -p 18600, server on the default port 18515",
        faulty="both", fault="client -p 18600, server default (18515)",
        server=_srv("%s %s" % (WB, TINY)), client=_cli("%s -p 18600 %s" % (WB, TINY)), client_timeout=20,
        server_grace=3, expect_explain="option-mismatch",
        server_lines=(BANNER,), client_lines=("Couldn't connect to %s:18600" % SERVER_IP,),
        notes="The client connects to its own -p on the server's address, where nothing listens; the server waits "
              "at its banner until interrupted."),
    Scenario(
        "size-beyond-host-memory", "Both sides -s 1 GiB: perftest's 2 GiB buffer is more than the VM has",
        faulty="both", fault="-s 1073741824 on both sides: 2 GiB of test buffer in a VM of 1 GiB without swap",
        server=_srv("%s -s 1073741824 -n 5" % WB), client=_cli("%s -s 1073741824 -n 5" % WB), client_timeout=60,
        server_grace=10, expect_explain="host-memory-exhausted",
        server_lines=("Couldn't allocate work buf.",), client_lines=("Couldn't allocate work buf.",),
        notes="perftest allocates 2 x size x QPs with memalign() once the side channel is up (alloc_ctx(), "
              "host_memory_allocate_buffer()); the kernel's overcommit heuristic refuses 2 GiB in 1 GiB, so each "
              "side prints \"Couldn't allocate work buf.\" before anything is registered."),
    Scenario(
        "port-in-use-stale-server", "A stale ib_write_bw server still holds TCP 18515; a second server fails",
        faulty="h1", fault="an earlier ib_write_bw server is still listening on 18515",
        background=(_srv("%s %s" % (WB, TINY)),),
        server=_srv("%s %s" % (WB, TINY)), client=_cli("%s %s" % (WB, TINY)),
        expect_explain="port-in-use", expect_check="port-in-use",
        server_lines=("Couldn't listen to port 18515",),
        notes="The client reaches the stale server and its run works: only the second server's log shows "
              "the problem."),

    # ---- 5. firewall on TCP 18515 -----------------------------------------------------------------
    Scenario(
        "firewall-drop-tcp-18515", "nftables on the server drops TCP 18515",
        faulty="h1", fault="nft: inet filter input tcp dport 18515 drop (on h1)",
        setup=(_nft("h1", "tcp dport 18515 drop"), Step("h2", "sysctl -qw net.ipv4.tcp_syn_retries=2")),
        server=_srv("%s %s" % (WB, TINY)), client=_cli("%s %s" % (WB, TINY)), client_timeout=30, server_grace=3,
        expect_explain="unknown", expect_check="firewall-blocks-port",
        alternatives=("wrong-peer-address",), server_lines=(BANNER,), client_lines=(COULDNT_CONNECT,),
        notes="The SYNs are dropped: connect() gives up after the SYN retries. The lab lowers the "
              "client's net.ipv4.tcp_syn_retries to 2 (about 7 s instead of about 130 s); the printed "
              "lines are the same. From the logs (server waiting, client cannot connect) a firewall, a "
              "client aimed at another host and another -p look alike: explain lists them."),
    Scenario(
        "firewall-reject-tcp-18515", "nftables on the server rejects TCP 18515",
        faulty="h1", fault="nft: inet filter input tcp dport 18515 reject (on h1)",
        setup=(_nft("h1", "tcp dport 18515 reject"),),
        server=_srv("%s %s" % (WB, TINY)), client=_cli("%s %s" % (WB, TINY)), server_grace=3,
        expect_explain="unknown", expect_check="firewall-blocks-port",
        alternatives=("wrong-peer-address",), server_lines=(BANNER,), client_lines=(COULDNT_CONNECT,),
        notes="Refused at once, the same lines as a server that is not running, but the server log shows "
              "it waiting: a firewall, a client aimed at another host or another -p; explain lists them."),

    # ---- 6. firewall on RoCEv2 --------------------------------------------------------------------
    Scenario(
        "firewall-drop-udp-4791", "nftables on the server drops UDP 4791 (RoCEv2), TCP passes",
        faulty="h1", fault="nft: inet filter input udp dport 4791 drop (on h1)",
        setup=(_nft("h1", "udp dport 4791 drop"),),
        server=_srv("%s %s" % (WB, SMALL)), client=_cli("%s %s" % (WB, SMALL)), client_timeout=HANG_BOUND,
        expect_explain="unknown", expect_check="firewall-blocks-port",
        alternatives=("packet-loss",),
        server_lines=(RESULTS_HEADER, READ_KEYS), client_lines=(RESULTS_HEADER,),
        notes="The side channel works, the RoCE packets do not arrive. " + HANG_NOTE + " From the logs "
              "this cannot be told from loss on the path; check on h1 sees the rule."),

    # ---- 7. MTU -----------------------------------------------------------------------------------
    Scenario(
        "mtu-netdev-mismatch", "Netdev MTU 1500 on h1, 9000 on h2 (RoCE active MTU 1024 vs 4096)",
        faulty="h2", fault="ip link set eth0 mtu 9000 (on h2)",
        setup=(Step("h2", "ip link set eth0 mtu 9000"),),
        server=_srv("%s %s" % (WB, SMALL)), client=_cli("%s %s" % (WB, SMALL)),
        healthy=True, server_lines=("Mtu             : 1024[B]",), client_lines=("Mtu             : 1024[B]",),
        notes="perftest exchanges the active MTUs and both sides use the smaller one: the run works."),
    Scenario(
        "mtu-option-above-active", "-m 4096 on the client, active MTU 1024",
        faulty="h2", fault="client asks for -m 4096",
        server=_srv("%s %s" % (WB, SMALL)), client=_cli("%s -m 4096 %s" % (WB, SMALL)),
        healthy=True,
        notes="perftest warns and falls back to the active MTU."),
    Scenario(
        "mtu-netdev-576-both", "Netdev MTU 576 on both hosts (RoCE active MTU 256)",
        faulty="h1", fault="ip link set eth0 mtu 576 (on both hosts)",
        setup=(Step("h1", "ip link set eth0 mtu 576"), Step("h2", "ip link set eth0 mtu 576")),
        server=_srv("%s %s" % (WB, SMALL)), client=_cli("%s %s" % (WB, SMALL)), client_timeout=60,
        expect_explain="mtu-small", expect_check="mtu-small", pairs=("bookworm",),
        server_lines=("Mtu             : 256[B]",), client_lines=("Mtu             : 256[B]",),
        notes="The run completes with 256-byte packets, several times slower than healthy: nothing fails, only "
              "the MTU in perftest's header and the port's active MTU show it."),

    # ---- 8. loss on the wire ----------------------------------------------------------------------
    Scenario(
        "netem-loss-1pct", "tc netem: 1% loss on h2's egress",
        faulty="h2", fault="tc qdisc add dev eth0 root netem loss 1% (on h2)",
        setup=(Step("h2", "tc qdisc add dev eth0 root netem loss 1%"),),
        server=_srv("%s %s" % (WB, SMALL)), client=_cli("%s %s" % (WB, SMALL)), client_timeout=60,
        expect_check="packet-loss",
        notes="The run completes but about ten times slower than healthy (rxe retransmits after "
              "timeouts). Nothing in the logs names the loss: only the number is low."),
    Scenario(
        "netem-loss-5pct", "tc netem: 5% loss on h2's egress",
        faulty="h2", fault="tc qdisc add dev eth0 root netem loss 5% (on h2)",
        setup=(Step("h2", "tc qdisc add dev eth0 root netem loss 5%"),),
        server=_srv("%s %s" % (WB, SMALL)), client=_cli("%s %s" % (WB, SMALL)), client_timeout=15,
        expect_explain="unknown", expect_check="packet-loss", alternatives=("packet-loss", "firewall-blocks-port"),
        server_lines=(RESULTS_HEADER,), client_lines=(RESULTS_HEADER,),
        notes="Same picture as a dropped UDP 4791: the transfer stalls after the results header. It crawls rather "
              "than stops: each lost packet waits out rxe's retransmit timer, and the 200 x 64 KiB take about 29 s "
              "(about 640 losses, a count that varies by a few percent), so the bound is 15 s, where a 30 s bound "
              "sometimes let the run finish (at 0.45 MiB/s). The recordings were made with a 30 s bound."),

    Scenario(
        "server-killed-mid-run", "The server is SIGKILLed 5 s into a 20 s run (-D 20)",
        faulty="h1", fault="timeout -s KILL 5 around the server (as the OOM killer or a time limit would end it)",
        server=_srv("timeout -s KILL 5 %s -D 20" % WB), client=_cli("%s -D 20" % WB), client_timeout=45,
        server_grace=10, expect_explain="peer-process-exited", pairs=("bookworm",),
        server_lines=("Killed",), client_lines=(RESULTS_HEADER,),
        notes="The server's shell prints \"Killed\" after its results header. The client runs its 20 s and then fails "
              "its closing exchange over the side channel (\"Couldn't read remote address\"); on rxe its writes to "
              "the destroyed QP never complete, so its row shows 0 iterations. The host is healthy: check has "
              "nothing to find."),

    Scenario(
        "client-killed-mid-run", "The client is SIGKILLed 5 s into a 20 s run (-D 20)",
        faulty="h2", fault="timeout -s KILL 5 around the client (a job step's time limit, the OOM killer, ^C twice)",
        server=_srv("%s -D 20" % WB), client=_cli("timeout -s KILL 5 %s -D 20" % WB), client_timeout=45,
        server_grace=30, expect_explain="peer-process-exited", pairs=("bookworm",),
        server_lines=(BANNER,), client_lines=("Killed",),
        notes="The mirror of server-killed-mid-run: what the server prints when its client dies in the middle of "
              "the run."),
    # ---- 9. port, link, modules -------------------------------------------------------------------
    Scenario(
        "netdev-down-server", "eth0 down on the server host: rxe0 port DOWN",
        faulty="h1", fault="ip link set eth0 down (on h1)",
        setup=(Step("h1", "ip link set eth0 down"), Step("h2", "sysctl -qw net.ipv4.tcp_syn_retries=2")),
        server=_srv("%s %s" % (WB, TINY)), client=_cli("%s %s" % (WB, TINY)),
        expect_explain="port-down", expect_check="port-down",
        server_lines=("Port number 1 state is Down",), client_lines=(COULDNT_CONNECT,),
        notes="h2 still has h1's MAC from before (the hosts talked), so its SYNs go out unanswered: the "
              "client hangs in connect() like behind a dropping firewall. The lab lowers the client's "
              "net.ipv4.tcp_syn_retries to 2 so it gives up after about 7 s (about 130 s by default)."),
    Scenario(
        "no-rxe-link-server", "No rxe link on the server host (rdma_rxe loaded)",
        faulty="h1", fault="rdma link delete rxe0 (on h1)",
        setup=(Step("h1", "rdma link delete rxe0"),),
        server=_srv("%s %s" % (WB, TINY)), client=_cli("%s %s" % (WB, TINY)),
        expect_explain="unknown", expect_check="no-rdma-device", alternatives=("no-rdma-device",),
        client_lines=(COULDNT_CONNECT,)),
    Scenario(
        "ib-uverbs-not-loaded-server", "ib_uverbs not loaded on the server host",
        faulty="h1", fault="rmmod rdma_ucm rdma_rxe ib_uverbs (on h1)",
        setup=(Step("h1", "rmmod rdma_ucm rdma_rxe ib_uverbs"),),
        server=_srv("%s %s" % (WB, TINY)), client=_cli("%s %s" % (WB, TINY)),
        expect_explain="unknown", expect_check="kernel-module-missing",
        alternatives=("kernel-module-missing",), client_lines=(COULDNT_CONNECT,),
        notes="rdma_rxe depends on ib_uverbs, so ib_uverbs cannot be unloaded while rxe is loaded: the "
              "fault removes both, and the logs cannot tell it from a missing rxe link."),
    Scenario(
        "rdma-ucm-not-loaded-client", "rdma_ucm not loaded on the client host, both sides -R",
        faulty="h2", fault="rmmod rdma_ucm (on h2)",
        setup=(Step("h2", "rmmod rdma_ucm && ! test -e /dev/infiniband/rdma_cm"),),
        server=_srv("%s -R %s" % (WB, TINY)), client=_cli("%s -R %s" % (WB, TINY)),
        healthy=True, server_lines=("65536      100",), client_lines=("65536      100",),
        notes="Not a fault on these releases: librdmacm asks the kernel for the rdma_cm char device over "
              "RDMA netlink, which loads rdma_ucm on demand, and the run works."),

    # ---- 10. device name, GID index ---------------------------------------------------------------
    Scenario(
        "wrong-device-name-client", "Client -d rxe1 (no such device)",
        faulty="h2", fault="client names rxe1",
        server=_srv("%s %s" % (WB, TINY)), client=_cli("ib_write_bw -d rxe1 %s" % TINY), server_grace=5,
        expect_explain="wrong-device-name", expect_check=None,
        server_lines=(BANNER,), client_lines=("IB device rxe1 not found",)),
    Scenario(
        "gid-index-empty-client", "Client -x 5: an empty GID table entry",
        faulty="h2", fault="client -x 5 (only GIDs 0 and 1 exist)",
        server=_srv("%s %s" % (WB, TINY)), client=_cli("%s -x 5 %s" % (WB, TINY)), client_timeout=20,
        server_grace=5, expect_explain="wrong-gid-index"),
    Scenario(
        "gid-index-link-local-client", "Client -x 0: the fe80:: link-local GID, server uses the IPv4 GID",
        faulty="h2", fault="client -x 0",
        server=_srv("%s %s" % (WB, TINY)), client=_cli("%s -x 0 %s" % (WB, TINY)), client_timeout=20,
        server_grace=5, expect_explain="wrong-gid-index"),

    # ---- 11. user limits and permissions ----------------------------------------------------------
    Scenario(
        "memlock-64k-nonroot-server", "Server run by user lab with a 64 KiB memlock limit",
        faulty="h1", fault="server as user lab, ulimit -l 64",
        server=_srv("%s %s" % (WB, TINY), user="lab", memlock_kib=64), client=_cli("%s %s" % (WB, TINY)),
        expect_explain="memlock-limit", expect_check="memlock-limit", check_user="lab",
        check_memlock_kib=64,
        server_lines=("Couldn't allocate MR",)),
    Scenario(
        "device-permission-denied-server", "Server run by user lab; /dev/infiniband/uverbs0 is root-only",
        faulty="h1", fault="chmod 600 /dev/infiniband/uverbs0 (on h1), server as user lab",
        setup=(Step("h1", "chmod 600 /dev/infiniband/uverbs0"),),
        server=_srv("%s %s" % (WB, TINY), user="lab"), client=_cli("%s %s" % (WB, TINY)),
        expect_explain="device-permission-denied", expect_check="device-permission-denied", check_user="lab",
        client_lines=(COULDNT_CONNECT,)),

    # ---- 12. addresses ----------------------------------------------------------------------------
    Scenario(
        "wrong-address-tcp", "Client aims at 192.0.2.3 (no such host on the wire)",
        faulty="h2", fault="client targets 192.0.2.3 instead of 192.0.2.1",
        server=_srv("%s %s" % (WB, TINY)), client=_cli("%s %s" % (WB, TINY), WRONG_IP), client_timeout=30,
        server_grace=3, expect_explain="unknown", alternatives=("wrong-peer-address",),
        expect_check="wrong-peer-address", check_args="--peer 192.0.2.3",
        server_lines=(BANNER,), client_lines=("Couldn't connect to %s:18515" % WRONG_IP,),
        notes="The logs look like the firewall cases (server waiting, client cannot connect): explain "
              "cannot tell and lists wrong-peer-address among the candidates; check --peer tells."),
    Scenario(
        "wrong-address-rdma-cm", "Both -R, client aims at 192.0.2.3: no RDMA netdev reaches that address",
        faulty="h2", fault="client -R targets 192.0.2.3",
        server=_srv("%s -R %s" % (WB, TINY)), client=_cli("%s -R %s" % (WB, TINY), WRONG_IP), client_timeout=60,
        server_grace=3, expect_explain="rdma-cm-address-not-on-rdma-netdev", alternatives=("wrong-peer-address",),
        expect_check="wrong-peer-address", check_args="--peer 192.0.2.3",
        server_lines=(BANNER,), client_lines=("Received 10 times ADDR_ERROR",),
        notes="rdma_resolve_addr fails 10 times (about 20 s): rdma_cm could not map the address to an RDMA "
              "device and peer. The logs cannot tell an address that is not on an RDMA netdev from one "
              "that does not exist (the truth here); the former is the reference's first-ranked cause."),
]

BY_NAME: Dict[str, Scenario] = {s.name: s for s in SCENARIOS}


def for_pair(pair: str) -> List[Scenario]:
    return [s for s in SCENARIOS if pair in s.pairs]


def validate() -> List[str]:
    """Problems in the table (names, slugs, hosts); the table test asserts this is empty."""
    problems = []
    seen = set()
    for s in SCENARIOS:
        if s.name in seen:
            problems.append("duplicate name %s" % s.name)
        seen.add(s.name)
        if s.name != s.name.lower() or " " in s.name or "_" in s.name:
            problems.append("%s: names are kebab-case" % s.name)
        for slug in (s.expect_explain, s.expect_check) + tuple(s.alternatives):
            if slug is not None and slug != "unknown" and slug not in CAUSES:
                problems.append("%s: unknown cause slug %r" % (s.name, slug))
        if s.healthy and s.expect_explain:
            problems.append("%s: healthy scenarios expect no cause" % s.name)
        if s.expect_explain == "unknown" and not (s.expect_check or s.alternatives):
            problems.append("%s: an 'unknown' explain expectation needs the true cause (expect_check)" % s.name)
        if s.faulty not in (None, "h1", "h2", "both"):
            problems.append("%s: faulty must be h1, h2, both or None" % s.name)
        for _, side in s.sides():
            if side.host not in ("h1", "h2"):
                problems.append("%s: bad host %r" % (s.name, side.host))
        for step in s.setup:
            if step.host not in ("h1", "h2"):
                problems.append("%s: bad setup host %r" % (s.name, step.host))
        for pair in s.pairs:
            if pair not in PAIRS:
                problems.append("%s: unknown pair %r" % (s.name, pair))
    return problems
