#!/usr/bin/python3
"""The lab's control agent: runs inside a lab VM, never on a real host.

It reads JSON requests, one per line, from a virtio-serial port and answers each with one JSON line.
The port is a unix socket on the host, so the lab's control plane uses no network at all: the VMs'
only NIC is the 192.0.2.0/24 wire between them. Standard library only (the guest's Python 3.11/3.13).

Requests (every one carries an "id" that the answer repeats):
  {"op": "run", "argv": [...] | "sh": "...", "timeout": s, "user": name?, "env": {...}?, "stdin": str?}
      -> {"rc", "stdout", "stderr", "timed_out", "seconds"}
  {"op": "spawn", same fields} -> {"handle"}          start in the background
  {"op": "wait", "handle": h, "timeout": s} -> as "run"   (kills the process at the timeout)
  {"op": "kill", "handle": h} -> {"ok": true}
  {"op": "ping"} -> {"ok": true}
"""
import json
import os
import pwd
import signal
import subprocess
import sys
import threading
import time

OUTPUT_LIMIT = 4 * 1024 * 1024
PORT_NAME = "ctl"


class Job:
    def __init__(self, request):
        self.started = time.monotonic()
        argv = request.get("argv") or ["/bin/sh", "-c", request["sh"]]
        env = dict(os.environ)
        env.update({"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"})
        preexec = None
        user = request.get("user")
        if user:
            entry = pwd.getpwnam(user)
            env.update({"HOME": entry.pw_dir, "USER": user, "LOGNAME": user})

            def preexec():  # drop to the user, keeping the limits the request set for it
                os.setsid()
                os.initgroups(user, entry.pw_gid)
                os.setgid(entry.pw_gid)
                os.setuid(entry.pw_uid)
        else:
            def preexec():
                os.setsid()
        env.update(request.get("env") or {})
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, env=env, preexec_fn=preexec,
                                     cwd=request.get("cwd") or "/")
        self.out, self.err = [], []
        self.readers = [threading.Thread(target=self._drain, args=(self.proc.stdout, self.out), daemon=True),
                        threading.Thread(target=self._drain, args=(self.proc.stderr, self.err), daemon=True)]
        for reader in self.readers:
            reader.start()
        stdin = request.get("stdin")
        try:
            if stdin:
                self.proc.stdin.write(stdin.encode())
            self.proc.stdin.close()
        except OSError:
            pass

    @staticmethod
    def _drain(stream, sink):
        size = 0
        for chunk in iter(lambda: stream.read1(65536), b""):
            if size < OUTPUT_LIMIT:
                sink.append(chunk)
            size += len(chunk)

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def wait(self, timeout):
        timed_out = False
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            # SIGINT first, so perftest prints what it prints on Ctrl-C, then SIGKILL.
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
                self.proc.wait(timeout=1)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
                self.proc.wait()
        for reader in self.readers:
            reader.join(timeout=2)
        return {"rc": self.proc.returncode, "timed_out": timed_out,
                "seconds": round(time.monotonic() - self.started, 3),
                "stdout": b"".join(self.out).decode("utf-8", "replace"),
                "stderr": b"".join(self.err).decode("utf-8", "replace")}


class Agent:
    def __init__(self, port):
        self.port = port
        self.write_lock = threading.Lock()
        self.jobs = {}
        self.next_handle = 1

    def reply(self, message):
        data = (json.dumps(message) + "\n").encode()
        with self.write_lock:
            os.write(self.port, data)

    def handle(self, request):
        rid = request.get("id")
        try:
            op = request["op"]
            if op == "ping":
                answer = {"ok": True}
            elif op == "run":
                answer = Job(request).wait(request.get("timeout", 60))
            elif op == "spawn":
                handle = self.next_handle
                self.next_handle += 1
                self.jobs[handle] = Job(request)
                answer = {"handle": handle}
            elif op == "wait":
                answer = self.jobs.pop(request["handle"]).wait(request.get("timeout", 60))
            elif op == "kill":
                job = self.jobs.pop(request["handle"], None)
                if job:
                    job.kill()
                    job.wait(5)
                answer = {"ok": True}
            else:
                answer = {"error": "unknown op %r" % op}
        except Exception as exc:  # the agent must survive any request
            answer = {"error": "%s: %s" % (type(exc).__name__, exc)}
        answer["id"] = rid
        self.reply(answer)

    def serve(self):
        buffer = b""
        while True:
            chunk = os.read(self.port, 65536)
            if not chunk:
                time.sleep(0.05)  # host side not connected yet
                continue
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                if line.strip():
                    threading.Thread(target=self.handle, args=(json.loads(line),), daemon=True).start()


def open_port():
    """The virtio-serial port named "ctl" (found through sysfs: there is no udev to make the symlink)."""
    for _ in range(400):
        try:
            for dev in os.listdir("/sys/class/virtio-ports"):
                with open("/sys/class/virtio-ports/%s/name" % dev) as f:
                    if f.read().strip() == PORT_NAME:
                        return os.open("/dev/" + dev, os.O_RDWR)
        except OSError:
            pass
        time.sleep(0.05)
    raise SystemExit("lab agent: no virtio-serial control port")


if __name__ == "__main__":
    port = open_port()
    print("lab-agent: ready", flush=True)
    Agent(port).serve()
