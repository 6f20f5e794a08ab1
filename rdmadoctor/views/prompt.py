"""What the shell prompt before a pasted perftest command says about who ran it.

`root@node1:~# ib_write_bw ...` and `[root@node1 ~]# ...` are root's prompts; `user@node1:~$ ...` another
user's. Root normally holds CAP_IPC_LOCK, which lifts RLIMIT_MEMLOCK for memory registration
(ib_umem_get() in the kernel), except in a container that drops that capability.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Optional

from rdmadoctor.model import Run
from rdmadoctor.views import bysource

_ROOT = re.compile(r"(?:^|[\s\[(])root@[\w.-]+[^#$]*#\s*$")
_USER = re.compile(r"(?:^|[\s\[(])(?!root@)[\w.-]+@[\w.-]+[^#$]*\$\s*$")


def _prefix(run: Run, ctx: Dict[str, Any]) -> Optional[str]:
    if run.command is None:
        return None
    line = bysource.line_text(ctx, run.source, run.command.line)
    if line is None:
        return None
    at = line.find(run.command.tool)
    # the prompt ends before the word that holds the tool (a path such as ./ or /opt/bin/ included)
    return re.sub(r"\S*$", "", line[:at]) if at > 0 else None


def prompt_root(run: Run, ctx) -> Optional[bool]:
    """True when the command's prompt is root's, False when it is another user's, None without a prompt."""
    prefix = _prefix(run, ctx)
    if not prefix:
        return None
    if _ROOT.search(prefix):
        return True
    if _USER.search(prefix):
        return False
    return None


FEATURES = {"prompt_root": prompt_root}
