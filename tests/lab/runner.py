"""Runs one scenario of the fault matrix on a booted ``Lab`` and writes its recording.

A recording is a folder ``<pair>/<scenario>/`` with:

* ``server.log`` / ``client.log``: what each side's terminal showed, stdout and stderr merged in order
  (the programs run on a pseudo-terminal), preceded by one prompt line such as
  ``root@h1:~# ib_write_bw -d rxe0``; a side that had to be interrupted at its bound ends in ``^C``.
* ``meta.json``: scenario, fault, commands, exit codes, timeouts, durations, both hosts' kernel /
  perftest / rdma-core versions, date, the recorder's command.
* ``check-<host>.json``: what ``rdmadoctor check --save`` saw on the faulty host while the fault was in
  place, when the project's CLI has a ``check`` command (skipped silently otherwise).
"""
from __future__ import annotations

import datetime
import json
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Dict, Optional

from .scenarios import Scenario, Side
from .vm import REPO, Lab, LabError, LabVM, Result

BANNER = "Waiting for client to connect"
FACTS_TIMEOUT = 180


def check_command_available(repo: Path = REPO) -> bool:
    """True when rdmadoctor/cli.py defines a ``check`` command (the facts hook runs only then)."""
    try:
        text = (repo / "rdmadoctor" / "cli.py").read_text()
    except OSError:
        return False
    return bool(re.search(r"def\s+check\s*\(|command\(\s*(name\s*=\s*)?[\"']check[\"']", text))


def _terminal_text(side: Side, result: Optional[Result]) -> str:
    out = (result.output if result else "").replace("\r\n", "\n")
    text = side.prompt() + "\n" + out
    if text and not text.endswith("\n"):
        text += "\n"
    if result is not None and result.timed_out:
        text += "^C\n"
    return text


def _rlimits(side: Side) -> Optional[Dict[str, int]]:
    return {"memlock": side.memlock_kib * 1024} if side.memlock_kib is not None else None


def _spawn(vm: LabVM, side: Side) -> int:
    return vm.spawn(side.cmd, user=side.user, pty=True, rlimits=_rlimits(side))


def _wait_started(vm: LabVM, handle: int, timeout: float) -> Dict:
    """Until the server printed its banner or exited (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        snap = vm.peek(handle)
        if BANNER in snap["stdout"] or not snap["running"] or time.monotonic() > deadline:
            return snap
        time.sleep(0.3)


def capture_check(vm: LabVM, sc: Scenario) -> Optional[Dict]:
    """`rdmadoctor check` inside the host while the fault is in place, as the scenario's user:
    {"facts": the saved facts text, "verdict": check's JSON verdict, "exit_code", "args", "user", "rungs"}."""
    user = sc.check_user
    rlimits = {"memlock": sc.check_memlock_kib * 1024} if sc.check_memlock_kib is not None else None
    out = "/tmp/rdmadoctor-check-%s" % (user or "root")
    result = vm.run("python3 -m rdmadoctor check --json --save %s.facts.json %s > %s.json 2> %s.err; echo rc=$?"
                    % (out, sc.check_args, out, out), timeout=FACTS_TIMEOUT, env=vm.python_env(), user=user,
                    rlimits=rlimits)
    facts = vm.run("cat %s.facts.json" % out, timeout=30).stdout
    document = vm.run("cat %s.json" % out, timeout=30).stdout
    try:
        json.loads(facts)
        document = json.loads(document)
    except ValueError:
        return None
    rc = result.stdout.strip().rsplit("rc=", 1)[-1]
    return {"facts": facts.strip() + "\n", "verdict": document.get("verdict"),
            "exit_code": int(rc) if rc.isdigit() else None, "args": sc.check_args, "user": user or "root",
            "rungs": [[r.get("name"), r.get("state")] for r in document.get("rungs") or []]}


def run_scenario(lab: Lab, sc: Scenario, out_dir: Optional[Path] = None, facts: bool = True,
                 recorder: Optional[str] = None) -> Dict:
    """Resets the lab, puts the fault in place, runs both sides, writes the recording; returns meta."""
    started = time.monotonic()
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    lab.reset()
    reset_seconds = round(time.monotonic() - started, 1)
    setup_log = []
    for step in sc.setup:
        result = lab.hosts[step.host].run(step.sh, timeout=60)
        setup_log.append({"host": step.host, "sh": step.sh, "rc": result.rc, "output": result.output[-500:]})
        if not result.ok:
            raise LabError("%s: setup step failed on %s: %s\n%s" % (sc.name, step.host, step.sh, result.output))

    handles = []
    background = []
    try:
        for side in sc.background:
            vm = lab.hosts[side.host]
            handle = _spawn(vm, side)
            handles.append((vm, handle))
            snap = _wait_started(vm, handle, sc.server_start_timeout)
            background.append({"host": side.host, "command": side.cmd, "started": BANNER in snap["stdout"]})

        facts_files = {}
        check = None
        # Only where the fault lives on a host: when the two command lines disagree ("both"), the
        # hosts are healthy and their facts say nothing about it.
        check_host = sc.check_host or (sc.faulty if sc.faulty in ("h1", "h2") else None)
        if facts and check_host and check_command_available():
            check = capture_check(lab.hosts[check_host], sc)
            if check:
                facts_files["check-%s.json" % check_host] = check.pop("facts")
                check["host"] = check_host

        server_result = None
        server_handle = None
        server_start = {}
        if sc.server:
            svm = lab.hosts[sc.server.host]
            server_handle = _spawn(svm, sc.server)
            handles.append((svm, server_handle))
            snap = _wait_started(svm, server_handle, sc.server_start_timeout)
            server_start = {"banner": BANNER in snap["stdout"], "exited_early": not snap["running"],
                            "seconds": snap["seconds"]}
        cvm = lab.hosts[sc.client.host]
        client_result = cvm.run(sc.client.cmd, timeout=sc.client_timeout, user=sc.client.user, pty=True,
                                rlimits=_rlimits(sc.client))
        if sc.server:
            server_result = svm.wait(server_handle, timeout=sc.server_grace)
            handles.remove((svm, server_handle))
    finally:
        for vm, handle in handles:
            try:
                vm.kill(handle)
            except LabError:
                pass

    logs = {"client.log": _terminal_text(sc.client, client_result)}
    if sc.server:
        logs["server.log"] = _terminal_text(sc.server, server_result)

    def side_meta(side: Side, result: Optional[Result], bound: float) -> Dict:
        return {"host": side.host, "release": lab.releases[side.host], "user": side.user or "root",
                "memlock_kib": side.memlock_kib, "command": side.cmd,
                "exit_code": None if result is None else result.rc,
                "timed_out": None if result is None else result.timed_out,
                "seconds": None if result is None else result.seconds, "bound_seconds": bound}

    meta = {
        "scenario": sc.name, "description": sc.description, "pair": lab.pair_name,
        "faulty": sc.faulty, "fault": sc.fault,
        "setup": setup_log, "background": background,
        "server": side_meta(sc.server, server_result, sc.server_grace) if sc.server else None,
        "server_start": server_start,
        "client": side_meta(sc.client, client_result, sc.client_timeout),
        "bounds": {"client_timeout": sc.client_timeout, "server_grace_after_client": sc.server_grace,
                   "note": "a side still running at its bound was interrupted (SIGINT, then SIGKILL after 1 s); "
                           "its log ends in ^C"},
        "expect_explain": sc.expect_explain, "expect_check": sc.expect_check,
        "alternatives": list(sc.alternatives), "healthy": sc.healthy, "notes": sc.notes,
        "hosts": {name: dict(vm.info, address=vm.address) for name, vm in lab.hosts.items()},
        "facts": sorted(facts_files),
        "check": check,
        "date": date,
        "seconds": {"total": round(time.monotonic() - started, 1), "reset": reset_seconds},
        "recorder": recorder or " ".join(shlex.quote(a) for a in [Path(sys.executable).name] + sys.argv),
    }
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        for stale in list(out_dir.glob("*.log")) + list(out_dir.glob("check-*.json")):
            stale.unlink()
        for name, text in dict(logs, **facts_files).items():
            (out_dir / name).write_text(text)
        (out_dir / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=False) + "\n")
    meta["_logs"] = logs
    return meta
