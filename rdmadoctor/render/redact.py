"""Consistent masking of what identifies a site in a result document: IP addresses, GIDs, GUIDs, MAC
addresses and host names.

    redactor = Redactor()
    masked = redactor.document(document)      # a deep copy; `document` is left as it was

The same value always becomes the same token across the whole document (and so across the whole report
rendered from it): 192.0.2.1 -> `ip-1` wherever it appears (a log line, a fact, a command line, a JSON
key), the GID ::ffff:192.0.2.1 -> `::ffff:ip-1` (an IPv4-mapped GID keeps its relation to the address),
fe80::5054:ff:fe00:101 -> `ip6-1` whether perftest printed it as 16 decimal bytes or `ibv_devinfo` as eight
hex groups, a GUID -> `guid-1` in either of its spellings, a MAC -> `mac-1`, a host name -> `host-1`.

Left as they are, because they identify nothing and a diagnosis may rest on them: loopback and
unspecified addresses (127.0.0.0/8, 0.0.0.0, ::1, ::, which is the zero GID), and "localhost".

Host names are the ones the document names as hosts (facts' host name and peer, a client's server
argument, a separator's label, a shell prompt's `user@host`) and are then masked everywhere they appear
as a word, also inside file names.
"""
from __future__ import annotations

import ipaddress
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

# A run of characters that may form an IPv6 address, a colon-separated GID, GUID or MAC.
_COLON_TOKEN = re.compile(r"(?<![\w.])[0-9A-Fa-f.]*:[0-9A-Fa-f:.]*(?![\w])")
_IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w]|\.\d)")
_GUID_0X = re.compile(r"(?<![\w])0x([0-9A-Fa-f]{16})(?![\w])")
_GUID_BARE = re.compile(r"(?<![\w:])([0-9A-Fa-f]{16})(?![\w:])")
_GUID_4X4 = re.compile(r"^[0-9A-Fa-f]{4}(?::[0-9A-Fa-f]{4}){3}$")
_MAC = re.compile(r"^[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}$")
_MAC20 = re.compile(r"^[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){19}$")     # IPoIB hardware address
_DEC_GID = re.compile(r"^\d{1,3}(?::\d{1,3}){15}$")
_HEX_GID = re.compile(r"^[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){15}$")
_PROMPT = re.compile(r"(?:^|[\s\[(])[A-Za-z_][\w.-]*@([A-Za-z0-9][A-Za-z0-9.-]*)(?=[\s:\]~#$%>)])")
_HOSTNAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9-]{1,63})*$")
_TOKEN = re.compile(r"^(?:ip|ip6|guid|mac|host)-\d+$")

# Words that are never taken for a host name, even where the document has one in a host's place.
_NOT_HOSTS = {"localhost", "server", "client", "host", "node", "peer", "local", "remote", "none", "null",
              "unknown", "root", "true", "false", "on", "off", "yes", "no"}


class Redactor:
    """One mapping for one report: call `document()` once, or `text()` on every string of the report."""

    def __init__(self, hosts: Iterable[str] = ()):
        self.tokens: Dict[Tuple[str, str], str] = {}      # (kind, canonical value) -> token
        self.counts: Dict[str, int] = {}
        self.hosts: Dict[str, str] = {}                    # lower-case host name -> token
        self._host_re: Optional[re.Pattern] = None
        for name in hosts:
            self.add_host(name)

    # -- the mapping -----------------------------------------------------------------------------------
    def token(self, kind: str, value: str) -> str:
        key = (kind, value)
        if key not in self.tokens:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            self.tokens[key] = f"{kind}-{self.counts[kind]}"
        return self.tokens[key]

    def add_host(self, name: Any) -> None:
        if not isinstance(name, str):
            return
        name = name.strip().rstrip(".")
        low = name.lower()
        if (len(name) < 2 or low in _NOT_HOSTS or low in self.hosts or _TOKEN.match(low)
                or not _HOSTNAME.match(name) or name.replace(".", "").isdigit()):
            return
        try:
            ipaddress.ip_address(name)
            return
        except ValueError:
            pass
        self.hosts[low] = self.token("host", low)
        short = low.split(".", 1)[0]
        if short != low and len(short) >= 2 and short not in _NOT_HOSTS and short not in self.hosts:
            self.hosts[short] = self.hosts[low]
        # Longest first, so "node1.example.com" wins over "node1".
        names = sorted(self.hosts, key=len, reverse=True)
        self._host_re = re.compile(r"(?<![\w-])(" + "|".join(re.escape(n) for n in names) + r")(?![\w-])",
                                   re.IGNORECASE)

    def summary(self) -> Dict[str, int]:
        """kind -> how many distinct values were masked (for the report's header)."""
        return dict(self.counts)

    # -- strings ---------------------------------------------------------------------------------------
    def text(self, text: str) -> str:
        if not text:
            return text
        if ":" in text:
            text = _COLON_TOKEN.sub(self._colon, text)
        if "." in text:
            text = _IPV4.sub(self._ipv4, text)
        if "0x" in text or "0X" in text:
            text = _GUID_0X.sub(lambda m: self.token("guid", m.group(1).lower()), text)
        if "guid" in text.lower():
            text = _GUID_BARE.sub(lambda m: self.token("guid", m.group(1).lower()), text)
        if self._host_re is not None:
            text = self._host_re.sub(lambda m: self.hosts[m.group(1).lower()], text)
        return text

    def _ipv4(self, m: "re.Match[str]") -> str:
        raw = m.group(0)
        try:
            addr = ipaddress.IPv4Address(raw)
        except ValueError:
            return raw
        return self._v4(addr)

    def _v4(self, addr: ipaddress.IPv4Address) -> str:
        if addr.is_loopback or addr.is_unspecified:
            return str(addr)
        return self.token("ip", str(addr))

    def _v6(self, addr: ipaddress.IPv6Address) -> str:
        if addr.ipv4_mapped is not None:
            return "::ffff:" + self._v4(addr.ipv4_mapped)
        if addr.is_loopback or addr.is_unspecified:
            return str(addr)
        return self.token("ip6", str(addr))

    def _colon(self, m: "re.Match[str]") -> str:
        raw = m.group(0)
        core = raw.rstrip(".")                     # "... at fe80::1." ends a sentence
        tail = raw[len(core):]
        if core.count(":") < 2:
            return self._colon_short(raw)
        addr: Optional[ipaddress.IPv6Address] = None
        try:
            addr = ipaddress.IPv6Address(core)
        except ValueError:
            if _DEC_GID.match(core):
                octets = [int(x) for x in core.split(":")]
                if all(o <= 255 for o in octets):
                    addr = ipaddress.IPv6Address(bytes(octets))
            elif _HEX_GID.match(core):
                addr = ipaddress.IPv6Address(bytes(int(x, 16) for x in core.split(":")))
        if addr is not None:
            masked = self._v6(addr)
            # An address left as it is (the zero GID, loopback) keeps its spelling too.
            return raw if masked in (str(addr), "::ffff:" + str(addr.ipv4_mapped)) else masked + tail
        if _GUID_4X4.match(core):
            return self.token("guid", core.replace(":", "").lower()) + tail
        if _MAC.match(core) or _MAC20.match(core):
            if core.strip("0:") == "":
                return raw
            return self.token("mac", core.lower()) + tail
        return self._colon_short(raw)

    def _colon_short(self, raw: str) -> str:
        # "192.0.2.1:18515" and the like: not an address as a whole, but it may hold one.
        return _IPV4.sub(self._ipv4, raw) if "." in raw else raw

    # -- documents -------------------------------------------------------------------------------------
    def learn_hosts(self, document: Any) -> None:
        """Take the host names the document names as hosts (see the module's docstring)."""
        if not isinstance(document, dict):
            return
        facts = document.get("facts")
        if isinstance(facts, dict) and isinstance(facts.get("host"), dict):
            self.add_host(facts["host"].get("hostname"))
            self.add_host(facts["host"].get("peer"))
        for run in document.get("runs") or []:
            if not isinstance(run, dict):
                continue
            command = run.get("command")
            if isinstance(command, dict):
                self.add_host(command.get("host"))
            label = run.get("label")
            if isinstance(label, str) and label.lower() not in _NOT_HOSTS and not label.isupper():
                self.add_host(label)
        for text in _strings(document):
            if "@" in text:
                for m in _PROMPT.finditer(text):
                    self.add_host(m.group(1))

    def document(self, document: Any) -> Any:
        self.learn_hosts(document)
        return self.value(document)

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {(self.text(k) if isinstance(k, str) else k): self.value(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.value(v) for v in value]
        return value


def _strings(value: Any) -> List[str]:
    out: List[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
            stack.extend(k for k in item if isinstance(k, str))
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
    return out


def redact_document(document: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, int]]:
    """A masked deep copy of `document`, and how many distinct values of each kind were masked."""
    redactor = Redactor()
    return redactor.document(document), redactor.summary()


def redact_facts(facts: Dict[str, Any]) -> Dict[str, Any]:
    """A masked deep copy of a facts document (`check --save --redact`), with the same tokens a result holding
    these facts would get."""
    return Redactor().document({"facts": facts})["facts"]
