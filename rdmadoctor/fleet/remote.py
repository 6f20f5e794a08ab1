"""Run one command per node over ssh, through ClusterShell's task engine: its ssh worker, its fan-out (at most
`fanout` ssh processes at once), its per-node timeout (each node's clock starts when its ssh starts, so a slow
node never eats another's time) and its connect timeout.

    shell = Shell(fanout=64, timeout=60)
    replies = shell.run({"node001": "rdmadoctor check --json", ...})     # node -> Reply

Every node asked gets a Reply, whatever happened: the command's exit code and output, or `timed_out`, or the
ssh failure (exit code 255 and ssh's own message). Nothing is dropped.

The ssh settings are ClusterShell's: `ssh_path`, `ssh_user`, `ssh_options`, `fanout` and `connect_timeout` are
read from the [Main] section of clush.conf where ClusterShell looks for it (so a site's clush settings apply),
and the command line overrides them.
"""
from __future__ import annotations

import configparser
import time
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional

MAX_OUTPUT = 64 << 20          # bytes kept of one node's stdout (a node cannot fill this host's memory)
MAX_ERRORS = 64 << 10          # bytes kept of one node's stderr


@dataclass
class Reply:
    node: str
    rc: Optional[int] = None             # None: no exit code (timed out, or never started)
    stdout: bytes = b""
    stderr: bytes = b""
    timed_out: bool = False
    seconds: Optional[float] = None      # from this node's ssh start to its end (or its timeout)
    truncated: bool = False              # more output than MAX_OUTPUT: the rest was dropped


@dataclass
class Shell:
    fanout: int = 64
    timeout: float = 60.0                # per node, from its ssh start
    connect_timeout: float = 10.0
    user: Optional[str] = None
    ssh_options: Optional[str] = None
    ssh_path: Optional[str] = None
    settings: Dict[str, str] = field(default_factory=dict)   # where each setting came from, for the report

    def run(self, commands: Mapping[str, str]) -> Dict[str, Reply]:
        """Run `commands[node]` on each node; one ClusterShell worker per distinct command."""
        from ClusterShell.NodeSet import NodeSet
        from ClusterShell.Task import task_self

        task = task_self()
        task.set_default("stderr", True)
        task.set_default("stdout_msgtree", False)      # the handler keeps what it needs, bounded
        task.set_default("stderr_msgtree", False)
        task.set_info("fanout", max(1, int(self.fanout)))
        task.set_info("connect_timeout", max(1, int(round(self.connect_timeout))))
        for key, value in (("ssh_path", self.ssh_path), ("ssh_user", self.user), ("ssh_options", self.ssh_options)):
            task.set_info(key, value)
        handler = _Collector(commands)
        by_command: Dict[str, List[str]] = {}
        for node, command in commands.items():
            by_command.setdefault(command, []).append(node)
        workers = []
        for command, nodes in by_command.items():
            workers.append(task.shell(command, nodes=NodeSet.fromlist(nodes), handler=handler,
                                      timeout=self.timeout, stdin=False, tree=False))
        task.resume()
        handler.finish()
        for worker in workers:
            for node in worker.iter_keys_timeout():
                reply = handler.replies[str(node)]
                reply.timed_out = True
                reply.rc = None
                reply.seconds = self.timeout
        for reply in handler.replies.values():
            if reply.seconds is None and reply.node in handler.started:
                reply.seconds = round(time.monotonic() - handler.started[reply.node], 3)
        return handler.replies


class _Collector:
    """ClusterShell's event handler (duck-typed: the engine calls what is there): each node's output lines,
    exit code and times."""

    def __init__(self, commands: Mapping[str, str]):
        self.replies: Dict[str, Reply] = {node: Reply(node) for node in commands}
        self.out: Dict[str, List[bytes]] = {}
        self.err: Dict[str, List[bytes]] = {}
        self.size: Dict[str, int] = {}
        self.err_size: Dict[str, int] = {}
        self.started: Dict[str, float] = {}

    def ev_start(self, worker) -> None:
        pass

    def ev_pickup(self, worker, node) -> None:
        self.started[str(node)] = time.monotonic()

    def ev_read(self, worker, node, sname, msg) -> None:
        node = str(node)
        data = msg if isinstance(msg, bytes) else str(msg).encode("utf-8", "replace")
        reply = self.replies.setdefault(node, Reply(node))
        if sname == "stderr":
            kept = self.err.setdefault(node, [])
            size = self.err_size.get(node, 0) + len(data) + 1
            if size <= MAX_ERRORS:
                self.err_size[node] = size
                kept.append(data)
            return
        size = self.size.get(node, 0) + len(data) + 1
        if size > MAX_OUTPUT:
            reply.truncated = True
            return
        self.size[node] = size
        self.out.setdefault(node, []).append(data)

    def finish(self) -> None:
        for node, reply in self.replies.items():
            reply.stdout = b"\n".join(self.out.get(node, []))
            reply.stderr = b"\n".join(self.err.get(node, []))

    def ev_written(self, worker, node, sname, size) -> None:
        pass

    def ev_hup(self, worker, node, rc) -> None:
        node = str(node)
        reply = self.replies.setdefault(node, Reply(node))
        reply.rc = rc
        if node in self.started:
            reply.seconds = round(time.monotonic() - self.started[node], 3)

    def ev_close(self, worker, timedout) -> None:
        pass

    def _ev_routing(self, worker, arg) -> None:
        pass


def clush_settings() -> Dict[str, str]:
    """The [Main] settings of the clush.conf files ClusterShell reads (later files override earlier ones):
    ssh_path, ssh_user, ssh_options, fanout, connect_timeout, command_timeout. Unreadable files are skipped."""
    from ClusterShell.Defaults import config_paths
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(config_paths("clush.conf"))
    except (configparser.Error, OSError, UnicodeDecodeError):
        return {}
    if not parser.has_section("Main"):
        return {}
    keys = ("ssh_path", "ssh_user", "ssh_options", "fanout", "connect_timeout", "command_timeout")
    return {k: parser.get("Main", k) for k in keys if parser.has_option("Main", k)}


def shell_from(fanout: Optional[int] = None, timeout: Optional[float] = None,
               connect_timeout: Optional[float] = None, user: Optional[str] = None,
               ssh_options: Optional[str] = None, ssh_path: Optional[str] = None) -> Shell:
    """A Shell with clush.conf's settings under what the command line gave."""
    conf = clush_settings()
    shell = Shell()
    sources: Dict[str, str] = {}

    def pick(name: str, given, conf_key: str, convert, default):
        if given is not None:
            sources[name] = "command line"
            return given
        if conf_key in conf:
            try:
                value = convert(conf[conf_key])
            except ValueError:
                return default
            if convert is not str and value <= 0:      # clush's "0" means "none", which a fleet check cannot use
                return default
            sources[name] = "clush.conf"
            return value
        return default

    shell.fanout = pick("fanout", fanout, "fanout", int, 64)
    shell.timeout = pick("timeout", timeout, "command_timeout", float, 60.0)
    shell.connect_timeout = pick("connect_timeout", connect_timeout, "connect_timeout", float, 10.0)
    shell.user = pick("user", user, "ssh_user", str, None)
    shell.ssh_options = pick("ssh_options", ssh_options, "ssh_options", str, None)
    shell.ssh_path = pick("ssh_path", ssh_path, "ssh_path", str, None)
    shell.settings = sources
    return shell
