"""Observations about runs of libfabric's test programs (fi_pingpong, the fabtests), for rules/libfabric.toml.
Registered into views/features.py (FEATURES) on import.

  fabtests_domain   the domain a fabtests command line named with -d (fi_pingpong's and the fabtests' domain hint,
                    e.g. mlx5_0 or rxe0); None without -d or without a command line
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from rdmadoctor.model import Run
from rdmadoctor.views import features


def fabtests_domain(run: Run, ctx: Dict[str, Any]) -> Optional[str]:
    """The domain a fabtests command line (fi_pingpong, fi_msg_bw ...) named with -d; None without -d.

    util/pingpong.c pp_parse_opts() and fabtests/common/shared.c ft_parseinfo(): -d sets hints->domain_attr->name,
    so fi_getinfo() offers only that domain."""
    if run.command is None or run.producer != "libfabric" or run.command.tool == "fi_info":
        return None
    value = run.command.options.get("-d")
    return str(value) if value not in (None, "", True) else None


FEATURES = {f.__name__: f for f in (fabtests_domain,)}

features.FEATURES.update(FEATURES)
