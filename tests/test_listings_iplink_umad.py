"""The listing reader (rdmadoctor/logparse/pasted.py) on `ip link`, /sys/class/infiniband_mad and old ibstat listings,
and the facts view they give (views/factview.py: netdev_children, umad_class). The lines follow the producers'
formats: iproute2's print_linkinfo(), ls of the kernel's ib_umad class, infiniband-diags' ibstat port_dump()."""
from rdmadoctor.logparse.streams import parse_text
from rdmadoctor.views import factview

IB0 = ("4: ib0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 2044 qdisc mq state UP mode DEFAULT group default qlen 256\n"
       "    link/infiniband 80:00:00:29:fe:80:00:00:00:00:00:00:98:03:9b:03:00:6c:79:12 brd "
       "00:ff:ff:ff:ff:12:40:1b:ff:ff:00:00:00:00:00:00:ff:ff:ff:ff\n")


def _view(text):
    facts = parse_text(text).facts
    return factview.build(facts) if facts else None


def test_ip_link_child_is_compared_with_its_parent():
    view = _view("$ ip link\n" + IB0 +
                 # wrapped after "mtu", as a mail archive shows it
                 "5: ib0.8001@ib0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4092 qdisc mq\n"
                 "state UP mode DEFAULT group default qlen 256\n"
                 "    link/infiniband\n"
                 "80:00:00:2a:fe:80:00:00:00:00:00:00:98:03:9b:03:00:6c:79:12 brd\n")
    [child] = view["netdev_children"]
    assert (child["ifname"], child["parent"], child["mtu"], child["parent_mtu"]) == ("ib0.8001", "ib0", 4092, 2044)
    assert child["mtu_above_parent"] is True and child["ipoib"] is True


def test_ip_link_without_a_listed_parent_gives_no_child():
    view = _view("$ ip link\n5: ib0.8001@ib0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 4092 qdisc mq\n"
                 "    link/infiniband 80:00:00:2a:fe:80\n"
                 "7: veth1@if6: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue\n"
                 "    link/ether 0a:58:0a:f4:00:05 brd ff:ff:ff:ff:ff:ff\n")
    assert view["netdev_children"] == []


def test_ip_link_type_belongs_to_the_interface_just_before():
    view = _view("2: eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq state UP\n"
                 "    link/ether 0c:c4:7a:ff:07:ce brd ff:ff:ff:ff:ff:ff\n"
                 "3: eth0.100@eth0: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc noqueue\n")
    [child] = view["netdev_children"]
    assert child["parent_link_type"] == "ether" and child["link_type"] is None and child["ipoib"] is False


UMAD_BEFORE = ("# ls /sys/class/infiniband_mad/ -altrF\n"
               "-r--r--r--  1 root root 4096 Nov 25 12:05 abi_version\n"
               "lrwxrwxrwx  1 root root    0 Nov 25 12:05 umad0 -> ../../devices/pci0000:80/0000:80:01.1/0000:81:00.0/"
               "infiniband_mad/umad0/\n"
               "lrwxrwxrwx  1 root root    0 Nov 25 12:08 issm0 -> ../../devices/pci0000:80/0000:80:01.1/0000:81:00.0/"
               "infiniband_mad/issm0/\n")
UMAD_AFTER = ("# ls /sys/class/infiniband_mad/ -altrF\n"
              "lrwxrwxrwx  1 root root    0 Nov 25 12:29 umad0 -> ../../devices/pci0000:80/0000:80:01.1/0000:81:00.0/"
              "infiniband_mad/umad0/\n")


def test_umad_class_listings_before_and_after():
    umad = _view(UMAD_BEFORE + "\n[reboot]\n" + UMAD_AFTER)["umad_class"]
    assert umad == {"listings": 2, "umad": ["umad0"], "issm": [], "umad_without_issm": ["umad0"],
                    "issm_lost": ["issm0"]}


def test_umad_class_short_listings_split_on_a_repeated_entry():
    # two short listings whose ls command lines were not pasted: umad0 listed again starts the second
    umad = _view("abi_version  issm0  issm1  umad0  umad1\nabi_version  umad0  umad1\n")["umad_class"]
    assert umad["listings"] == 2 and umad["issm_lost"] == ["issm0", "issm1"]


def test_umad_class_one_listing_loses_nothing():
    umad = _view(UMAD_AFTER)["umad_class"]
    assert umad["issm_lost"] == [] and umad["umad_without_issm"] == ["umad0"]


OLD_IBSTAT = ("CA 'mthca0'\n\tCA type: MT25204\n\tNumber of ports: 1\n\tFirmware version: 1.2.0\n\tPort 1:\n"
              "\t\tState: Initializing\n\t\tPhysical state: LinkUp\n\t\tRate: 10\n\t\tBase lid: 0\n\t\tLMC: 0\n"
              "\t\tSM lid: 0\n\t\tCapability mask: 0x02510a68\n\t\tPort GUID: 0x0008f10403992be1\n")


def _link_layers(text):
    return [p["link_layer"] for p in _view(text)["ports"]]


def test_old_ibstat_port_without_link_layer_is_infiniband():
    # an ibstat from before 2010 (no "Link layer"), the paste going on after the block
    assert _link_layers(OLD_IBSTAT + "\nCA 'mthca1'\n") == ["InfiniBand"]


def test_ibstat_cut_before_link_layer_stays_unknown():
    # a current ibstat of a RoCE port, the paste ending before its "Link layer" line
    assert _link_layers(OLD_IBSTAT.replace("mthca0", "rocep5s0f0")) == [None]
    assert _link_layers(OLD_IBSTAT.split("\t\tCapability")[0] + "\nCA 'mthca1'\n") == [None]


def test_ibstat_listing_with_a_link_layer_is_read_as_printed():
    second = ("CA 'mlx5_1'\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n\t\tBase lid: 0\n"
              "\t\tSM lid: 0\n\t\tPort GUID: 0x0208f10403992be1\n\t\tLink layer: Ethernet\n")
    assert _link_layers(OLD_IBSTAT + second) == [None, "Ethernet"]


def test_saved_facts_of_any_shape_give_no_child_and_no_umad_class():
    """A facts file given to `check --from` is checked against the schema, which leaves the kernel section's data and a
    link's parent open: shapes no paste gives are left out, not raised on."""
    facts = {"sections": {
        "kernel": {"status": "ok", "data": {"umad_class": {"listings": [5, {"umad": "umad0", "issm": [1, None]}]}}},
        "netlink": {"status": "ok", "data": {"links": [{"ifname": "ib0", "parent": ["ib1"], "mtu": 4092},
                                                       {"ifname": "ib1", "parent": "ib1", "mtu": 2044}]}}}}
    view = factview.build(facts)
    assert view["netdev_children"] == []
    assert view["umad_class"] == {"listings": 1, "umad": [], "issm": [], "umad_without_issm": [], "issm_lost": []}
    facts["sections"]["kernel"]["data"]["umad_class"] = [1, 2]
    assert factview.build(facts)["umad_class"] is None
