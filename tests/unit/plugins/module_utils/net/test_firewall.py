"""Unit tests for the firewall rule model and its backend forms (plugins/module_utils/net/firewall.py)."""

import ipaddress
import os
import re
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.raygate.cluster.plugins.module_utils.net import firewall as fw
from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp

PLAN = pp.build_plan({}, 0)
KNOWN = [e["name"] for e in pp.firewall_ports(PLAN, "head")]
HEAD = pp.firewall_ports(PLAN, "head")
WORKER = pp.firewall_ports(PLAN, "worker")
WORKER_PORTS = "8076, 8077, 8266, 8267, 8268, 8269, 10002-10999"
HEAD_PORTS = "6379, 8076, 8077, 8265, 8266, 8267, 8268, 8269, 8270, 8271, 10001, 10002-10999"
NODES = ["198.18.0.11", "198.18.0.12", "198.18.0.13"]


def desired(role="worker", sources=None, admin=(), admin_ports=("dashboard",), allow_any=False, ports=None):
    ports = ports if ports is not None else (HEAD if role == "head" else WORKER)
    sources = NODES if sources is None else sources
    return fw.build_desired(ports, list(sources), list(admin), list(admin_ports), KNOWN, allow_any)


# -- sources --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, network",
    [
        ("198.18.0.12", "198.18.0.12/32"),
        (" 198.18.0.0/24 ", "198.18.0.0/24"),
        ("2001:db8::1", "2001:db8::1/128"),
        ("2001:DB8:0:0::/64", "2001:db8::/64"),
        ("10.0.0.0/8", "10.0.0.0/8"),
    ],
)
def test_parse_source_normalises_without_warning(value, network):
    net, warning = fw.parse_source(value)
    assert str(net) == network
    assert warning is None


def test_host_bits_are_cleared_with_a_warning_naming_both_forms():
    net, warning = fw.parse_source("198.18.0.5/24")
    assert str(net) == "198.18.0.0/24"
    assert "198.18.0.5/24" in warning and "198.18.0.0/24" in warning


@pytest.mark.parametrize("value", ["", "   ", "198.18.0.300", "10.0.0.0/33", "node1", "2001:db8::/129", None, 42])
def test_unparsable_source_fails_naming_the_value_and_option(value):
    with pytest.raises(fw.FirewallError) as exc:
        fw.parse_source(value, "admin_sources")
    assert "admin_sources" in str(exc.value)
    assert repr(value) in str(exc.value)


def test_sources_are_deduplicated_sorted_and_subsumed_ones_dropped():
    nets, warnings = fw.parse_sources(["2001:db8::5", "198.18.0.12", "198.18.0.0/24", "10.0.0.1", "10.0.0.1/32"])
    assert fw.net_text(nets) == ["10.0.0.1/32", "198.18.0.0/24", "2001:db8::5/128"]
    assert warnings == []


def test_adjacent_networks_are_kept_as_written():
    nets, _unused = fw.parse_sources(["10.0.0.128/25", "10.0.0.0/25"])
    assert fw.net_text(nets) == ["10.0.0.0/25", "10.0.0.128/25"]


@pytest.mark.parametrize("value", ["0.0.0.0/0", "::/0", "1.2.3.4/0"])
def test_a_slash_zero_source_needs_allow_any_source(value):
    with pytest.raises(fw.FirewallError, match="allow_any_source"):
        fw.parse_sources([value])
    nets, _unused = fw.parse_sources([value], allow_any=True)
    assert nets[0].prefixlen == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2**32 - 1), st.integers(8, 32)), max_size=12))
def test_reduced_sources_cover_the_same_addresses_without_overlap(pairs):
    nets = [ipaddress.ip_network((addr, plen), strict=False) for addr, plen in pairs]
    kept = fw.reduce_networks(nets)
    # nft interval sets and firewalld hash:net ipsets both refuse overlapping entries.
    for i, a in enumerate(kept):
        for b in kept[i + 1 :]:
            assert not a.overlaps(b)
    for net in nets:
        assert any(net.subnet_of(k) for k in kept)
    assert set(kept) <= set(nets)


# -- the model ------------------------------------------------------------------------------
def test_empty_sources_are_refused_with_a_message_naming_both_ways_out():
    with pytest.raises(fw.FirewallError) as exc:
        desired(sources=[])
    msg = str(exc.value)
    assert "refusing to open the Ray ports to nobody" in msg
    assert "everybody" in msg and "allow_any_source" in msg and "sources" in msg


def test_allow_any_source_opens_to_both_families_and_warns():
    d = desired(sources=[], allow_any=True)
    assert fw.net_text(d["cluster"]) == ["0.0.0.0/0", "::/0"]
    assert any("allow_any_source" in w and "0.0.0.0/0" in w for w in d["warnings"])


def test_unknown_admin_port_fails_listing_the_valid_names():
    with pytest.raises(fw.FirewallError) as exc:
        desired(admin=["192.0.2.10"], admin_ports=["dashbaord"])
    assert "dashbaord" in str(exc.value)
    for name in ("dashboard", "gcs", "worker", "client_server"):
        assert name in str(exc.value)


def test_admin_ports_not_on_this_role_are_ignored():
    d = desired("worker", admin=["192.0.2.10"], admin_ports=["dashboard", "gcs"])
    assert d["admin_ports"] == []
    assert d["admin_effective"] == []
    assert "admin4" not in fw.nft_ruleset(d)[0]


def test_admin_sources_already_in_the_cluster_need_no_rule_of_their_own():
    d = desired("head", sources=["198.18.0.0/24"], admin=["198.18.0.7", "192.0.2.10"])
    assert fw.net_text(d["admin"]) == ["192.0.2.10/32", "198.18.0.7/32"]
    assert fw.net_text(d["admin_effective"]) == ["192.0.2.10/32"]


def test_neutral_rules_give_each_port_its_sources():
    d = desired("head", sources=["198.18.0.0/24"], admin=["192.0.2.10"])
    rules = {r["port"]: r for r in fw.neutral_rules(d)}
    assert list(rules) == HEAD_PORTS.split(", ")
    assert rules["8265"] == {"port": "8265", "proto": "tcp", "sources": ["192.0.2.10/32", "198.18.0.0/24"]}
    assert rules["6379"]["sources"] == ["198.18.0.0/24"]
    assert rules["10002-10999"]["sources"] == ["198.18.0.0/24"]


def test_a_plan_entry_covering_ssh_is_refused():
    ports = [{"name": "gcs", "port": "6379", "proto": "tcp"}, {"name": "worker", "port": "20-30", "proto": "tcp"}]
    with pytest.raises(fw.FirewallError, match="SSH port 22"):
        fw.build_desired(ports, NODES)
    with pytest.raises(fw.FirewallError, match="SSH"):
        fw.check_no_ssh([{"name": "gcs", "port": "22", "proto": "tcp"}])
    fw.check_no_ssh(HEAD)  # the default plan is fine


# -- nftables -------------------------------------------------------------------------------
def rule_lines(text):
    body = text.split("chain input {", 1)[1]
    return [line.strip() for line in body.splitlines() if line.strip() and line.strip() not in ("}",)]


def test_nft_ruleset_is_one_transaction_replacing_only_our_table():
    text, digest = fw.nft_ruleset(desired())
    lines = text.splitlines()
    assert lines[2:5] == ["table inet raygate {}", "delete table inet raygate", "table inet raygate {"]
    assert "flush" not in text and "destroy" not in text
    assert "type filter hook input priority filter; policy accept;" in text
    assert re.fullmatch(r"[0-9a-f]{16}", digest)


def test_nft_rules_are_in_the_safe_order_with_the_comment_last():
    text, digest = fw.nft_ruleset(desired("head", admin=["192.0.2.10"]), deny_action="reject")
    assert rule_lines(text) == [
        "type filter hook input priority filter; policy accept;",
        'ct state established,related accept comment "raygate:%s"' % digest,
        'iif "lo" accept',
        "ip saddr @cluster4 tcp dport { %s } accept" % HEAD_PORTS,
        "ip6 saddr @cluster6 tcp dport { %s } accept" % HEAD_PORTS,
        "ip saddr @admin4 tcp dport { 8265 } accept",
        "ip6 saddr @admin6 tcp dport { 8265 } accept",
        "tcp dport { %s } reject with tcp reset" % HEAD_PORTS,
    ]


def test_nft_sets_hold_the_sources_and_empty_sets_have_no_elements_line():
    text, _unused = fw.nft_ruleset(desired(sources=NODES + ["2001:db8::/64"]))
    assert "elements = { 198.18.0.11/32, 198.18.0.12/32, 198.18.0.13/32 }" in text
    assert "elements = { 2001:db8::/64 }" in text
    text, _unused = fw.nft_ruleset(desired())
    cluster6 = text.split("set cluster6 {", 1)[1].split("}", 1)[0]
    assert "type ipv6_addr" in cluster6 and "flags interval" in cluster6 and "elements" not in cluster6
    assert text.rstrip().endswith("tcp dport { %s } drop\n\t}\n}" % WORKER_PORTS)


def test_nft_digest_changes_with_every_input_and_only_then():
    base = fw.nft_ruleset(desired())[1]
    assert fw.nft_ruleset(desired())[1] == base
    assert fw.nft_ruleset(desired(sources=NODES[:2]))[1] != base
    assert fw.nft_ruleset(desired(), deny_action="reject")[1] != base
    assert fw.nft_ruleset(desired(), table="raygate_b")[1] != base
    assert fw.nft_ruleset(desired("head"))[1] != base


def test_nft_table_matches_only_its_own_digest():
    text, digest = fw.nft_ruleset(desired())
    listing = "table inet raygate {\n\tchain input {\n\t\tct state established,related accept %s\n" % (
        fw.nft_marker(digest)
    )
    assert 'comment "raygate:%s"' % digest in listing
    assert fw.nft_table_matches(listing, digest)
    assert not fw.nft_table_matches(listing.replace(digest, "0" * 16), digest)
    assert not fw.nft_table_matches("", digest)
    assert fw.nft_missing_table("Error: No such file or directory\nlist table inet raygate\n")
    assert not fw.nft_missing_table("Error: Operation not permitted")


@pytest.mark.parametrize("table", ["", "ray gate", "1abc", "a;b", "x" * 65, None])
def test_bad_table_names_are_refused(table):
    with pytest.raises(fw.FirewallError, match="table"):
        fw.check_table_name(table)


def test_deny_action_is_checked():
    with pytest.raises(fw.FirewallError, match="deny_action"):
        fw.render_nft(desired(), deny_action="accept")


NEEDS_NETNS = pytest.mark.skipif(
    os.geteuid() != 0 or not shutil.which("nft") or not shutil.which("unshare"),
    reason="needs root, nft and unshare (loads the ruleset in a throwaway network namespace only)",
)


@NEEDS_NETNS
@pytest.mark.parametrize("deny_action", ["drop", "reject"])
def test_rendered_ruleset_loads_twice_in_a_throwaway_network_namespace(tmp_path, deny_action):
    d = desired("head", sources=NODES + ["2001:db8::/64"], admin=["192.0.2.10", "2001:db8:2::/48"])
    text, digest = fw.nft_ruleset(d, deny_action=deny_action)
    path = tmp_path / "firewall.nft"
    path.write_text(text)
    # Never the root namespace: unshare --net gives this command a namespace of its own.
    # Loaded twice: the second load proves the file replaces an existing table.
    script = 'nft -f "$1" && nft -f "$1" && nft list table inet raygate'
    proc = subprocess.run(
        ["unshare", "--net", "sh", "-c", script, "sh", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert fw.nft_table_matches(proc.stdout, digest)
    assert proc.stdout.index("established,related") < proc.stdout.index("dport")
    assert "198.18.0.11" in proc.stdout and "2001:db8::/64" in proc.stdout and "192.0.2.10" in proc.stdout


@NEEDS_NETNS
def test_allow_any_source_ruleset_validates_in_a_throwaway_network_namespace(tmp_path):
    text, _unused = fw.nft_ruleset(desired("worker", sources=[], allow_any=True))
    path = tmp_path / "firewall.nft"
    path.write_text(text)
    args = ["unshare", "--net", "nft", "-c", "-f", str(path)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr


# -- firewalld ------------------------------------------------------------------------------
def test_firewalld_ipsets_hold_families_with_entries_only():
    d = desired("head", sources=NODES + ["2001:db8::/64"], admin=["192.0.2.10"])
    assert fw.firewalld_ipsets(d) == {
        "raygate4": ["198.18.0.11/32", "198.18.0.12/32", "198.18.0.13/32"],
        "raygate6": ["2001:db8::/64"],
        "raygate-admin4": ["192.0.2.10/32"],
    }


def test_firewalld_any_source_is_split_into_halves():
    d = desired(sources=[], allow_any=True)
    assert fw.firewalld_ipsets(d) == {"raygate4": ["0.0.0.0/1", "128.0.0.0/1"], "raygate6": ["::/1", "8000::/1"]}


def test_firewalld_rich_rules_reference_our_ipsets_per_port():
    d = desired("head", admin=["192.0.2.10"])
    rules = fw.firewalld_rich_rules(d)
    assert rules[0] == 'rule family="ipv4" source ipset="raygate4" port port="6379" protocol="tcp" accept'
    assert 'rule family="ipv4" source ipset="raygate4" port port="10002-10999" protocol="tcp" accept' in rules
    assert rules[-1] == 'rule family="ipv4" source ipset="raygate-admin4" port port="8265" protocol="tcp" accept'
    assert len(rules) == len(HEAD) + 1
    assert not any("raygate6" in r for r in rules)


def test_owned_rich_rules_are_those_referencing_our_ipsets():
    listed = fw.parse_lines(
        'rule family="ipv4" source address="10.9.9.9" port port="22" protocol="tcp" accept\n'
        'rule family="ipv4" source ipset="raygate4" port port="8076" protocol="tcp" accept\n'
        'rule family="ipv4" source ipset="raygate40" port port="8076" protocol="tcp" accept\n'
        "\n"
        'rule family="ipv6" source ipset="raygate-admin6" port port="8265" protocol="tcp" accept\n'
    )
    assert fw.owned_rich_rules(listed) == [listed[1], listed[3]]
    assert fw.owned_ipsets(fw.parse_ipset_names("blocklist raygate4 raygate-admin6 raygate40\n")) == [
        "raygate4",
        "raygate-admin6",
    ]


def test_firewalld_changes_compare_entries_as_networks():
    wanted = {"raygate4": ["198.18.0.11/32", "198.18.0.0/16"]}
    current = {"raygate4": ["198.18.0.11", "198.18.0.0/24"], "raygate-admin4": ["192.0.2.10/32"]}
    rule = fw.rich_rule(4, "raygate4", "8076")
    stale = fw.rich_rule(4, "raygate-admin4", "8265")
    changes = fw.firewalld_changes(wanted, [rule], current, [rule, stale])
    assert changes == {
        "remove_rules": [stale],
        "new_ipsets": [],
        "remove_entries": {"raygate4": ["198.18.0.0/24"]},
        "add_entries": {"raygate4": ["198.18.0.0/16"]},
        "delete_ipsets": ["raygate-admin4"],
        "add_rules": [],
    }
    assert fw.has_changes(changes)
    assert not fw.has_changes(fw.firewalld_changes(wanted, [rule], {"raygate4": wanted["raygate4"]}, [rule]))


def test_firewalld_diff_lines_are_sorted_text():
    sets = {"raygate4": ["198.18.0.12/32", "198.18.0.11/32"]}
    lines = fw.firewalld_lines(sets, [fw.rich_rule(4, "raygate4", "1")], "z")
    assert lines == [
        "ipset raygate4: 198.18.0.11/32",
        "ipset raygate4: 198.18.0.12/32",
        'zone z: rule family="ipv4" source ipset="raygate4" port port="1" protocol="tcp" accept',
    ]


# -- ufw ------------------------------------------------------------------------------------
UFW_ADDED = """Added user rules (see 'ufw status' for running firewall):
ufw allow 22/tcp
ufw allow from 198.18.0.11 to any port 8076,8077 proto tcp comment 'raygate'
ufw allow from 10.0.0.0/8 to any port 9000 proto tcp comment 'other'
ufw route allow in on eth0 out on eth1 comment 'raygate'
ufw allow 8076,8077/tcp comment 'raygate'
"""


def test_ufw_rules_match_what_ufw_show_added_prints():
    d = desired("worker", sources=["198.18.0.11", "2001:db8::/64"])
    ports = WORKER_PORTS.replace(", ", ",").replace("-", ":")
    assert fw.ufw_rules(d) == [
        "allow from 198.18.0.11 to any port %s proto tcp comment 'raygate'" % ports,
        "allow from 2001:db8::/64 to any port %s proto tcp comment 'raygate'" % ports,
    ]


def test_ufw_admin_rules_cover_admin_ports_only():
    d = desired("head", sources=["198.18.0.0/24"], admin=["192.0.2.10", "2001:db8::7"])
    rules = fw.ufw_rules(d)
    assert rules[1:] == [
        "allow from 192.0.2.10 to any port 8265 proto tcp comment 'raygate'",
        "allow from 2001:db8::7 to any port 8265 proto tcp comment 'raygate'",
    ]


def test_ufw_any_source_uses_the_short_form():
    d = desired(sources=[], allow_any=True)
    assert fw.ufw_rules(d) == ["allow 8076,8077,8266,8267,8268,8269,10002:10999/tcp comment 'raygate'"]


def test_ufw_port_lists_stay_within_fifteen_with_ranges_counting_two():
    ports = [{"name": "p%d" % i, "port": str(20000 + i), "proto": "tcp"} for i in range(14)]
    ports.append({"name": "worker", "port": "30000-30100", "proto": "tcp"})
    chunks = fw.ufw_port_chunks(ports)
    assert len(chunks) == 2
    assert chunks[1] == "30000:30100"
    for chunk in chunks:
        assert chunk.count(",") + chunk.count(":") <= 14  # ufw's own check


def test_parse_ufw_added_keeps_only_our_rules():
    assert fw.parse_ufw_added(UFW_ADDED) == [
        "allow from 198.18.0.11 to any port 8076,8077 proto tcp comment 'raygate'",
        "allow 8076,8077/tcp comment 'raygate'",
    ]
    assert fw.parse_ufw_added("Added user rules (see 'ufw status' for running firewall):\n(None)\n") == []


def test_ufw_args_add_and_delete_the_same_spec():
    rule = "allow from 198.18.0.11 to any port 8076,10002:10999 proto tcp comment 'raygate'"
    add = fw.ufw_args(rule)
    assert add == "allow from 198.18.0.11 to any port 8076,10002:10999 proto tcp comment raygate".split()
    assert fw.ufw_args(rule, delete=True) == ["delete"] + add


def test_ufw_changes():
    assert fw.ufw_changes(["a", "b"], ["b", "c"]) == (["a"], ["c"])
    assert fw.ufw_changes(["a"], ["a"]) == ([], [])


@pytest.mark.parametrize(
    "text, state",
    [
        ("Status: inactive\n", {"active": False, "default_incoming": None}),
        (
            "Status: active\nLogging: on (low)\nDefault: deny (incoming), allow (outgoing), disabled (routed)\n"
            "New profiles: skip\n",
            {"active": True, "default_incoming": "deny"},
        ),
        (
            "Status: active\nLogging: on (low)\nDefault: allow (incoming), allow (outgoing), disabled (routed)\n",
            {"active": True, "default_incoming": "allow"},
        ),
    ],
)
def test_parse_ufw_status(text, state):
    assert fw.parse_ufw_status(text) == state


# -- the GCS store's port (the managed Redis of GCS fault tolerance) ------------------------------
STORE = pp.store_firewall_ports(PLAN)


def store_desired(role="head", allow_any=False, store_sources=("198.18.0.11",)):
    ports = HEAD if role == "head" else WORKER
    return fw.build_desired(
        ports, NODES, [], ["dashboard"], KNOWN, allow_any, store_ports=STORE, store_sources=list(store_sources)
    )


def test_store_port_is_open_to_the_head_only():
    rules = {r["port"]: r["sources"] for r in fw.neutral_rules(store_desired())}
    assert rules["6380"] == ["198.18.0.11/32"]
    assert rules["6379"] == ["198.18.0.11/32", "198.18.0.12/32", "198.18.0.13/32"]


def test_store_port_stays_closed_to_everyone_else_with_allow_any():
    rules = {r["port"]: r["sources"] for r in fw.neutral_rules(store_desired(allow_any=True))}
    assert rules["6380"] == ["198.18.0.11/32"]
    assert rules["8076"] == ["0.0.0.0/0", "::/0"]


def test_nft_store_set_rule_and_deny():
    text = fw.render_nft(store_desired(role="worker"))
    assert re.search(r"set store4 \{[^}]*elements = \{ 198\.18\.0\.11/32 \}", text)
    assert "ip saddr @store4 tcp dport { 6380 } accept" in text
    cluster_rule = [line for line in text.splitlines() if "@cluster4" in line][0]
    assert "6380" not in cluster_rule
    deny = [line for line in text.splitlines() if line.strip().endswith("drop")][0]
    assert "6380" in deny


def test_firewalld_and_ufw_store_rules():
    want = store_desired(role="worker")
    assert fw.firewalld_ipsets(want)["raygate-store4"] == ["198.18.0.11/32"]
    assert fw.rich_rule(4, "raygate-store4", "6380") in fw.firewalld_rich_rules(want)
    assert not [r for r in fw.firewalld_rich_rules(want) if "raygate4" in r and '"6380"' in r]
    rules = fw.ufw_rules(want)
    assert "allow from 198.18.0.11 to any port 6380 proto tcp comment 'raygate'" in rules
    assert not [r for r in rules if "6380" in r and "198.18.0.12" in r]


def test_store_without_sources_is_refused():
    with pytest.raises(fw.FirewallError, match="store_sources is empty"):
        store_desired(store_sources=())


def test_no_store_ports_means_no_store_group():
    want = desired(role="head")
    assert "store" not in [group for group, _nets, _entries in fw._groups(want)]
    assert "store" not in fw.render_nft(want)


# -- Prometheus scrapers: the metric ports and node_exporter's, nothing else ------------------
PROM = ("192.0.2.50", "2001:db8:50::/64")


def prom_desired(role="worker", prometheus=PROM, node_exporter_port=9100, store=False):
    ports = HEAD if role == "head" else WORKER
    return fw.build_desired(
        ports,
        NODES,
        [],
        ["dashboard"],
        KNOWN,
        store_ports=STORE if store else (),
        store_sources=NODES[:1] if store else (),
        prometheus_sources=list(prometheus),
        node_exporter_port=node_exporter_port,
    )


def _prom_ports(rules, prometheus=("192.0.2.50/32",)):
    """The ports whose neutral rule lets every given Prometheus source in."""
    return sorted(r["port"] for r in rules if all(p in r["sources"] for p in prometheus))


@pytest.mark.parametrize(
    "role, ports",
    [("worker", ["8269", "9100"]), ("head", ["8269", "8270", "8271", "9100"])],
)
def test_prometheus_sources_reach_exactly_the_metric_ports_of_the_role(role, ports):
    want = prom_desired(role)
    assert [e["port"] for e in want["prometheus_ports"]] == ports
    assert _prom_ports(fw.neutral_rules(want), ("192.0.2.50/32", "2001:db8:50::/64")) == ports
    # the cluster keeps every plan port and gets no node_exporter rule of its own
    assert want["ports"] == (HEAD if role == "head" else WORKER)


def test_prometheus_rules_on_every_backend_hold_only_the_metric_ports():
    want = prom_desired("head")
    text = fw.render_nft(want)
    prom_lines = [line.strip() for line in text.splitlines() if "@prometheus" in line]
    assert prom_lines == [
        "ip saddr @prometheus4 tcp dport { 8269, 8270, 8271, 9100 } accept",
        "ip6 saddr @prometheus6 tcp dport { 8269, 8270, 8271, 9100 } accept",
    ]
    assert re.search(r"set prometheus4 \{[^}]*elements = \{ 192\.0\.2\.50/32 \}", text)
    # node_exporter is no Ray port: raygate drops nobody from it
    deny = [line for line in text.splitlines() if line.strip().endswith("drop")][0]
    assert "9100" not in deny
    sets = fw.firewalld_ipsets(want)
    assert sets["raygate-prom4"] == ["192.0.2.50/32"] and sets["raygate-prom6"] == ["2001:db8:50::/64"]
    prom_rich = [r for r in fw.firewalld_rich_rules(want) if "raygate-prom" in r]
    assert sorted({re.search(r'port="([^"]+)"', r).group(1) for r in prom_rich}) == ["8269", "8270", "8271", "9100"]
    assert len(prom_rich) == 8
    ufw = [r for r in fw.ufw_rules(want) if "192.0.2.50" in r or "2001:db8:50::" in r]
    assert ufw == [
        "allow from 192.0.2.50 to any port 8269,8270,8271,9100 proto tcp comment 'raygate'",
        "allow from 2001:db8:50::/64 to any port 8269,8270,8271,9100 proto tcp comment 'raygate'",
    ]


def test_prometheus_ipsets_are_ours_so_absent_removes_them():
    assert fw.owned_ipsets(["raygate-prom4", "raygate-prom6", "other"]) == ["raygate-prom4", "raygate-prom6"]
    rule = fw.rich_rule(4, "raygate-prom4", "9100")
    assert fw.owned_rich_rules([rule]) == [rule]


def test_node_exporter_port_zero_opens_the_metric_ports_only():
    want = prom_desired("worker", node_exporter_port=0)
    assert [e["port"] for e in want["prometheus_ports"]] == ["8269"]
    assert "9100" not in fw.render_nft(want)


def test_no_prometheus_sources_opens_nothing_to_them():
    want = prom_desired("head", prometheus=())
    assert want["prometheus_ports"] == []
    assert "prometheus" not in fw.render_nft(want)
    assert not [r for r in fw.firewalld_rich_rules(want) if "raygate-prom" in r]
    assert fw.neutral_rules(want) == fw.neutral_rules(desired("head"))


@pytest.mark.parametrize("value", ["prometheus.example", "192.0.2.300", "", "10.0.0.0/33"])
def test_unparsable_prometheus_source_fails_naming_the_option_and_value(value):
    with pytest.raises(fw.FirewallError) as exc:
        prom_desired(prometheus=["192.0.2.50", value])
    assert "prometheus_sources" in str(exc.value)
    assert repr(value) in str(exc.value)


def test_slash_zero_prometheus_source_is_refused():
    with pytest.raises(fw.FirewallError, match="prometheus_sources: 0.0.0.0/0 would open"):
        prom_desired(prometheus=["0.0.0.0/0"])


@pytest.mark.parametrize(
    "port, needle",
    [
        (8269, "the port plan's metrics_export port (8269)"),
        (10500, "the port plan's worker port (10002-10999)"),
        (6380, "the port plan's gcs_redis port (6380)"),
        (22, "covers the SSH port 22"),
        (70000, "70000 is not a port"),
        (True, "True is not a port"),
    ],
)
def test_unusable_node_exporter_port_is_refused(port, needle):
    with pytest.raises(fw.FirewallError) as exc:
        prom_desired("worker", node_exporter_port=port, store=True)
    assert needle in str(exc.value)


@NEEDS_NETNS
def test_prometheus_ruleset_loads_in_a_throwaway_network_namespace(tmp_path):
    text, digest = fw.nft_ruleset(prom_desired("head", store=True))
    path = tmp_path / "firewall.nft"
    path.write_text(text)
    script = 'nft -f "$1" && nft list table inet raygate'
    args = ["unshare", "--net", "sh", "-c", script, "sh", str(path)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert fw.nft_table_matches(proc.stdout, digest)
    assert "@prometheus4" in proc.stdout and "192.0.2.50" in proc.stdout and "2001:db8:50::/64" in proc.stdout
