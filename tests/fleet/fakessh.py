"""A stand-in for ssh on loopback, for ClusterShell's ssh worker in the tests: called as ClusterShell calls ssh
(`[options] -oForwardAgent=no ... -oBatchMode=yes NODE COMMAND`), it plays the node named in the plan file
($FAKESSH_PLAN, JSON) and otherwise runs COMMAND here with $FLEET_NODE set to the node's name.

Plan entries, per node (or "*" for every node not named):
  {"unreachable": true}          ssh's own failure: its message on stderr, exit 255
  {"sleep": SECONDS}             hangs (a node that does not answer in time)
  {"missing": true}              the remote shell does not find the command: exit 127
  {"stdout": TEXT, "rc": N}      prints TEXT and exits N (garbage, a banner, an old version)
  {"file": PATH, "rc": N}        prints the file (a recorded result)
  {"pairs": {ADDRESS: PATH}, "default": PATH, "rc": N}   for `check --peer ADDRESS`: the recorded result for
                                 that peer; appends "NODE ADDRESS" to $FAKESSH_LOG
Every call appends "start NODE t" and "end NODE t" to $FAKESSH_LOG when it is set.
"""
import json
import os
import re
import subprocess
import sys
import time


def log(line):
    path = os.environ.get("FAKESSH_LOG")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def main(argv):
    node, command = argv[-2], argv[-1]
    plan = {}
    if os.environ.get("FAKESSH_PLAN"):
        with open(os.environ["FAKESSH_PLAN"]) as f:
            plan = json.load(f)
    entry = plan.get(node, plan.get("*", {}))
    log(f"start {node} {time.monotonic():.3f}")
    log(f"argv {node} {json.dumps(argv[:-1])}")
    log(f"command {node} {command}")
    try:
        if entry.get("unreachable"):
            sys.stderr.write(f"ssh: connect to host {node} port 22: Connection refused\n")
            return 255
        if "sleep" in entry:
            time.sleep(entry["sleep"])
            return 0
        if entry.get("missing"):
            sys.stderr.write(f"bash: line 1: {command.split()[0]}: command not found\n")
            return 127
        if "stdout" in entry:
            sys.stdout.write(entry["stdout"])
            return entry.get("rc", 0)
        if "file" in entry:
            with open(entry["file"]) as f:
                sys.stdout.write(f.read())
            return entry.get("rc", 0)
        if "pairs" in entry:
            m = re.search(r"--peer (\S+)", command)
            address = m.group(1) if m else None
            log(f"probe {node} {address}")
            if "hold" in entry:          # how long the probe takes (occupancy checks)
                time.sleep(entry["hold"])
            path = entry["pairs"].get(address, entry.get("default"))
            with open(path) as f:
                sys.stdout.write(f.read())
            return entry.get("rc", 0)
        env = dict(os.environ, FLEET_NODE=node)
        return subprocess.run(["sh", "-c", command], env=env).returncode
    finally:
        log(f"end {node} {time.monotonic():.3f}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
