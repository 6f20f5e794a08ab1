"""Runs a sweep: for each combination the peer's agent starts the perftest server from the same RunSpec,
this host runs the client, and both outputs are recorded with the client's numbers. The engine explains a
failed combination once (engine.diagnose.explain_combo). Every wait is bounded; Ctrl-C stops both sides."""
from __future__ import annotations

import datetime as dt
import io
import time
from typing import Any, Callable, Dict, List, Optional, Protocol

from rdmadoctor.knowledge.perftest import RunSpec, expected_seconds
from rdmadoctor.runtime.pty import PtyProcess
from rdmadoctor.bench.remote import BenchAgentError
from rdmadoctor.views.bench import BenchResult, ComboResult, metrics
from rdmadoctor.logparse.streams import parse_streams

CLIENT_GRACE = 30.0          # seconds beyond the expected run time before the client is stopped
SERVER_GRACE = 10.0          # seconds to wait for the server's output after the client ended


class PerftestPeer(Protocol):
    """The remote half: the peer's agent (`rdmadoctor serve --allow-perftest`)."""

    def start_server(self, spec: RunSpec) -> dict: ...          # {"handle", "port"}
    def wait_server(self, handle: int, wait: float) -> dict: ...  # {"output", "rc", "timed_out"}
    def stop_server(self, handle: int) -> None: ...


def run_client(argv: List[str], timeout: float) -> dict:
    """The local perftest client on a pty (its output as a terminal shows it), stopped at `timeout`."""
    process = PtyProcess(argv)
    try:
        process.wait(timeout)
    except KeyboardInterrupt:
        process.stop()
        raise
    return process.result()


def _record(spec: RunSpec, argv: List[str], server_argv: List[str], client: dict, server: dict,
            seconds: float) -> ComboResult:
    """One combination as it ran: both logs (as a user would paste them) and the client's numbers. It is ok when
    the client exited 0 in time with numbers and neither side printed an error; why a failed one failed is
    the engine's to say (engine.diagnose.explain_combo)."""
    prompt = lambda who, text, command: f"{who}$ {command}\n{text}"  # noqa: E731 - a paste as a user would make it
    client_text = prompt("client", client.get("output", ""), " ".join(argv))
    server_text = prompt("server", server.get("output", ""), " ".join(server_argv))
    parsed = parse_streams([("server.log", io.BytesIO(server_text.encode())),
                            ("client.log", io.BytesIO(client_text.encode()))])
    client_run = next((r for r in parsed.runs if r.side == "client"), None)
    numbers: Dict[str, Any] = metrics(client_run)
    errors = any(m.kind == "error" for run in parsed.runs for m in run.messages)
    ok = (client.get("rc") == 0 and not client.get("timed_out") and not errors
          and any(v is not None for v in numbers.values()))
    size = int(spec.get("size")) if spec.get("size") else None
    return ComboResult(tool=spec.tool, qp=int(spec.get("qp", 1)), size=size,
                       status="ok" if ok else "failed", seconds=round(seconds, 3), argv=argv,
                       client_log=client_text, server_log=server_text, **numbers)


def run_sweep(specs: List[RunSpec], peer: str, remote: PerftestPeer, link_rate: Optional[float] = None,
              stop_on_failure: bool = False, on_result: Optional[Callable[[ComboResult], None]] = None,
              client: Callable[[List[str], float], dict] = run_client) -> BenchResult:
    result = BenchResult(peer=peer, started=dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                         link_rate_gbps=link_rate)
    for spec in specs:
        started = time.monotonic()
        handle = None
        try:
            try:
                server = remote.start_server(spec)
            except BenchAgentError as exc:   # the agent refused or failed to start this one: record it
                combo = ComboResult(tool=spec.tool, qp=int(spec.get("qp", 1)),
                                    size=int(spec.get("size")) if spec.get("size") else None, status="failed",
                                    seconds=round(time.monotonic() - started, 3), argv=spec.argv(),
                                    verdict={"status": "unknown", "cause": "unknown", "rule": None,
                                             "summary": str(exc)})
                result.results.append(combo)
                if on_result is not None:
                    on_result(combo)
                if stop_on_failure:
                    break
                continue
            handle = server["handle"]
            argv = spec.argv(server=peer, port=int(server["port"]))
            # the command the agent ran (it chose the port), not the one asked for
            server_argv = [str(a) for a in server.get("argv") or spec.argv(port=int(server["port"]))]
            local = client(argv, expected_seconds(spec) + CLIENT_GRACE)
            remote_out = remote.wait_server(handle, SERVER_GRACE)
            handle = None
        except KeyboardInterrupt:
            result.interrupted = True
            if handle is not None:
                remote.stop_server(handle)
            break
        combo = _record(spec, argv, server_argv, local, remote_out, time.monotonic() - started)
        result.results.append(combo)
        if on_result is not None:
            on_result(combo)
        if combo.status != "ok" and stop_on_failure:
            break
    return result
