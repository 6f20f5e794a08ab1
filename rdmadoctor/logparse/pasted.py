"""The host facts a paste shows: device listings (ibv_devinfo [-v], ibstat, ibstatus, `rdma link`, `rdma system`,
show_gids, ibdev2netdev, `ip link`/`ip addr`, `ls /sys/class/infiniband_mad`) read into the facts document's form
(rdmadoctor/collectors/__init__.py), so that rules read them as they read `check`'s facts.

A paste shows part of a host. Only what it shows is filled in: a section the paste does not show is left out
(the view then says it was not read), a port whose GIDs were not listed has `gids` None (not an empty table),
a netdev whose admin state was not printed has no `admin_up`. A port listed several times (`rdma link` run again, a
listing before and after) keeps its last state in `state` and every state it was shown in, in order, in
`states_shown` (a state shown again right after itself is not repeated). Two observations about the paste's own runs
are added to each port: `named` (a run of the paste names this device: True; names only other devices:
False; names none: None) and `gid_selected` (the GID of the index the runs chose, when the paste lists it).

ibstat before infiniband-diags 1.5.5 (commit 1226619d6, 2010, "print link layer for RoCEE support") prints no
"Link layer" line: it predates RoCE, so a port it shows is InfiniBand. A port of an ibstat listing without that line
is read as InfiniBand only when no port of the listing shows one (an old ibstat, not a paste cut before the line)
and the port's block was pasted whole: State, Physical state, Base lid, SM lid and its last line, Port GUID, all
shown, and a recognised line follows the Port GUID in the same input (a paste cut after "Capability mask" or after
"Port GUID" may be a RoCE port of a current ibstat).
"""
from __future__ import annotations

import ipaddress
import re
from typing import Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

from rdmadoctor.model import Message, Run

SCHEMA = "rdmadoctor-facts/1"
# the listing lines of the catalogues (knowledge/messages/verbs.toml; perftest's V10 is the same device header)
DEVICE_HEADERS = ("V10", "VERBS.DEVINFO_HCA", "VERBS.IBSTAT_CA")
LISTING = DEVICE_HEADERS + (
    "VERBS.DEVINFO_TRANSPORT", "VERBS.DEVINFO_FW", "VERBS.DEVINFO_PORT", "VERBS.DEVINFO_PORT_STATE",
    "VERBS.DEVINFO_PHYS_STATE", "VERBS.DEVINFO_ACTIVE_MTU", "VERBS.DEVINFO_MAX_MTU", "VERBS.DEVINFO_LIDS",
    "VERBS.LINK_LAYER", "VERBS.DEVINFO_GID", "VERBS.IBSTAT_PORT", "VERBS.IBSTAT_STATE", "VERBS.IBSTAT_PHYS_STATE",
    "VERBS.IBSTAT_RATE", "VERBS.IBSTAT_LIDS", "VERBS.IBSTAT_LINK_LAYER", "VERBS.IBSTATUS_PORT",
    "VERBS.IBSTATUS_STATE", "VERBS.IBSTATUS_RATE", "VERBS.IBSTAT_PORT_GUID", "VERBS.RDMA_LINK", "VERBS.SHOW_GIDS_ROW",
    "VERBS.IBDEV2NETDEV", "VERBS.RDMA_SYSTEM_NETNS", "VERBS.IP_LINK", "VERBS.IP_LINK_TYPE", "VERBS.UMAD_CLASS_LS",
    "VERBS.UMAD_CLASS_ENTRY", "VERBS.UMAD_CLASS_NAMES")
# the lines of an ibstat port block pasted whole, as an ibstat without "Link layer" prints it (Port GUID is its last)
_IBSTAT_BLOCK = ("state", "phys_state", "lid", "sm_lid", "port_guid")
_IBSTAT_LINES = ("VERBS.IBSTAT_STATE", "VERBS.IBSTAT_PHYS_STATE", "VERBS.IBSTAT_LIDS", "VERBS.IBSTAT_PORT_GUID")

# ibv_devinfo's and ibstat's words for the port states -> the kernel's (sysfs `state`, as collectors read it)
_STATE = {"PORT_NOP": "NOP", "PORT_DOWN": "DOWN", "PORT_INIT": "INIT", "PORT_ARMED": "ARMED",
          "PORT_ACTIVE": "ACTIVE", "PORT_ACTIVE_DEFER": "ACTIVE_DEFER", "DOWN": "DOWN", "INITIALIZING": "INIT",
          "INIT": "INIT", "ARMED": "ARMED", "ACTIVE": "ACTIVE", "ACTIVE_DEFER": "ACTIVE_DEFER"}
# ... and for the physical states (sysfs `phys_state` names)
_PHYS = {"SLEEP": "Sleep", "POLLING": "Polling", "DISABLED": "Disabled",
         "PORT_CONFIGURATION_TRAINING": "PortConfigurationTraining", "LINK_UP": "LinkUp", "LINKUP": "LinkUp",
         "LINK_ERROR_RECOVERY": "LinkErrorRecovery", "LINKERRORRECOVERY": "LinkErrorRecovery",
         "PHY_TEST": "Phy Test", "PHYTEST": "Phy Test", "PORTCONFIGURATIONTRAINING": "PortConfigurationTraining"}
_LINK_LAYER = {"ib": "InfiniBand", "infiniband": "InfiniBand", "ethernet": "Ethernet"}
_ZERO_GID = ipaddress.IPv6Address("::")
# settings and options that choose a device or a GID index
_DEVICE_SETTINGS = ("NCCL_IB_HCA", "UCX_NET_DEVICES", "OMPI_MCA_btl_openib_if_include", "FI_VERBS_DEVICE_NAME")
_GID_SETTINGS = ("NCCL_IB_GID_INDEX", "UCX_IB_GID_INDEX", "FI_VERBS_GID_IDX")
_DEVICE_OPTIONS = ("-d", "--ib-dev", "--ib_dev")
_GID_OPTIONS = ("-g", "-x", "--gid-idx", "--gid-index", "--gid")
_DEVICE_NAME = re.compile(r"^[A-Za-z][\w.-]*$")


def _gid(text: str) -> Tuple[Optional[str], Optional[str]]:
    """('fe80::...', None) / ('::ffff:192.0.2.1', '192.0.2.1'); (None, None) for the zero GID or garbage."""
    try:
        addr = ipaddress.IPv6Address(text.strip())
    except ValueError:
        return None, None
    if addr == _ZERO_GID:
        return None, None
    v4 = addr.ipv4_mapped
    return (f"::ffff:{v4}", str(v4)) if v4 else (addr.compressed, None)


def _int(value: Any) -> Optional[int]:
    try:
        return int(str(value), 0)
    except (TypeError, ValueError):
        return None


class _Listing:
    """Devices and ports as the listing lines describe them, in the order they were printed."""

    def __init__(self) -> None:
        self.devices: Dict[str, Dict[str, Any]] = {}
        self.device: Optional[str] = None
        self.port: Optional[int] = None
        self.links: Dict[str, Dict[str, Any]] = {}
        self.netns_mode: Optional[str] = None
        # the interface an `ip link` line printed last: the "link/<type>" line after it gives its type
        self._last_link: Optional[str] = None
        # each listing of /sys/class/infiniband_mad, in order: the umad and issm entries it showed
        self.umad_listings: List[Dict[str, List[str]]] = []
        self._umad_open = False
        # the line that showed each port fact set through _set: (device, port, fact) -> its message
        self.shown_by: Dict[Tuple[str, int, str], Message] = {}
        self._reading: Optional[Message] = None

    def dev(self, name: str) -> Dict[str, Any]:
        if name not in self.devices:
            self.devices[name] = {"name": name, "driver": None, "transport": None, "fw_ver": None, "pci": None,
                                  "numa_node": None, "netdevs": [], "source": "paste", "ports": {}}
        return self.devices[name]

    def port_of(self, device: Optional[str] = None, port: Optional[int] = None) -> Optional[Dict[str, Any]]:
        device = device or self.device
        if device is None:
            return None
        number = port if port is not None else (self.port if device == self.device and self.port else 1)
        ports = self.dev(device)["ports"]
        if number not in ports:
            ports[number] = {"port": number, "state": None, "phys_state": None, "link_layer": None,
                             "active_mtu": None, "max_mtu": None, "lid": None, "sm_lid": None, "rate": None,
                             "rate_gbps": None, "gids": None, "netdev": None, "states_shown": []}
        return ports[number]

    def read(self, m: Message) -> None:
        reader = _READERS.get(m.id)
        if reader is not None:
            self._reading = m
            if m.id != "VERBS.IP_LINK_TYPE":
                self._last_link = None
            if not m.id.startswith("VERBS.UMAD_CLASS_"):
                self._umad_open = False     # a listing of the class ends at the next listing line of another kind
            reader(self, m.fields)

    # One reader per kind of listing line. Lines without a device or port of their own (ibv_devinfo's and
    # ibstat's indented lines) describe the device and port last printed.

    def _device_header(self, f: Dict[str, Any]) -> None:
        if f.get("device"):
            self.device, self.port = f["device"], None
            self.dev(f["device"])

    def _transport(self, f: Dict[str, Any]) -> None:
        if self.device:
            self.dev(self.device)["transport"] = f.get("ib_transport")

    def _firmware(self, f: Dict[str, Any]) -> None:
        if self.device:
            self.dev(self.device)["fw_ver"] = f.get("firmware")

    def _port_header(self, f: Dict[str, Any]) -> None:
        self.port = _int(f.get("port"))
        self.port_of()

    def _ibstatus_port_header(self, f: Dict[str, Any]) -> None:
        # ibstatus names the device on each port's header line
        self.device, self.port = f.get("device"), _int(f.get("port"))
        self.port_of()

    def _port_state(self, f: Dict[str, Any]) -> None:
        self._set("state", _STATE.get(str(f.get("port_state", "")).upper()))

    def _phys_state(self, f: Dict[str, Any]) -> None:
        self._set("phys_state", _phys(f.get("phys_state")))

    def _ibstatus_state(self, f: Dict[str, Any]) -> None:
        # ibstatus prints both states with the same line shape: `which` tells them apart
        if str(f.get("which", "")).lower() == "state":
            self._set("state", _STATE.get(str(f.get("state", "")).upper()))
        else:
            self._set("phys_state", _phys(f.get("state")))

    def _active_mtu(self, f: Dict[str, Any]) -> None:
        self._set("active_mtu", _int(f.get("mtu")))

    def _max_mtu(self, f: Dict[str, Any]) -> None:
        self._set("max_mtu", _int(f.get("mtu")))

    def _devinfo_lids(self, f: Dict[str, Any]) -> None:
        if "sm_lid" in f:
            self._set("sm_lid", _int(f.get("sm_lid")))
        if "lid" in f:
            self._set("lid", _int(f.get("lid")))

    def _ibstat_lid(self, f: Dict[str, Any]) -> None:
        self._set("sm_lid" if str(f.get("which", "")).lower() == "sm" else "lid", _int(f.get("lid")))

    def _link_layer(self, f: Dict[str, Any]) -> None:
        self._set("link_layer", _LINK_LAYER.get(str(f.get("link_layer", "")).lower()))

    def _port_guid(self, f: Dict[str, Any]) -> None:
        # only noted as shown (the block reached its last line): no rule reads the GUID itself
        p = self.port_of()
        if p is not None and self.device is not None and self._reading is not None and f.get("port_guid"):
            self.shown_by[(self.device, p["port"], "port_guid")] = self._reading

    def _rate(self, f: Dict[str, Any]) -> None:
        rate = f.get("rate")
        try:
            gbps = float(rate)  # type: ignore[arg-type]  # None: TypeError, below
        except (TypeError, ValueError):
            gbps = None
        self._set("rate", f"{rate} Gb/sec" if rate else None)
        self._set("rate_gbps", gbps)

    def _devinfo_gid(self, f: Dict[str, Any]) -> None:
        gid, v4 = _gid(str(f.get("gid", "")))
        if gid is not None:
            kind = {"roce v1": "IB/RoCE v1"}.get(str(f.get("gid_type", "")).lower(), f.get("gid_type"))
            self._gid(self.port_of(), _int(f.get("gid_index")), gid, v4, kind, None)

    def _rdma_link(self, f: Dict[str, Any]) -> None:
        p = self.port_of(f.get("device"), _int(f.get("port")))
        if p is not None:
            self._put(p, "state", _STATE.get(str(f.get("port_state", "")).upper()))
            p["phys_state"] = _phys(f.get("phys_state")) or p["phys_state"]
            if f.get("netdev"):
                self._netdev(f["device"], p, f["netdev"])

    def _show_gids_row(self, f: Dict[str, Any]) -> None:
        p = self.port_of(f.get("device"), _int(f.get("port")))
        gid, v4 = _gid(str(f.get("gid", "")))
        if p is not None and gid is not None:
            version = str(f.get("roce_version", "")).lower()
            kind = {"v1": "IB/RoCE v1", "v2": "RoCE v2"}.get(version)
            self._gid(p, _int(f.get("gid_index")), gid, v4 or f.get("ipv4"), kind, f.get("netdev"))
            if f.get("netdev"):
                self._netdev(f["device"], p, f["netdev"])

    def _ibdev2netdev(self, f: Dict[str, Any]) -> None:
        p = self.port_of(f.get("device"), _int(f.get("port")))
        if p is not None and f.get("netdev"):
            self._netdev(f.get("device") or self.device, p, f["netdev"])
            # ibdev2netdev prints the netdev's carrier: "Down" when it has none or the netdev is down (its
            # carrier file cannot be read then)
            state = str(f.get("link_state", "")).strip().upper()
            if state in ("UP", "DOWN"):
                self.links[f["netdev"]] = {"ifname": f["netdev"], "operstate": state}
            if f.get("port_state"):
                self._put(p, "state", _STATE.get(str(f["port_state"]).upper()))

    def _netns_mode(self, f: Dict[str, Any]) -> None:
        self.netns_mode = f.get("netns_mode")

    def _ip_link(self, f: Dict[str, Any]) -> None:
        name = f.get("netdev")
        if not name:
            return
        link = self.links.setdefault(name, {"ifname": name})
        flags = [w for w in str(f.get("flags") or "").split(",") if w]
        link["mtu"] = _int(f.get("mtu"))
        link["admin_up"] = "UP" in flags
        # "@NONE" and "@if12" (a peer in another namespace) name no interface of this listing
        parent = f.get("parent")
        if parent and parent != "NONE" and not re.fullmatch(r"if\d+", parent):
            link["parent"] = parent
        self._last_link = name

    def _ip_link_type(self, f: Dict[str, Any]) -> None:
        if self._last_link is not None and f.get("link_type"):
            self.links[self._last_link]["link_type"] = f["link_type"]
        self._last_link = None

    def _umad_ls(self, f: Dict[str, Any]) -> None:
        self.umad_listings.append({"umad": [], "issm": []})
        self._umad_open = True

    def _umad_entry(self, f: Dict[str, Any]) -> None:
        self._umad_names([f"{f.get('entry')}{f.get('number')}"])

    def _umad_short(self, f: Dict[str, Any]) -> None:
        self._umad_names(re.findall(r"(?:umad|issm)\d+", str(f.get("names") or "")))

    def _umad_names(self, names: List[str]) -> None:
        """Adds a listing's entries; without the ls command line, an entry already listed starts the next listing
        (a second ls whose command line was not pasted)."""
        current = self.umad_listings[-1] if self.umad_listings and self._umad_open else None
        if current is None or any(n in current[n[:4]] for n in names):
            current = {"umad": [], "issm": []}
            self.umad_listings.append(current)
        self._umad_open = True
        for n in names:
            current[n[:4]].append(n)

    def _set(self, name: str, value: Any) -> None:
        p = self.port_of()
        if p is not None and value is not None:
            self._put(p, name, value)
            if self.device is not None and self._reading is not None:
                self.shown_by[(self.device, p["port"], name)] = self._reading

    @staticmethod
    def _put(p: Dict[str, Any], name: str, value: Any) -> None:
        """Sets a port's fact (a value not shown leaves it). A state is also added to the states the port was shown
        in: the facts keep the last one, and a port listed DOWN, then ACTIVE again, would otherwise look healthy."""
        if value is None:
            return
        p[name] = value
        if name == "state" and p["states_shown"][-1:] != [value]:
            p["states_shown"].append(value)

    @staticmethod
    def _gid(p: Optional[Dict[str, Any]], index: Optional[int], gid: str, v4: Optional[str], kind: Optional[str],
             netdev: Optional[str]) -> None:
        if p is None or index is None:
            return
        gids = p["gids"] if p["gids"] is not None else []
        entry = {"index": index, "gid": gid, "type": kind, "netdev": netdev}
        if v4:
            entry["ipv4"] = v4
        p["gids"] = [g for g in gids if g["index"] != index] + [entry]

    def _netdev(self, device: Optional[str], p: Dict[str, Any], netdev: str) -> None:
        p["netdev"] = netdev
        if device:
            netdevs = self.dev(device)["netdevs"]
            if netdev not in netdevs:
                netdevs.append(netdev)


# each listing line's reader (the catalogue ids of knowledge/messages/verbs.toml)
_READERS: Dict[str, Callable[[_Listing, Dict[str, Any]], None]] = {
    **{mid: _Listing._device_header for mid in DEVICE_HEADERS},
    "VERBS.DEVINFO_TRANSPORT": _Listing._transport,
    "VERBS.DEVINFO_FW": _Listing._firmware,
    "VERBS.DEVINFO_PORT": _Listing._port_header,
    "VERBS.IBSTAT_PORT": _Listing._port_header,
    "VERBS.IBSTATUS_PORT": _Listing._ibstatus_port_header,
    "VERBS.DEVINFO_PORT_STATE": _Listing._port_state,
    "VERBS.IBSTAT_STATE": _Listing._port_state,
    "VERBS.DEVINFO_PHYS_STATE": _Listing._phys_state,
    "VERBS.IBSTAT_PHYS_STATE": _Listing._phys_state,
    "VERBS.IBSTATUS_STATE": _Listing._ibstatus_state,
    "VERBS.DEVINFO_ACTIVE_MTU": _Listing._active_mtu,
    "VERBS.DEVINFO_MAX_MTU": _Listing._max_mtu,
    "VERBS.DEVINFO_LIDS": _Listing._devinfo_lids,
    "VERBS.IBSTAT_LIDS": _Listing._ibstat_lid,
    "VERBS.LINK_LAYER": _Listing._link_layer,
    "VERBS.IBSTAT_LINK_LAYER": _Listing._link_layer,
    "VERBS.IBSTAT_RATE": _Listing._rate,
    "VERBS.IBSTAT_PORT_GUID": _Listing._port_guid,
    "VERBS.IBSTATUS_RATE": _Listing._rate,
    "VERBS.DEVINFO_GID": _Listing._devinfo_gid,
    "VERBS.RDMA_LINK": _Listing._rdma_link,
    "VERBS.SHOW_GIDS_ROW": _Listing._show_gids_row,
    "VERBS.IBDEV2NETDEV": _Listing._ibdev2netdev,
    "VERBS.RDMA_SYSTEM_NETNS": _Listing._netns_mode,
    "VERBS.IP_LINK": _Listing._ip_link,
    "VERBS.IP_LINK_TYPE": _Listing._ip_link_type,
    "VERBS.UMAD_CLASS_LS": _Listing._umad_ls,
    "VERBS.UMAD_CLASS_ENTRY": _Listing._umad_entry,
    "VERBS.UMAD_CLASS_NAMES": _Listing._umad_short,
}


def _phys(value: Any) -> Optional[str]:
    if not value:
        return None
    key = re.sub(r"[\s-]+", "_", str(value).strip()).upper()
    return _PHYS.get(key) or _PHYS.get(key.replace("_", "")) or str(value).strip()


def _ordered(runs: Iterable[Run], sources: List[str]) -> List[Message]:
    order = {name: i for i, name in enumerate(sources)}
    messages = [m for r in runs for m in r.messages if m.id in LISTING]
    return sorted(messages, key=lambda m: (order.get(m.source, len(order)), m.line))


def _words(value: str) -> List[str]:
    """A device-selection setting's device names: "mlx5_0:1,mlx5_1" -> ['mlx5_0', 'mlx5_1']; "^mlx5_3" names none."""
    if value.startswith("^") or value.lower() in ("all", ""):
        return []
    out = []
    for part in re.split(r"[,\s]+", value.strip("=")):
        name = part.split(":")[0]
        if _DEVICE_NAME.match(name):
            out.append(name)
    return out


def _perftest_field(run: Run, header: str, option: str) -> Optional[str]:
    """What a perftest run printed in its header box, else what its command line asked for."""
    shown = run.header.get(header)
    if shown is not None and shown.value:
        return str(shown.value).split("[")[0]
    asked = run.command.options.get(option) if run.command is not None else None
    return str(asked) if isinstance(asked, str) else None


def _devices_asked(run: Run) -> Set[str]:
    """The devices a run's command line or its device-selection settings chose."""
    named: Set[str] = set()
    if run.producer == "perftest":
        value = _perftest_field(run, "device", "ib-dev")
        if value:
            named.add(value)
    if run.command is not None:
        for option in _DEVICE_OPTIONS:
            value = run.command.options.get(option)
            if isinstance(value, str) and _DEVICE_NAME.match(value):
                named.add(value)
    for name in _DEVICE_SETTINGS:
        shown = run.settings.get(name)
        if shown is not None:
            named.update(_words(shown.value))
    return named


def _devices_complained_about(run: Run) -> Set[str]:
    """The devices a run's errors and warnings name (a listing line only shows a device, it does not choose it)."""
    return {m.fields["device"] for m in run.messages
            if m.kind != "notice" and isinstance(m.fields.get("device"), str) and m.id not in LISTING
            and _DEVICE_NAME.match(m.fields["device"])}


def named_devices(runs: Iterable[Run]) -> Set[str]:
    """The RDMA devices the paste's runs chose or complained about (not the ones a listing merely shows)."""
    named: Set[str] = set()
    for run in runs:
        named |= _devices_asked(run)
        named |= _devices_complained_about(run)
    return named


def selected_gid_indexes(runs: Iterable[Run]) -> Set[int]:
    """The GID indexes the paste's runs chose (perftest -x / its header, ibv_*_pingpong -g, NCCL/UCX settings)."""
    chosen: Set[int] = set()
    for run in runs:
        if run.producer == "perftest":
            value = _int(_perftest_field(run, "gid_index", "gid-index"))
            if value is not None:
                chosen.add(value)
        elif run.command is not None:
            for option in _GID_OPTIONS:
                number = _int(run.command.options.get(option))
                if number is not None and number >= 0:
                    chosen.add(number)
        for name in _GID_SETTINGS:
            shown = run.settings.get(name)
            number = _int(shown.value) if shown is not None else None
            if number is not None and number >= 0:
                chosen.add(number)
    return chosen


def _listing(runs: Iterable[Run], sources: List[str]) -> Optional[_Listing]:
    """The devices and ports the input's listing lines show (None when it shows none)."""
    runs = list(runs)       # read twice: the listing lines, then where each input's last line is
    messages = _ordered(runs, sources)
    if not messages:
        return None
    listing = _Listing()
    for m in messages:
        listing.read(m)
    for dev in listing.devices.values():
        for p in dev["ports"].values():
            if p["link_layer"] is None and any(g.get("ipv4") for g in p["gids"] or []):
                p["link_layer"] = "Ethernet"        # IPv4-mapped GIDs exist only on RoCE ports
    _old_ibstat_ports(listing, runs)
    return listing


def _old_ibstat_ports(listing: _Listing, runs: Iterable[Run]) -> None:
    """The ports of an ibstat that prints no "Link layer" (before 2010, see the module's text) are InfiniBand. An
    ibstat port is one whose state an ibstat line showed (its "CA '<name>'" header is shared with perftest's)."""
    ports = [(name, p) for name, dev in listing.devices.items() for p in dev["ports"].values()
             if getattr(listing.shown_by.get((name, p["port"], "state")), "id", None) == "VERBS.IBSTAT_STATE"]
    if not ports or any(p["link_layer"] is not None for _, p in ports):
        return
    last_line: Dict[str, int] = {}
    for run in runs:
        for m in run.messages:
            last_line[m.source] = max(last_line.get(m.source, 0), m.line)
    for name, p in ports:
        shown = [listing.shown_by.get((name, p["port"], fact)) for fact in _IBSTAT_BLOCK]
        guid = shown[-1]
        whole = all(m is not None and m.id in _IBSTAT_LINES for m in shown)
        if whole and guid is not None and last_line.get(guid.source, 0) > guid.line:
            p["link_layer"] = "InfiniBand"


def listed_ports(runs: Iterable[Run], sources: List[str]) -> List[Tuple[str, Dict[str, Any], Dict[str, Message]]]:
    """Each port the input's listings show, device by device: (device, the port's facts as the listing lines give them,
    before facts_of adds what the runs chose, and the line that showed each fact read from a line of its own, such as
    "lid" or "link_layer")."""
    listing = _listing(runs, sources)
    if listing is None:
        return []
    return [(name, port, {fact: m for (d, n, fact), m in listing.shown_by.items() if d == name and n == number})
            for name, dev in listing.devices.items() for number, port in sorted(dev["ports"].items())]


def facts_of(runs: List[Run], sources: List[str]) -> Optional[Dict[str, Any]]:
    """The facts document of what the paste shows, or None when it shows no listing."""
    listing = _listing(runs, sources)
    if listing is None:
        return None
    named = named_devices(runs)
    chosen = selected_gid_indexes(runs)
    devices = []
    for dev in listing.devices.values():
        ports = [dev["ports"][n] for n in sorted(dev["ports"])]
        for p in ports:
            p["named"] = (dev["name"] in named) if named else None
            picked = [g for g in p["gids"] or [] if g["index"] in chosen] if len(chosen) == 1 else []
            p["gid_selected"] = picked[0] if picked else None
        devices.append({**dev, "ports": ports})
    sections: Dict[str, Any] = {}
    if devices:
        sections["devices"] = {"status": "partial", "source": "paste", "reason": "only what the paste shows",
                               "data": {"devices": devices, "rdma_subsystem": True}}
    kernel: Dict[str, Any] = {}
    if listing.netns_mode:
        kernel["rdma_netns_mode"] = listing.netns_mode
    if listing.umad_listings:
        kernel["umad_class"] = {"listings": listing.umad_listings}
    if kernel:
        sections["kernel"] = {"status": "partial", "source": "paste", "reason": "only what the paste shows",
                              "data": kernel}
    if listing.links:
        sections["netlink"] = {"status": "partial", "source": "paste", "reason": "only what the paste shows",
                               "data": {"links": list(listing.links.values())}}
    if not sections:
        return None
    return {"schema": SCHEMA, "host": {"pasted": True}, "sections": sections}
