"""The programs that only list what a host has (devices, ports, GIDs, providers): they print no results and
succeed without any, so a paste of nothing but their output holds no failed run."""
from __future__ import annotations

LISTING_TOOLS = frozenset({"ibv_devinfo", "ibv_devices", "ibstat", "ibstatus", "show_gids", "ibdev2netdev", "rdma",
                           "ucx_info", "fi_info"})
