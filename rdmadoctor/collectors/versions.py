"""Versions of what RDMA depends on: kernel, rdma-core, perftest, pyverbs, iproute2, OS.

Package versions come from dpkg-query or rpm; when neither knows the package, the tools' own --version.
"not installed" is a fact (null with the source saying so); a version that could not be asked is listed
as unreadable.
"""
from __future__ import annotations

import platform
import re
from typing import Any, Dict, List, Optional, Tuple

from rdmadoctor.collectors.base import CollectContext, Unavailable
from rdmadoctor.runtime.dists import installed_version

NAME = "versions"
TIMEOUT = 10.0

PACKAGES = {"rdma_core": ("rdma-core", "libibverbs1", "libibverbs"),
            "perftest": ("perftest",),
            "pyverbs": ("python3-pyverbs",),
            "providers": ("ibverbs-providers", "libibverbs-utils"),
            "iproute2": ("iproute2", "iproute"),
            "nftables": ("nftables",)}


def os_release(ctx: CollectContext) -> Dict[str, Optional[str]]:
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        text = ctx.read_text(path)
        if text is None:
            continue
        vals = {}
        for line in text.splitlines():
            k, sep, v = line.partition("=")
            if sep:
                vals[k.strip()] = v.strip().strip('"')
        return {"pretty_name": vals.get("PRETTY_NAME"), "id": vals.get("ID"),
                "version_id": vals.get("VERSION_ID")}
    return {"pretty_name": None, "id": None, "version_id": None}


def _dpkg(ctx: CollectContext, names: Tuple[str, ...]) -> Dict[str, Optional[str]]:
    res = ctx.run(["dpkg-query", "-W", "-f", "${Package}\t${Version}\t${db:Status-Status}\n", *names], timeout=5.0)
    found: Dict[str, Optional[str]] = {}
    for line in res.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[2] == "installed":
            found[parts[0].split(":")[0]] = parts[1]
    return found


def _rpm(ctx: CollectContext, names: Tuple[str, ...]) -> Dict[str, Optional[str]]:
    res = ctx.run(["rpm", "-q", "--qf", "%{NAME}\t%{VERSION}-%{RELEASE}\n", *names], timeout=5.0)
    found: Dict[str, Optional[str]] = {}
    for line in res.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 2 and "not installed" not in line:
            found[parts[0]] = parts[1]
    return found


def tool_version(ctx: CollectContext, argv: List[str], pattern: str) -> Optional[str]:
    try:
        res = ctx.run(argv, timeout=4.0)
    except Unavailable:
        return None
    m = re.search(pattern, res.stdout + "\n" + res.stderr)
    return m.group(1) if m else None


def collect(ctx: CollectContext) -> Dict[str, Any]:
    rel = ctx.read_text("/proc/sys/kernel/osrelease")
    osr = os_release(ctx)
    data: Dict[str, Any] = {"kernel": rel, "kernel_version": ctx.read_text("/proc/sys/kernel/version"),
                            "os": osr["pretty_name"], "os_id": osr["id"], "os_version_id": osr["version_id"],
                            "python": platform.python_version() if ctx.live else None,
                            "sources": {}}
    if rel is None:
        ctx.unreadable("kernel release", ctx.read("/proc/sys/kernel/osrelease")[1] or "unreadable")
    if not ctx.live:
        for key in PACKAGES:
            data[key] = None
            ctx.unreadable(f"{key} version", "not asked: reading a saved tree, not this host")
        ctx.source = "saved tree"
        return data
    pkgs, manager = _packages(ctx)
    for key, names in PACKAGES.items():
        pkg = next((n for n in names if pkgs.get(n)), None)
        data[key] = pkgs[pkg] if pkg else None
        data["sources"][key] = (f"{manager} ({pkg})" if pkg else
                                f"{manager}: {', '.join(names)} not installed" if manager else None)
    _tools(ctx, data)
    if data["pyverbs"] is None:
        _pyverbs_metadata(data)
    if manager is None:
        ctx.unreadable("package versions", "neither dpkg-query nor rpm is installed")
    ctx.source = manager or "tools"
    return data


def _packages(ctx: CollectContext) -> Tuple[Dict[str, Optional[str]], Optional[str]]:
    """Installed versions of every package named in PACKAGES, from the first package database there is."""
    all_names = tuple(n for names in PACKAGES.values() for n in names)
    for fn, label in ((_dpkg, "dpkg-query"), (_rpm, "rpm")):
        if ctx.which(label) is None:
            continue
        try:
            return fn(ctx, all_names), label
        except Unavailable as exc:
            ctx.unreadable(f"package database ({label})", str(exc))
    return {}, None


def _tools(ctx: CollectContext, data: Dict[str, Any]) -> None:
    """The tools' own versions (a source build, a container without a package database, or to cross-check)."""
    tools = {
        "ib_write_bw": tool_version(ctx, ["ib_write_bw", "--version"], r"Version:\s*([0-9][^\s]*)"),
        "rdma": tool_version(ctx, ["rdma", "-V"], r"iproute2-([^\s,]+)"),
        "nft": tool_version(ctx, ["nft", "--version"], r"nftables v([0-9][^\s]*)"),
    }
    data["tools"] = tools
    if data["perftest"] is None and tools["ib_write_bw"]:
        data["perftest"], data["sources"]["perftest"] = tools["ib_write_bw"], "ib_write_bw --version"
    data["perftest_protocol_version"] = tools["ib_write_bw"]


def _pyverbs_metadata(data: Dict[str, Any]) -> None:
    version = installed_version("pyverbs")
    if version is not None:
        data["pyverbs"] = version
        data["sources"]["pyverbs"] = "python package metadata"
