"""The other producers of a paste besides perftest: their command lines, the settings a paste shows, and one
run builder for all of them.

What a line *says* comes from the message catalogues (knowledge/messages/<producer>.toml); this module knows
which programs start a run of which producer (`ucx_perftest`, `mpirun`, `fi_pingpong`, `rping`,
`ibv_rc_pingpong`, `ibv_devinfo`, nccl-tests' `all_reduce_perf` ...), which side a command line is (a
ping-pong client names its server), and the environment and MCA settings a paste shows (`-x NCCL_IB_HCA=mlx5_0`,
`export UCX_TLS=rc`, `--mca btl ^openib`, NCCL's "NCCL_IB_GID_INDEX set by environment to 3").
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, FrozenSet, Hashable, List, Optional, Set, Tuple

from rdmadoctor.knowledge.listings import LISTING_TOOLS
from rdmadoctor.logparse.catalog import Match, Pattern
from rdmadoctor.logparse.command import shell_words
from rdmadoctor.logparse.kept import MAX_RUNS, KeptMessages
from rdmadoctor.model import Command, HeaderField, Run


@dataclass(frozen=True)
class Tool:
    producer: str
    takes_value: FrozenSet[str] = frozenset()   # short options that consume the next word
    side: str = "positional"                    # positional | rping | cmatose | server | client | none


_PINGPONG = frozenset("-p -d -i -s -m -r -n -l -g -t -c -S -x".split())
_FABTESTS = frozenset("-p -e -d -f -s -I -S -B -P -m -n -a -c -C -F -o -w -W -D -E -K -t -u -i -j -T -U -M -b".split())
_UCX = frozenset("-t -s -n -w -c -p -f -H -O -i -x -D -l -b -m -N -r -R -e -G -a -T -L -A -k -z".split())
_MPIRUN = frozenset("-np -n -N -x -H --host -hostfile --hostfile -machinefile --map-by --bind-by -mca --mca "
                    "--rank-by --bind-to -c -npernode -wdir -prefix --prefix -oversubscribe".split())
_RPING = frozenset("-a -I -p -C -S -P -q -R".split())

TOOLS: Dict[str, Tool] = {
    **{name: Tool("verbs", _PINGPONG) for name in (
        "ibv_rc_pingpong", "ibv_uc_pingpong", "ibv_ud_pingpong", "ibv_srq_pingpong", "ibv_xsrq_pingpong")},
    **{name: Tool("verbs", side="none")
       for name in sorted(LISTING_TOOLS - {"ucx_info", "fi_info"} | {"ibv_asyncwatch"})},
    "rping": Tool("verbs", _RPING, side="rping"),
    **{name: Tool("verbs", frozenset("-s -b -c -C -S -p -m -M -P -f".split()), side="cmatose")
       for name in ("ucmatose", "udaddy", "mckey")},
    "rdma_server": Tool("verbs", frozenset("-p -s".split()), side="server"),
    "rdma_client": Tool("verbs", frozenset("-p -s".split()), side="client"),
    # librdmacm's XRC examples (getopt "s:p:c:" and "p:c:"): -c names the QP type, r (RC, the default) or x (XRC)
    "rdma_xserver": Tool("verbs", frozenset("-p -c".split()), side="server"),
    "rdma_xclient": Tool("verbs", frozenset("-s -p -c".split()), side="client"),
    **{name: Tool("verbs", frozenset("-s -b -B -I -C -S -p -T".split()), side="cmatose")
       for name in ("rstream", "riostream")},
    # rsockets' file copy (getopt "p:"): `rcopy` serves, `rcopy <file> <host>[:<file>]` sends; its first word is a file
    "rcopy": Tool("verbs", frozenset({"-p"}), side="none"),
    "ucx_perftest": Tool("ucx", _UCX),
    "ucx_info": Tool("ucx", side="none"),
    **{name: Tool("libfabric", _FABTESTS) for name in (
        "fi_pingpong", "fi_rdm_pingpong", "fi_msg_pingpong", "fi_dgram_pingpong", "fi_rdm", "fi_msg",
        "fi_rdm_tagged_pingpong", "fi_msg_bw", "fi_rdm_bw", "fi_rma_bw", "fi_rdm_tagged_bw")},
    "fi_info": Tool("libfabric", frozenset("-p -f -e -a -n -P -c -t -d -s -m -g".split()), side="none"),
    **{name: Tool("ompi", _MPIRUN, side="none") for name in ("mpirun", "mpiexec", "orterun", "prterun", "oshrun")},
    **{name: Tool("nccl", frozenset("-b -e -f -g -t -n -w -c -o -d -p -a -z -G -C -m -M -i -R -T -N -u".split()),
                  side="none")
       for name in ("all_reduce_perf", "all_gather_perf", "broadcast_perf", "reduce_perf", "reduce_scatter_perf",
                    "alltoall_perf", "sendrecv_perf", "gather_perf", "scatter_perf", "hypercube_perf")},
}
TOOL_WORDS = frozenset(TOOLS)
_TOOL_RE = re.compile(r"(?<![\w.-])(?:[\w./*-]*/)?(?P<tool>" + "|".join(sorted(TOOLS, key=len, reverse=True)) +
                      r")(?=\s|$|;|\|)")
_SHELL_END = re.compile(r"^(?:\||>|2>|&>|&&|;|&|\|\||2>&1)$")
# What may stand before a command on its line: a shell prompt (or `set -x`'s trace of the command: PS4's "+ ", one more
# "+" per nested shell), wrappers, their options, VAR=value settings. A tool's name inside prose ("Unable to perform
# rdma_client function") is not a command.
_PREFIX = re.compile(r"^\s*(?:[$#>]\s*|\+{1,8} |[^\s]*[$#>]\s+|\([^)]*\)\s*[$#>]?\s*|\[[^\]\s]+@[^\]]*\][$#>]\s*)?"
                     r"(?:(?:sudo|time|env|nohup|exec|numactl|taskset|timeout|stdbuf|srun|\d+\w?|-\S+|[A-Za-z_]\w*=\S*)\s+)*$")
_RDMA_OBJECTS = ("link", "dev", "system", "sys", "resource", "res", "statistic", "stat", "monitor")
# the producers whose command lines are recognised inside quotes (rdma-core's and libfabric's test programs, which
# test harnesses run and log)
_QUOTABLE = ("verbs", "libfabric")
_QUOTED = re.compile(r".*(?P<quote>['\"`])")
_HOST = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?|\[?[0-9A-Fa-f:.]+\]?(?:%\w+)?)$")

# Environment variables that configure the RDMA stack and the libraries on it.
# (Gloo's: GLOO_DEVICE_TRANSPORT, GLOO_SOCKET_IFNAME; PyTorch's ibverbs device: TORCH_GLOO_IBV_NAME, _INDEX)
SETTING_PREFIXES = ("NCCL_", "UCX_", "FI_", "OMPI_MCA_", "PMIX_MCA_", "UCC_", "MLX5_", "RDMAV_", "IBV_", "HCOLL_",
                    "PSM3_", "PSM2_", "I_MPI_", "MPICH_", "NVSHMEM_", "TORCH_NCCL_", "GLOO_", "TORCH_GLOO_",
                    "CUDA_VISIBLE_DEVICES", "RDMADOCTOR_")
# Open MPI's parameter names are lower case (OMPI_MCA_btl_tcp_if_include=eth0)
_SETTING_RE = re.compile(r"(?<![\w-])(?P<name>(?:" + "|".join(SETTING_PREFIXES) + r")[A-Za-z0-9_]*)="
                         r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s;|&]*)")
_MCA_RE = re.compile(r"(?<![\w-])--?mca\s+(?P<name>[\w.-]+)\s+(?P<value>\"[^\"]*\"|'[^']*'|\S+)")
_SETTING_HINT = re.compile(r"=|mca", re.IGNORECASE)
# advice in a library's own message ("HINT: ... you can set NCCL_CROSS_NIC=0 to ...", "Set NCCL_X=1 to ...", UCX's
# "Please set environment variable RDMAV_HUGEPAGES_SAFE=1") names a value to try, not one in force
_ADVICE = re.compile(r"(?:\bset|\bsetting|\btry)(?:\s+(?:the\s+)?(?:environment\s+)?variable)?\s+$", re.IGNORECASE)
_ADVICE_REACH = 40          # characters before a setting where its advice's words are looked for


def settings_in(line: str) -> List[Tuple[str, str, int]]:
    """(name, value, column) of every setting a line shows: VAR=value (after -x, export, env or a prompt) and
    Open MPI's --mca key value (as OMPI_MCA_key)."""
    if not _SETTING_HINT.search(line):
        return []
    out = [(m.group("name"), m.group("value").strip("'\""), m.start()) for m in _SETTING_RE.finditer(line)
           if not _ADVICE.search(line[max(0, m.start() - _ADVICE_REACH):m.start()])]
    out += [(f"OMPI_MCA_{m.group('name')}", m.group("value").strip("'\""), m.start()) for m in _MCA_RE.finditer(line)]
    return out


def _side(tool: Tool, options: Dict[str, object], host: Optional[str]) -> Optional[str]:
    if tool.side == "rping":
        return "server" if "-s" in options else "client" if "-c" in options else None
    if tool.side == "cmatose":             # ucmatose -s SERVER connects to it: a client
        return "client" if "-s" in options else "server"
    if tool.side in ("server", "client"):
        return tool.side
    if tool.side == "positional":
        return "client" if host else "server"
    return None


def _command_rest(text: str, m: re.Match) -> Optional[str]:
    """What follows the tool's name `m` on the line, when what stands before it makes the line a command."""
    prefix, rest = text[:m.start()], text[m.end():]
    if _PREFIX.match(prefix):
        return rest
    # a command a test harness or a script quotes ("Running 'timeout 2m rping -c -a ...'"): what follows
    # the last opening quote must be a command's start, and the command ends at the closing quote
    quoted = _QUOTED.match(prefix)
    if not quoted or not _PREFIX.match(prefix[quoted.end():]) or TOOLS[m.group("tool")].producer not in _QUOTABLE:
        return None
    return rest.split(quoted.group("quote"), 1)[0]


def _arguments(name: str, tool: Tool, tokens: List[str]) -> Tuple[List[str], Dict[str, object], Optional[str]]:
    """(argv, options, the first positional word that can be a host) of a command's words, up to a shell
    operator (a pipe, a redirection, `;`, `&&`)."""
    argv: List[str] = [name]
    options: Dict[str, object] = {}
    host: Optional[str] = None
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if _SHELL_END.match(tok):
            break
        argv.append(tok)
        if tok.startswith("-") and len(tok) > 1:
            key, eq, value = tok.partition("=")
            if not eq and key in tool.takes_value and i + 1 < len(tokens) and not _SHELL_END.match(tokens[i + 1]):
                i += 1
                value = tokens[i]
                argv.append(value)
            options[key] = value if (eq or key in tool.takes_value) else True
        elif host is None and _HOST.match(tok) and tool.side not in ("none",):
            host = tok
        i += 1
    return argv, options, host


def parse_command(text: str) -> Optional[Tuple[str, Tool, List[str], Dict[str, object], Optional[str], str]]:
    """(tool name, tool, argv, options, host, command text) when `text` holds one of TOOLS' command lines."""
    m = _TOOL_RE.search(text)
    if not m:
        return None
    rest = _command_rest(text, m)
    if rest is None:
        return None
    name = m.group("tool")
    tool = TOOLS[name]
    if name == "rdma" and rest.split()[:1] not in ([w] for w in _RDMA_OBJECTS):
        return None                        # iproute2's rdma names an object first: rdma link, rdma dev ...
    try:
        tokens = shell_words(rest)
    except ValueError:
        tokens = rest.split()
    # their command lines are options only: "rping server failed: -1" is a message
    if tool.side in ("rping", "cmatose") and tokens and not tokens[0].startswith("-"):
        return None
    argv, options, host = _arguments(name, tool, tokens)
    # rping and ucmatose name the server with an option, not a positional word
    address, server = options.get("-a"), options.get("-s")
    if tool.side == "rping" and isinstance(address, str) and "-c" in options:
        host = address
    if tool.side == "cmatose" and isinstance(server, str):
        host = server
    return name, tool, argv, dict(options), host, (text[m.start("tool"):m.end()] + rest).strip()


class ProducerRuns:
    """The runs of the producers other than perftest in one source: a command line starts a run; a message starts
    one when none is open; a library's message (libibverbs, the kernel) joins the run that is open.

    A source keeps its first MAX_RUNS runs; a later run that prints an error takes the place of the last kept run
    without one (as perftest's runs do: runs.RunBuilder), so a failure after hundreds of healthy runs is examined."""

    def __init__(self, source: str):
        self.source = source
        self.runs: List[Run] = []
        self.current: Dict[str, Run] = {}
        self.last: Optional[Run] = None
        self.dropped = 0
        self._messages = KeptMessages()
        self._kept: Set[int] = set()       # id() of the runs in self.runs (each alive while kept, so never reused)
        self._failed: Set[int] = set()     # id() of the kept runs that printed an error
        # the kept runs, in order, that may have printed no error (see _failed): a run leaves it before it is evicted,
        # so every run in it is kept
        self._healthy: List[Run] = []

    def _new(self, producer: str, number: int) -> Run:
        replaced = self.current.get(producer)
        if replaced is not None and id(replaced) not in self._kept:
            self._messages.forget(replaced)          # a run not kept, which gets no more messages
        run = Run(source=self.source, index=len(self.runs) + self.dropped, first_line=number, last_line=number,
                  producer=producer)
        if len(self.runs) < MAX_RUNS:
            self._keep(run)
        else:
            self.dropped += 1
        self.current[producer] = run
        return run

    def _keep(self, run: Run) -> None:
        self.runs.append(run)
        self._kept.add(id(run))
        self._healthy.append(run)

    def _failure(self, run: Run) -> None:
        """`run` printed an error: a run not kept takes the place of the last kept run without an error, if any."""
        if id(run) in self._kept:
            self._failed.add(id(run))
            return
        while self._healthy:
            healthy = self._healthy.pop()
            if id(healthy) in self._failed:
                continue
            del self.runs[next(i for i in range(len(self.runs) - 1, -1, -1) if self.runs[i] is healthy)]
            self._kept.discard(id(healthy))
            self._messages.forget(healthy)
            self.runs.append(run)
            self._kept.add(id(run))
            self._failed.add(id(run))
            return

    def command(self, number: int, parsed: Tuple[str, Tool, List[str], Dict[str, object], Optional[str], str]) -> Run:
        name, tool, argv, options, host, text = parsed
        run = self.current.get(tool.producer)
        if run is None or run.command is not None or run.messages or run.messages_dropped:
            run = self._new(tool.producer, number)
        run.command = Command(tool=name, argv=argv, options={k: v for k, v in options.items()}, host=host,
                              line=number, text=text)
        run.tool = name
        side = _side(tool, options, host)
        if side:
            named = f"names server {host}" if host else "no server address"
            run.side, run.side_reason = side, f"command line ({named})"
        run.last_line = number
        self.last = run
        return run

    def message(self, number: int, producer: str, match: Match, joins: bool = False) -> Optional[Run]:
        """The run a catalogue match's message joins, when that run keeps it (the caller appends the message, made
        only then: KeptMessages.admits); None when it is left out. `joins`: a library's or the kernel's message,
        which belongs to whatever run is open."""
        run = self._joined(producer, joins)
        if run is None:
            run = self._new(producer, number)
        kind = match.pattern.kind
        if self._unkeepable(run):
            run.messages_dropped += 1
            kept = False
        else:
            kept = self._messages.admits(run, kind, match.pattern.id, match.fields)
            if kind == "error" and id(run) not in self._failed:
                self._failure(run)
        run.last_line = number
        self.last = run
        return run if kept else None

    def may_leave_out(self, producer: str, joins: bool = False) -> bool:
        """Whether the run a message of `producer` joins leaves some messages out: it is full, or can no longer be
        kept (repeat_left_out says which)."""
        run = self._joined(producer, joins)
        return run is not None and (self._messages.full(run) or self._unkeepable(run))

    def repeat_left_out(self, number: int, pattern: Pattern, key: Tuple[Hashable, ...], joins: bool = False) -> bool:
        """What `message` does with a message of `pattern` (its kind `key`: kept.kind_key) that its run leaves out,
        done without the match: True when the run can no longer be kept, or is full and keeps no new kind for it
        (KeptMessages.left_out) and an error changes nothing of which runs are kept; False, with nothing changed,
        when `message` must decide."""
        run = self._joined(pattern.producer, joins)
        if run is None:
            return False
        if self._unkeepable(run):
            run.messages_dropped += 1
        elif (pattern.kind == "error" and id(run) not in self._failed) or not self._messages.left_out(run, key):
            return False
        run.last_line = number
        self.last = run
        return True

    def _unkeepable(self, run: Run) -> bool:
        """A run not kept that no error of its own can get kept any more: the source keeps MAX_RUNS runs and every one
        of them printed an error (a failing run takes only the place of a kept run without one: _failure). Its
        messages are counted, not made. Once true for a source, it stays true: the kept runs only change when a
        healthy one gives its place."""
        if id(run) in self._kept or len(self.runs) < MAX_RUNS:
            return False
        healthy = self._healthy
        while healthy and id(healthy[-1]) in self._failed:
            healthy.pop()        # (as _failure passes over it)
        return not healthy

    def _joined(self, producer: str, joins: bool) -> Optional[Run]:
        """The open run a message of `producer` joins (`joins`: a library's message joins whatever run is open)."""
        return self.last if joins and self.last is not None else self.current.get(producer)

    def finish(self, settings: Dict[str, HeaderField], others: List[Run]) -> List[Run]:
        """The runs, each with the source's settings it does not show itself (a paste's exports apply to the job)."""
        for run in self.runs + others:
            for name, value in settings.items():
                run.settings.setdefault(name, value)
        self._messages.clear()
        return self.runs

