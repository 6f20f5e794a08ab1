"""The perftest processes a host reports (collectors/perftest_procs.py lists them, views/perftest_procs.py
reads them): only perftest's binaries, only the options that decide whether two sides meet, nothing a peer
must not learn."""
from rdmadoctor.collectors import perftest_procs as collector
from rdmadoctor.views import perftest_procs as pp


def test_a_server_is_described_by_its_binary_options_and_ports():
    e = pp.describe(["/usr/bin/ib_write_bw", "-d", "rxe0", "-s", "65536", "-p", "18520", "-q", "4"], [18520])
    assert e["tool"] == "ib_write_bw" and e["role"] == "server" and e["port"] == 18520
    assert e["options"] == {"ib-dev": "rxe0", "size": "65536", "port": "18520", "qp": "4"}
    assert e["listening"] == [18520] and e["target"] is None and e["rdma_cm"] is False


def test_a_client_keeps_its_server_address_and_defaults_to_port_18515():
    e = pp.describe(["ib_read_bw", "-d", "mlx5_0", "-R", "192.0.2.1"], [], connected=True)
    assert e["role"] == "client" and e["target"] == "192.0.2.1" and e["port"] == 18515
    assert e["rdma_cm"] is True and e["connected"] is True


def test_paths_keys_and_odd_values_never_leave():
    e = pp.describe(["ib_write_bw", "--out_json_file=/root/secret.json", "--kek_path", "/etc/k", "-d", "dev;rm -rf /",
                     "-s", "64K"])
    assert "out_json_file" not in e["options"] and "kek_path" not in e["options"]
    assert "ib-dev" not in e["options"]                     # a value outside the narrow pattern is dropped
    assert e["options"]["size"] == "64K"


def test_a_command_line_perftest_would_refuse_tells_only_the_binary():
    e = pp.describe(["ib_write_bw", "--no-such-option", "hunter2"], [18515])
    assert e["tool"] == "ib_write_bw" and e["parsed"] is False and e["options"] == {} and e["role"] is None


def test_other_programs_are_not_perftest():
    assert pp.describe(["postgres", "-D", "/var/lib/pg"]) is None
    assert pp.describe([]) is None


def test_public_drops_cmdline_pid_user_and_rechecks_what_came_from_elsewhere():
    entries = [{"tool": "ib_send_bw", "cmdline": ["ib_send_bw", "-d", "rxe0", "--out_json_file", "/x"],
                "listening": [18515], "connected": False, "pid": 42, "user": "alice"},
               {"tool": "sshd", "cmdline": ["sshd", "-D"], "listening": [22]},
               {"tool": "ib_write_bw", "role": "client",
                "options": {"size": "$(id)", "qp": "2", "payload_file_path": "x"}, "port": 70000,
                "listening": ["x", 18515], "target": "a b"}]
    out = pp.public(entries)
    assert len(out) == 2
    assert set(out[0]) == set(pp.PUBLIC_KEYS) and out[0]["options"] == {"ib-dev": "rxe0"}
    assert out[0]["listening"] == [18515] and out[0]["role"] == "server"
    assert out[1]["options"] == {"qp": "2"} and out[1]["port"] is None and out[1]["listening"] == [18515]
    assert out[1]["target"] is None
    assert pp.public(None) is None


class _Conn:
    def __init__(self, status, port):
        self.status, self.laddr = status, type("A", (), {"port": port})()


class _Proc:
    def __init__(self, pid, name, cmdline, conns):
        self.info = {"pid": pid, "name": name, "cmdline": cmdline, "username": "lab"}
        self._conns = conns

    def net_connections(self, kind):
        return self._conns

    def as_dict(self, attrs, ad_value=None):        # psutil.Process.as_dict: read only for the names asked about
        return {a: self.info.get(a, ad_value) for a in attrs}


def test_collect_reads_listening_ports_of_perftest_processes_only():
    import psutil
    procs = [_Proc(10, "ib_write_bw", ["ib_write_bw", "-d", "rxe0"], [_Conn(psutil.CONN_LISTEN, 18515)]),
             _Proc(11, "sshd", ["sshd", "-D"], [_Conn(psutil.CONN_LISTEN, 22)]),
             _Proc(12, "ib_write_bw", ["ib_write_bw", "192.0.2.1"], [_Conn(psutil.CONN_ESTABLISHED, 40000)])]
    found = collector.processes_named({*collector.TOOLS, "sshd"}, lambda attrs: procs)
    out = pp.described(collector.collect(found))
    assert [(e["role"], e["listening"], e["connected"], e["pid"]) for e in out] == \
        [("server", [18515], False, 10), ("client", [], True, 12)]
