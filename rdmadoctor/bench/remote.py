"""The peer's half of a bench pair, through its agent (`rdmadoctor serve --allow-perftest`).

One agent connection per combination: the agent bounds a connection's life, and a connection that closes
(Ctrl-C here) takes its perftest server with it.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from rdmadoctor.probe import agent_client
from rdmadoctor.probe.agent_client import AgentFailure
from rdmadoctor.knowledge.perftest import DEFAULT_PORT, RunSpec

CONNECT_TIMEOUT = 5.0
CALL_TIMEOUT = 15.0


class BenchAgentError(Exception):
    """The peer's agent is unreachable, refuses perftest, or failed to start the server."""


class BenchAgentInvalid(Exception):
    """The peer's agent sent an answer that is not a valid one (wrong shape, failed its MAC): the sweep stops,
    nothing it said is used."""


def _invalid(exc: AgentFailure) -> bool:
    return exc.code in ("bad-answer", "unauthenticated")


class AgentPeer:
    def __init__(self, host: str, port: int, token: Optional[bytes] = None):
        self.host, self.port, self.token = host, port, token
        self.sessions: Dict[int, Any] = {}

    def hello(self) -> Dict[str, Any]:
        """Connect once to learn what the agent offers; refuse early when it runs no perftest."""
        session = self._open()
        try:
            hello = dict(session.hello)
            if not hello.get("perftest"):
                raise BenchAgentError(f"the agent on {self.host}:{self.port} runs no perftest: start it with "
                                      "`rdmadoctor serve --allow-perftest` on the peer")
            return hello
        finally:
            session.close()

    def facts(self, perftest_port: int = DEFAULT_PORT) -> Optional[Dict[str, Any]]:
        """The peer's facts (for the report and for explaining a shortfall), or None when it cannot give them."""
        try:
            session = self._open()
        except BenchAgentError:
            return None
        try:
            return session.call("facts", 120.0, port=perftest_port).get("facts")
        except AgentFailure as exc:
            if _invalid(exc):
                raise BenchAgentInvalid(f"the agent on {self.host}:{self.port}: {exc}")
            return None
        finally:
            session.close()

    def _open(self):
        session, outcome = agent_client.connect(self.host, self.port, CONNECT_TIMEOUT, token=self.token)
        if session is None:
            raise BenchAgentError(f"cannot reach the agent on {self.host}:{self.port}: "
                                  f"{outcome.get('detail') or outcome.get('state') or outcome}")
        try:
            session.greet(CALL_TIMEOUT)
        except AgentFailure as exc:
            session.close()
            if _invalid(exc):
                raise BenchAgentInvalid(f"the agent on {self.host}:{self.port}: {exc}")
            raise BenchAgentError(f"the agent on {self.host}:{self.port} refused: {exc}")
        return session

    def start_server(self, spec: RunSpec) -> dict:
        session = self._open()
        try:
            answer = session.call("perftest", CALL_TIMEOUT, tool=spec.tool,
                                  options={k: v for k, v in spec.options})
        except AgentFailure as exc:
            session.close()
            if _invalid(exc):
                raise BenchAgentInvalid(f"the agent on {self.host}:{self.port}: {exc}")
            raise BenchAgentError(f"the agent did not start {spec.label}: {exc}")
        self.sessions[answer["handle"]] = session
        return {"handle": answer["handle"], "port": answer["port"], "argv": answer.get("argv")}

    def wait_server(self, handle: int, wait: float) -> dict:
        session = self.sessions.pop(handle)
        try:
            answer = session.call("perftest-wait", wait + CALL_TIMEOUT, handle=handle, wait=wait)
            return {k: answer.get(k) for k in ("output", "rc", "timed_out", "seconds", "truncated")}
        except AgentFailure as exc:
            if _invalid(exc):
                raise BenchAgentInvalid(f"the agent on {self.host}:{self.port}: {exc}")
            return {"output": "", "rc": None, "timed_out": True, "error": str(exc)}
        finally:
            session.close()

    def stop_server(self, handle: int) -> None:
        session = self.sessions.pop(handle, None)
        if session is None:
            return
        try:
            session.call("perftest-stop", CALL_TIMEOUT, handle=handle)
        except AgentFailure:
            pass
        finally:
            session.close()
