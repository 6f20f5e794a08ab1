"""Node sets in ClusterShell's syntax (`node[001-512]`, `@gpu`, `node[1-8]!node3`): parsed and folded by
ClusterShell's own NodeSet, with its group resolver (groups.conf under /etc/clustershell,
$XDG_CONFIG_HOME/clustershell or $CLUSTERSHELL_CFGDIR), so a site's groups mean here what they mean to clush.
"""
from __future__ import annotations

from typing import Iterable, List


class NodeSetError(ValueError):
    """A node set that does not parse, or a group that does not resolve; str() says which."""


def expand(pattern: str) -> List[str]:
    """The node names of `pattern`, in ClusterShell's order (sorted by name and index)."""
    from ClusterShell.NodeSet import NodeSet, NodeSetException
    try:
        return list(NodeSet(pattern))
    except NodeSetException as exc:
        raise NodeSetError(f"{pattern!r}: {exc}") from None
    except Exception as exc:                       # noqa: BLE001 - a group source's command or file failed
        raise NodeSetError(f"{pattern!r}: {type(exc).__name__}: {exc}") from None


def fold(nodes: Iterable[str]) -> str:
    """`["n1", "n3", "n2"]` -> `n[1-3]` (as clubak prints them); "" for none."""
    from ClusterShell.NodeSet import NodeSet
    names = [n for n in nodes if n]
    if not names:
        return ""
    try:
        return str(NodeSet.fromlist(names))
    except Exception:                              # noqa: BLE001 - a name NodeSet cannot hold stays as it is
        return ",".join(sorted(set(names)))


def sort_key(node: str):
    """Names in NodeSet's order: node2 before node10."""
    import re
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", node)]
