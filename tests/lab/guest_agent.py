#!/usr/bin/python3
"""The lab's control agent: runs inside a lab VM, never on a real host.

It reads JSON requests, one per line, from a virtio-serial port and answers each with one JSON line.
The port is a unix socket on the host, so the lab's control plane uses no network at all: the VMs'
only NIC is the 192.0.2.0/24 wire between them. Standard library only (the guest's Python 3.11/3.13).

Requests (every one carries an "id" that the answer repeats):
  {"op": "run", "argv": [...] | "sh": "...", "timeout": s, "user": name?, "env": {...}?, "stdin": str?,
   "pty": bool?, "rlimits": {"memlock": bytes, ...}?}
      -> {"rc", "stdout", "stderr", "timed_out", "seconds"}
     With "pty": true the command runs on a pseudo-terminal (stdin, stdout and stderr all on it), so
     its output is merged and ordered exactly as a terminal shows it (stdout is line-buffered on a tty,
     block-buffered on a pipe); the merged text is in "stdout" and "stderr" is "".
     "rlimits" are set (soft and hard) before dropping to "user": e.g. a 64 KiB memlock limit.
  {"op": "spawn", same fields} -> {"handle"}          start in the background
  {"op": "peek", "handle": h} -> {"running", "stdout", "stderr", "seconds"}   output so far
  {"op": "wait", "handle": h, "timeout": s} -> as "run"   (interrupts, then kills, at the timeout)
  {"op": "kill", "handle": h} -> {"ok": true}
  {"op": "killall"} -> {"killed": n}                  every job still running
  {"op": "ping"} -> {"ok": true, "pid", "uptime"}

TCP streams (the host's ``LabVM.forward``: a loopback port on the host that reaches a guest port, e.g. sshd,
with no network between host and guest):
  {"op": "connect", "port": p} -> {"stream": s}       connect to the guest's 127.0.0.1:p
  then, unsolicited: {"stream": s, "data": base64} for every chunk the guest side sends, {"stream": s}
  (no "data") at its end of file;
  {"op": "send", "stream": s, "data": base64}         bytes to the guest side (not answered, in order)
  {"op": "close", "stream": s}                        the host side ended (not answered)
"""
import base64
import json
import os
import pty
import pwd
import resource
import signal
import socket
import subprocess
import termios
import threading
import time

OUTPUT_LIMIT = 4 * 1024 * 1024
PORT_NAME = "ctl"
RLIMITS = {"memlock": resource.RLIMIT_MEMLOCK, "nofile": resource.RLIMIT_NOFILE,
           "core": resource.RLIMIT_CORE, "as": resource.RLIMIT_AS}


class Job:
    def __init__(self, request):
        self.started = time.monotonic()
        argv = request.get("argv") or ["/bin/sh", "-c", request["sh"]]
        env = dict(os.environ)
        env.update({"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                    "LC_ALL": "C.UTF-8", "TERM": "xterm", "HOME": "/root", "USER": "root", "LOGNAME": "root"})
        limits = [(RLIMITS[name], int(value)) for name, value in (request.get("rlimits") or {}).items()]
        user = request.get("user")
        entry = pwd.getpwnam(user) if user else None
        if entry:
            env.update({"HOME": entry.pw_dir, "USER": user, "LOGNAME": user})
        env.update(request.get("env") or {})
        self.use_pty = bool(request.get("pty"))
        master = slave = None
        if self.use_pty:
            master, slave = pty.openpty()
            attrs = termios.tcgetattr(slave)
            attrs[1] &= ~termios.ONLCR  # keep "\n" as the program wrote it (no "\r\n")
            termios.tcsetattr(slave, termios.TCSANOW, attrs)

        def preexec():
            os.setsid()
            if slave is not None:
                try:
                    import fcntl
                    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
                except OSError:
                    pass
            for which, value in limits:
                resource.setrlimit(which, (value, value))
            if entry:
                os.initgroups(user, entry.pw_gid)
                os.setgid(entry.pw_gid)
                os.setuid(entry.pw_uid)

        cwd = request.get("cwd") or (entry.pw_dir if entry else "/root")
        if not os.path.isdir(cwd):
            cwd = "/"
        if self.use_pty:
            self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env,
                                         preexec_fn=preexec, cwd=cwd)
            os.close(slave)
            self.master = master
            streams = [(None, master)]
        else:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, env=env, preexec_fn=preexec, cwd=cwd)
            self.master = None
            streams = [(self.proc.stdout, None), (self.proc.stderr, None)]
        self.out, self.err = [], []
        sinks = [self.out, self.err]
        self.readers = [threading.Thread(target=self._drain, args=(stream, fd, sinks[i]), daemon=True)
                        for i, (stream, fd) in enumerate(streams)]
        for reader in self.readers:
            reader.start()
        if not self.use_pty:
            stdin = request.get("stdin")
            try:
                if stdin:
                    self.proc.stdin.write(stdin.encode())
                self.proc.stdin.close()
            except OSError:
                pass

    @staticmethod
    def _drain(stream, fd, sink):
        size = 0
        while True:
            try:
                chunk = os.read(fd, 65536) if fd is not None else stream.read1(65536)
            except OSError:  # EIO: every holder of the pty's slave side closed it
                break
            if not chunk:
                break
            if size < OUTPUT_LIMIT:
                sink.append(chunk)
            size += len(chunk)

    def kill(self):
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass

    def snapshot(self):
        return {"running": self.proc.poll() is None, "rc": self.proc.returncode,
                "seconds": round(time.monotonic() - self.started, 3),
                "stdout": b"".join(self.out).decode("utf-8", "replace"),
                "stderr": b"".join(self.err).decode("utf-8", "replace")}

    def wait(self, timeout):
        timed_out = False
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            # SIGINT first (what Ctrl-C does: perftest prints what it prints then), then SIGKILL.
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
                self.proc.wait(timeout=1)
            except (OSError, subprocess.TimeoutExpired):
                self.kill()
                self.proc.wait()
        seconds = round(time.monotonic() - self.started, 3)
        for reader in self.readers:
            reader.join(timeout=2)
        if self.master is not None:
            try:
                os.close(self.master)
            except OSError:
                pass
            self.master = None
        answer = self.snapshot()
        answer.pop("running")
        answer.update({"rc": self.proc.returncode, "timed_out": timed_out, "seconds": seconds})
        return answer


class Agent:
    def __init__(self, port):
        self.port = port
        self.write_lock = threading.Lock()
        self.jobs = {}
        self.jobs_lock = threading.Lock()
        self.next_handle = 1
        self.started = time.monotonic()
        self.streams = {}
        self.next_stream = 1

    def reply(self, message):
        data = (json.dumps(message) + "\n").encode()
        with self.write_lock:
            view = memoryview(data)
            while view:
                written = os.write(self.port, view)
                view = view[written:]

    def handle(self, request):
        rid = request.get("id")
        try:
            op = request["op"]
            if op == "ping":
                answer = {"ok": True, "pid": os.getpid(), "uptime": round(time.monotonic() - self.started, 3)}
            elif op == "run":
                answer = Job(request).wait(request.get("timeout", 60))
            elif op == "spawn":
                job = Job(request)
                with self.jobs_lock:
                    handle = self.next_handle
                    self.next_handle += 1
                    self.jobs[handle] = job
                answer = {"handle": handle}
            elif op == "peek":
                answer = self.jobs[request["handle"]].snapshot()
            elif op == "wait":
                with self.jobs_lock:
                    job = self.jobs.pop(request["handle"])
                answer = job.wait(request.get("timeout", 60))
            elif op == "kill":
                with self.jobs_lock:
                    job = self.jobs.pop(request["handle"], None)
                if job:
                    job.kill()
                    job.wait(5)
                answer = {"ok": True}
            elif op == "connect":
                conn = socket.create_connection(("127.0.0.1", int(request["port"])), timeout=10)
                conn.settimeout(None)
                with self.jobs_lock:
                    stream = self.next_stream
                    self.next_stream += 1
                    self.streams[stream] = conn
                threading.Thread(target=self.pump, args=(stream, conn), daemon=True).start()
                answer = {"stream": stream}
            elif op == "killall":
                with self.jobs_lock:
                    jobs, self.jobs = list(self.jobs.values()), {}
                for job in jobs:
                    job.kill()
                    job.wait(5)
                answer = {"killed": len(jobs)}
            else:
                answer = {"error": "unknown op %r" % op}
        except Exception as exc:  # the agent must survive any request
            answer = {"error": "%s: %s" % (type(exc).__name__, exc)}
        answer["id"] = rid
        self.reply(answer)

    def pump(self, stream, conn):
        """Guest side of a forwarded stream -> host, until end of file."""
        while True:
            try:
                chunk = conn.recv(49152)
            except OSError:
                chunk = b""
            if not chunk:
                self.reply({"stream": stream})
                self.streams.pop(stream, None)
                conn.close()
                return
            self.reply({"stream": stream, "data": base64.b64encode(chunk).decode()})

    def stream_op(self, request):
        """send/close run in the reading loop itself, so that a stream's bytes keep their order."""
        conn = self.streams.get(request.get("stream"))
        if conn is None:
            return
        try:
            if request["op"] == "send":
                conn.sendall(base64.b64decode(request["data"]))
            else:
                self.streams.pop(request.get("stream"), None)
                conn.shutdown(socket.SHUT_WR)
        except OSError:
            pass

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
                    try:
                        request = json.loads(line)
                    except ValueError:
                        continue
                    if request.get("op") in ("send", "close"):
                        self.stream_op(request)
                        continue
                    threading.Thread(target=self.handle, args=(request,), daemon=True).start()


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
