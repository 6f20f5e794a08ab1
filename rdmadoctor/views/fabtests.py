"""Observations about runs of libfabric's test programs (fi_pingpong, the fabtests), for rules/libfabric.toml.
Registered into views/features.py (FEATURES) on import.

  fabtests_domain   the domain a fabtests command line named with -d (fi_pingpong's and the fabtests' domain hint,
                    e.g. mlx5_0 or rxe0); None without -d or without a command line
  fabtests_provider_not_asked
                    the core provider a fabtests command line named with -p (e.g. psm3 of "psm3" or "psm3;ofi_rxm")
                    when the run's log shows fi_getinfo() asking other providers and never that one: it is not in
                    this libfabric; None otherwise
"""
from __future__ import annotations

from typing import Any, Dict, Optional

from rdmadoctor.model import Run
from rdmadoctor.views import features


def _option(run: Run, flag: str) -> Optional[str]:
    """The value a fabtests command line (fi_pingpong, fi_msg_bw ...; not fi_info) gave `flag`; None without it."""
    if run.command is None or run.producer != "libfabric" or run.command.tool == "fi_info":
        return None
    value = run.command.options.get(flag)
    return str(value) if value not in (None, "", True) else None


def fabtests_domain(run: Run, ctx: Dict[str, Any]) -> Optional[str]:
    """The domain a fabtests command line (fi_pingpong, fi_msg_bw ...) named with -d; None without -d.

    util/pingpong.c pp_parse_opts() and fabtests/common/shared.c ft_parseinfo(): -d sets hints->domain_attr->name,
    so fi_getinfo() offers only that domain."""
    return _option(run, "-d")


def fabtests_provider_not_asked(run: Run, ctx: Dict[str, Any]) -> Optional[str]:
    """The core provider -p named, when the log shows fi_getinfo() failing for other providers and never naming it.

    util/pingpong.c pp_parse_opts() and fabtests/common/shared.c ft_parseinfo(): -p sets
    hints->fabric_attr->prov_name ("core" or "core;utility"). src/fabric.c fi_getinfo_() then asks only the providers
    ofi_layering_ok() lets through for that name (the core provider of that name and the utility providers, whose
    names start with "ofi_"), and logs "fi_getinfo: provider X returned -N" for each that fails: utility providers
    failing while the core provider is never named means libfabric has no provider of that name."""
    value = _option(run, "-p")
    if value is None:
        return None
    cores = [name.strip() for name in value.split(";") if name.strip() and not name.strip().startswith("ofi_")]
    if len(cores) != 1:
        return None
    asked = {str(m.fields.get("provider") or "").lower() for m in run.messages
             if m.id == "LIBFABRIC.GETINFO_PROVIDER_FAILED"}
    if not asked or cores[0].lower() in asked:
        return None
    return cores[0]


FEATURES = {f.__name__: f for f in (fabtests_domain, fabtests_provider_not_asked)}

features.FEATURES.update(FEATURES)
