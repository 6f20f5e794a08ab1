"""`rdmadoctor serve`: argument checks, logging, signals; the server itself is server.py."""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Optional

from rdmadoctor.probe import protocol as p
from rdmadoctor.agent.server import Agent, AgentError, Config, LOG, default_bind
from rdmadoctor.runtime.text import printable

EXIT_OK, EXIT_RUNTIME, EXIT_USAGE = 0, 3, 64


def _say(text: str) -> None:
    sys.stderr.write(f"rdmadoctor serve: {text}\n")
    sys.stderr.flush()


def resolve_bind(bind: str) -> str:
    if bind != "auto":
        import ipaddress
        try:
            return str(ipaddress.ip_address(bind))
        except ValueError:
            raise AgentError(f"--bind needs an IP address of this host, not {bind!r}")
    address, candidates = default_bind()
    if address is None:
        if candidates:
            raise AgentError("this host has several RDMA addresses (%s): choose one with --bind" % ", ".join(candidates))
        raise AgentError("no IPv4 address on an RDMA device found: give the address to listen on with --bind")
    return address


def main(bind: str = "auto", port: int = p.DEFAULT_PORT, token_file: Optional[Path] = None,
         max_clients: int = 8, ready: Optional[threading.Event] = None, allow_perftest: bool = False,
         privileged_facts: bool = False) -> int:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s rdmadoctor-agent %(message)s", "%Y-%m-%dT%H:%M:%S"))
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False
    try:
        address = resolve_bind(bind)
        token, origin = p.read_token(str(token_file) if token_file else None)
    except (AgentError, ValueError) as exc:
        _say(printable(exc))
        return EXIT_USAGE
    os.environ.pop(p.TOKEN_ENV, None)          # read once; no child of the agent inherits it
    agent = Agent(Config(bind=address, port=port, token=token, max_clients=max_clients,
                         allow_perftest=allow_perftest, privileged_facts=privileged_facts))
    try:
        host, real_port = agent.open()
    except AgentError as exc:
        _say(printable(exc))
        return EXIT_RUNTIME
    auth = f"HMAC token from {origin}" if token else "NO authentication (set --token-file or $%s)" % p.TOKEN_ENV
    _say(f"listening on {host}:{real_port} (rdma_cm listener on port {agent.rdma_port} when a probe asks); "
         f"{auth}; at most {max_clients} clients"
         + ("; perftest servers allowed for `rdmadoctor bench`" if allow_perftest else ""))
    if address in ("0.0.0.0", "::"):
        _say("warning: listening on every interface; --bind <the RDMA address> keeps the agent off other networks")
    if token is None:
        shared = ("ALL of them, root's included (firewall rules, kernel log): --share-privileged-facts"
                  if privileged_facts else "what any local user could read (no firewall rules, no kernel log)")
        _say("WARNING: NO TOKEN. Anyone who reaches %s:%d can read this host's facts (%s), hold the rdma_cm "
             "listener%s, and nothing proves to a client that it talks to this agent. Give a token with "
             "--token-file FILE (mode 600) or $%s." % (host, real_port, shared,
                                                        ", start perftest servers" if allow_perftest else "",
                                                        p.TOKEN_ENV))

    def stop(signum, frame):    # noqa: ARG001
        agent.shutdown()

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, stop)
        except ValueError:       # not the main thread (tests)
            pass
    if ready is not None:
        ready.set()
    agent.serve_forever()         # returns on SIGINT/SIGTERM, having stopped every child it started
    _say("stopped")
    return EXIT_OK
