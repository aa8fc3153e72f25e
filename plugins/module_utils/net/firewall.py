# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
from __future__ import annotations

"""Firewall rules for the port plan: sources, the desired rule model, and each backend's form.

Pure functions only (stdlib): the module ray_firewall reads the current state with commands,
hands the text to the parsers here, and applies what the comparisons here return.

The model (``build_desired``) holds the plan ports of one role, the cluster sources allowed
to reach all of them, and the admin sources allowed to reach only the admin ports. On the host
of the GCS store (the managed Redis of GCS fault tolerance) it also holds the store's port,
which only the store sources (the head or heads) may reach, and, when Prometheus scrapers are
listed, the metric ports they may reach and nothing else. Each backend renders the same model:

- nftables: one table of our own, replaced atomically (``render_nft``);
- firewalld: ipsets we own plus rich rules that reference them (``firewalld_*``);
- ufw: allow rules carrying the comment ``raygate`` (``ufw_*``).
"""

import hashlib
import ipaddress
import re
import shlex

OWNER = "raygate"
SSH_PORT = 22
UFW_MAX_PORTS = 15  # ufw's multiport limit; a range counts as two
NFT_TABLE_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
ANY = (ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))

# firewalld ipsets we own, by group and IP version. hash:net cannot hold a /0, so "everyone"
# is written as two halves per family.
IPSETS = {
    ("cluster", 4): "raygate4",
    ("cluster", 6): "raygate6",
    ("admin", 4): "raygate-admin4",
    ("admin", 6): "raygate-admin6",
    ("store", 4): "raygate-store4",
    ("store", 6): "raygate-store6",
    ("prometheus", 4): "raygate-prom4",
    ("prometheus", 6): "raygate-prom6",
}
IPSET_FAMILY = {4: "inet", 6: "inet6"}
RICH_FAMILY = {4: "ipv4", 6: "ipv6"}
HALVES = {
    4: ("0.0.0.0/1", "128.0.0.0/1"),
    6: ("::/1", "8000::/1"),
}
# The plan ports Prometheus scrapes: Ray's metrics exporter on every node, and on the head the
# autoscaler's and the dashboard's (docs/PORTS.md). Which of them a node has comes from its role.
PROMETHEUS_PORT_NAMES = ("metrics_export", "autoscaler_metric", "dashboard_metric")
NODE_EXPORTER = "node_exporter"
_RICH_IPSET_RE = re.compile(r'\bsource(?: NOT)? ipset="([^"]+)"')


class FirewallError(ValueError):
    """Input that cannot become firewall rules; the message names the value and the fix."""


# -- sources ------------------------------------------------------------------------------
def parse_source(value, option="sources"):
    """(network, warning or None) for one CIDR or bare address; bare IPv4 is /32, IPv6 /128."""
    text = value.strip() if isinstance(value, str) else value
    if not isinstance(text, str) or not text:
        raise FirewallError(
            "%s: %r is not an address or network: write a CIDR such as 198.18.0.0/24 or an address" % (option, value)
        )
    try:
        network = ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise FirewallError(
            "%s: %r is not an IPv4/IPv6 address or CIDR network: write it like 198.18.0.0/24, "
            "198.18.0.12 or 2001:db8::/64" % (option, value)
        ) from None
    warning = None
    if "/" in text:
        given = ipaddress.ip_address(text.split("/", 1)[0])
        if given != network.network_address:
            warning = "%s: %s has host bits set; using the network %s" % (option, text, network)
    return network, warning


def _sort_key(network):
    return (network.version, int(network.network_address), network.prefixlen)


def reduce_networks(networks):
    """Sorted (IPv4 first), without duplicates or networks inside another listed one.

    Kept minimal because nft interval sets and firewalld hash:net ipsets both refuse
    overlapping entries; adjacent networks are kept as written.
    """
    kept = []
    for net in sorted(set(networks), key=_sort_key):
        if not any(net.version == k.version and net.subnet_of(k) for k in kept):
            kept.append(net)
    return kept


def parse_sources(values, option="sources", allow_any=False):
    """(reduced networks, warnings) from a list of strings; /0 is refused unless allow_any."""
    networks, warnings = [], []
    for value in values or []:
        network, warning = parse_source(value, option)
        if network.prefixlen == 0 and not allow_any:
            raise FirewallError(
                "%s: %s would open the Ray ports to every address: list the cluster's networks instead, "
                "or set allow_any_source=true if that is really meant" % (option, value)
            )
        networks.append(network)
        if warning:
            warnings.append(warning)
    return reduce_networks(networks), warnings


def _covered(network, others):
    return any(network.version == o.version and network.subnet_of(o) for o in others)


def net_text(networks):
    return [str(n) for n in networks]


# -- the desired model --------------------------------------------------------------------
def _port_bounds(port):
    lo, _sep, hi = str(port).partition("-")
    return int(lo), int(hi or lo)


def check_no_ssh(ports):
    """Refuse any port entry that covers SSH; the plan's own validation should make this unreachable."""
    for entry in ports:
        lo, hi = _port_bounds(entry["port"])
        if lo <= SSH_PORT <= hi:
            raise FirewallError(
                "port plan entry %s=%s covers the SSH port %d: raygate never governs SSH; move the port plan"
                % (entry["name"], entry["port"], SSH_PORT)
            )


def select_admin_ports(ports, admin_ports, known_names):
    """The entries of `ports` named in `admin_ports`; unknown names fail, names not on this role are ignored."""
    known = list(known_names)
    unknown = [name for name in admin_ports if name not in known]
    if unknown:
        raise FirewallError(
            "admin_ports: unknown port name(s) %s; valid names: %s" % (", ".join(map(str, unknown)), ", ".join(known))
        )
    wanted = set(admin_ports)
    return [entry for entry in ports if entry["name"] in wanted]


def _node_exporter_entry(port, taken):
    """The node_exporter port as a port entry, or None for 0; refuses a port that is not usable here."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise FirewallError(
            "node_exporter_port: %r is not a port: give node_exporter's port (1..65535, default 9100) or 0 for none"
            % (port,)
        )
    if port == 0:
        return None
    entry = {"name": NODE_EXPORTER, "port": str(port), "proto": "tcp"}
    check_no_ssh([entry])
    for other in taken:
        lo, hi = _port_bounds(other["port"])
        if lo <= port <= hi:
            raise FirewallError(
                "node_exporter_port: %d is the port plan's %s port (%s), where node_exporter cannot listen: give "
                "node_exporter's real port, or 0 for none" % (port, other["name"], other["port"])
            )
    return entry


def prometheus_entries(ports, node_exporter_port=0, taken=()):
    """What Prometheus scrapes on this node: the metric ports among ``ports`` (so by role), then node_exporter's."""
    entries = [dict(e) for e in ports if e["name"] in PROMETHEUS_PORT_NAMES]
    extra = _node_exporter_entry(node_exporter_port, list(ports) + list(taken))
    return entries + ([extra] if extra else [])


def build_desired(
    ports,
    sources,
    admin_sources=(),
    admin_ports=(),
    known_names=None,
    allow_any=False,
    store_ports=(),
    store_sources=(),
    prometheus_sources=(),
    node_exporter_port=0,
):
    """The rule model shared by every backend.

    ``ports``: ``port_plan.firewall_ports(plan, role)``. ``known_names``: every valid admin
    port name (the head's names); defaults to the names in ``ports``. Returns a dict with
    ``ports``, ``cluster`` (networks allowed to all ports), ``admin`` (the normalised admin
    networks), ``admin_effective`` (admin networks not already covered by a cluster network),
    ``admin_ports`` (port entries) and ``warnings``. ``store_ports`` (the GCS store's, from
    ``port_plan.store_firewall_ports``) are open to ``store_sources`` only, whatever
    ``allow_any`` says; they are returned as ``store_ports`` and ``store`` (networks).
    ``prometheus_sources`` may reach the metric ports of ``ports`` and ``node_exporter_port``
    (0: none), nothing else: ``prometheus`` (networks) and ``prometheus_ports`` (entries, empty
    without sources).
    """
    check_no_ssh(ports)
    cluster, warnings = parse_sources(sources, "sources", allow_any)
    admin, admin_warnings = parse_sources(admin_sources, "admin_sources", allow_any)
    warnings += admin_warnings
    if allow_any:
        cluster = list(ANY)
        warnings.append(
            "allow_any_source is set: the Ray ports (%s) are open to every address (0.0.0.0/0 and ::/0); "
            "anyone who reaches them can run code on this cluster" % ", ".join(e["port"] for e in ports)
        )
    elif not cluster:
        raise FirewallError(
            "sources is empty: refusing to open the Ray ports to nobody (the other nodes would be cut off) "
            "or to everybody (anyone who reaches them can run code): list the cluster's node addresses or "
            "networks in sources, or set allow_any_source=true to open them to every address on purpose"
        )
    store, store_warnings = parse_sources(store_sources, "store_sources")
    warnings += store_warnings
    if store_ports and not store:
        raise FirewallError(
            "store_sources is empty: the GCS store's port (%s) would be open to nobody, and the head could not "
            "reach its Redis: list the head's address(es)" % ", ".join(e["port"] for e in store_ports)
        )
    check_no_ssh(store_ports)
    prometheus, prometheus_warnings = parse_sources(prometheus_sources, "prometheus_sources", allow_any)
    warnings += prometheus_warnings
    scraped = prometheus_entries(ports, node_exporter_port, store_ports) if prometheus else []
    names = known_names if known_names is not None else [e["name"] for e in ports]
    chosen = select_admin_ports(ports, list(admin_ports or []), names)
    effective = [n for n in admin if not _covered(n, cluster)] if chosen else []
    return {
        "ports": [dict(e) for e in ports] + [dict(e) for e in store_ports],
        "cluster": cluster,
        "admin": admin,
        "admin_effective": effective,
        "admin_ports": [dict(e) for e in chosen],
        "store": store if store_ports else [],
        "store_ports": [dict(e) for e in store_ports],
        "prometheus": prometheus,
        "prometheus_ports": scraped,
        "warnings": warnings,
    }


def neutral_rules(desired):
    """Backend-neutral rules: [{'port', 'proto', 'sources'}], one per plan port in plan order, then
    node_exporter's port when Prometheus sources may reach it."""
    admin_ports = {e["port"] for e in desired["admin_ports"]}
    store_ports = {e["port"] for e in desired.get("store_ports", [])}
    scraped = desired.get("prometheus_ports", [])
    scraped_ports = {e["port"] for e in scraped}
    rules = []
    for entry in desired["ports"]:
        nets = list(desired["store"] if entry["port"] in store_ports else desired["cluster"])
        if entry["port"] in admin_ports:
            nets += desired["admin_effective"]
        if entry["port"] in scraped_ports:
            nets += desired["prometheus"]
        rules.append({"port": entry["port"], "proto": entry["proto"], "sources": net_text(reduce_networks(nets))})
    for entry in scraped:
        if entry["name"] == NODE_EXPORTER:
            rules.append({"port": entry["port"], "proto": entry["proto"], "sources": net_text(desired["prometheus"])})
    return rules


def _by_version(networks, version):
    return [n for n in networks if n.version == version]


def _groups(desired):
    """(group, networks, port entries) for the cluster group, the admin group when it has effect,
    the store group on the GCS store host (its port is in no other group), and the prometheus
    group when scrapers are listed (the metric ports and node_exporter's, nothing else)."""
    store_ports = desired.get("store_ports", [])
    store_names = {e["port"] for e in store_ports}
    groups = [("cluster", desired["cluster"], [e for e in desired["ports"] if e["port"] not in store_names])]
    if desired["admin_effective"] and desired["admin_ports"]:
        groups.append(("admin", desired["admin_effective"], desired["admin_ports"]))
    if store_ports:
        groups.append(("store", desired["store"], store_ports))
    if desired.get("prometheus_ports"):
        groups.append(("prometheus", desired["prometheus"], desired["prometheus_ports"]))
    return groups


# -- nftables -----------------------------------------------------------------------------
def check_table_name(table):
    if not isinstance(table, str) or not NFT_TABLE_RE.match(table):
        raise FirewallError(
            "table: %r is not a usable nftables table name: use letters, digits and underscores, "
            "starting with a letter (default raygate)" % (table,)
        )


def _nft_ports(entries):
    return "{ %s }" % ", ".join(e["port"] for e in entries)


def _nft_set(name, version, networks):
    lines = [
        "\tset %s {" % name,
        "\t\ttype %s" % ("ipv4_addr" if version == 4 else "ipv6_addr"),
        "\t\tflags interval",
    ]
    if networks:
        lines.append("\t\telements = { %s }" % ", ".join(net_text(networks)))
    lines.append("\t}")
    return lines


def nft_marker(digest):
    return 'comment "%s:%s"' % (OWNER, digest)


def render_nft(desired, table="raygate", deny_action="drop", marker="{marker}"):
    """The whole nft transaction as text: create-if-missing, delete, and the full table.

    The first rule carries ``marker`` (replaced by the digest comment in ``nft_ruleset``).
    Order matters: established/related first so loading never cuts live Ray connections,
    loopback next, then the allowed sources, and the deny for the plan ports last.
    """
    check_table_name(table)
    if deny_action not in ("drop", "reject"):
        raise FirewallError("deny_action: %r is not drop or reject" % (deny_action,))
    lines = [
        "# Managed by raygate.cluster.ray_firewall: local changes are overwritten.",
        "# Load with nft -f <this file>: it replaces table inet %s atomically and touches nothing else." % table,
        "table inet %s {}" % table,
        "delete table inet %s" % table,
        "table inet %s {" % table,
    ]
    for group, networks, _entries in _groups(desired):
        for version in (4, 6):
            lines += _nft_set("%s%d" % (group, version), version, _by_version(networks, version))
    all_ports = _nft_ports(desired["ports"])
    lines += [
        "\tchain input {",
        "\t\ttype filter hook input priority filter; policy accept;",
        "\t\tct state established,related accept %s" % marker,
        '\t\tiif "lo" accept',
    ]
    for group, _networks, entries in _groups(desired):
        ports = _nft_ports(entries)
        lines.append("\t\tip saddr @%s4 tcp dport %s accept" % (group, ports))
        lines.append("\t\tip6 saddr @%s6 tcp dport %s accept" % (group, ports))
    verdict = "drop" if deny_action == "drop" else "reject with tcp reset"
    lines += ["\t\ttcp dport %s %s" % (all_ports, verdict), "\t}", "}"]
    return "\n".join(lines) + "\n"


def nft_ruleset(desired, table="raygate", deny_action="drop"):
    """(ruleset text, digest): the digest is a short sha256 of the ruleset, written into it as a comment."""
    template = render_nft(desired, table, deny_action)
    digest = hashlib.sha256(template.encode("utf-8")).hexdigest()[:16]
    return template.replace("{marker}", nft_marker(digest), 1), digest


def nft_table_matches(listing, digest):
    """Whether ``nft list table`` output shows the ruleset with this digest."""
    return nft_marker(digest) in (listing or "")


def nft_missing_table(err):
    """Whether an ``nft list table`` error means the table does not exist."""
    return "No such file or directory" in (err or "")


# -- firewalld ----------------------------------------------------------------------------
def _ipset_entries(networks, version):
    entries = []
    for net in _by_version(networks, version):
        if net.prefixlen == 0:
            entries.extend(HALVES[version])
        else:
            entries.append(str(net))
    return entries


def firewalld_ipsets(desired):
    """{ipset name: [entries]} for every ipset we want (families with entries only)."""
    wanted = {}
    for group, networks, _entries in _groups(desired):
        for version in (4, 6):
            entries = _ipset_entries(networks, version)
            if entries:
                wanted[IPSETS[(group, version)]] = entries
    return wanted


def ipset_version(name):
    for (_group, version), ipset in IPSETS.items():
        if ipset == name:
            return version
    raise KeyError(name)


def rich_rule(version, ipset, port, proto="tcp"):
    """A rich rule in firewalld's own canonical form (what --list-rich-rules prints back)."""
    return 'rule family="%s" source ipset="%s" port port="%s" protocol="%s" accept' % (
        RICH_FAMILY[version],
        ipset,
        port,
        proto,
    )


def firewalld_rich_rules(desired):
    """Rich rules we want, in a stable order (group, family, plan port)."""
    wanted_sets = firewalld_ipsets(desired)
    rules = []
    for group, _networks, entries in _groups(desired):
        for version in (4, 6):
            ipset = IPSETS[(group, version)]
            if ipset in wanted_sets:
                rules += [rich_rule(version, ipset, e["port"], e["proto"]) for e in entries]
    return rules


def parse_ipset_names(text):
    """Names from ``firewall-cmd --permanent --get-ipsets`` (space separated on one line)."""
    return (text or "").split()


def parse_lines(text):
    """Non-empty stripped lines (``--get-entries``, ``--list-rich-rules``)."""
    return [line.strip() for line in (text or "").splitlines() if line.strip()]


def owned_ipsets(names):
    ours = set(IPSETS.values())
    return [name for name in names if name in ours]


def owned_rich_rules(rules):
    """The rich rules that reference one of our ipsets: ownership is the reference."""
    ours = set(IPSETS.values())
    owned = []
    for rule in rules:
        match = _RICH_IPSET_RE.search(rule)
        if match and match.group(1) in ours:
            owned.append(rule)
    return owned


def _same_entry(a, b):
    try:
        return ipaddress.ip_network(a, strict=False) == ipaddress.ip_network(b, strict=False)
    except ValueError:
        return a == b


def entry_changes(current, wanted):
    """(to add, to remove) for one ipset; entries compare as networks (198.18.0.12 == 198.18.0.12/32)."""
    add = [w for w in wanted if not any(_same_entry(w, c) for c in current)]
    remove = [c for c in current if not any(_same_entry(w, c) for w in wanted)]
    return add, remove


def firewalld_changes(wanted_sets, wanted_rules, current_sets, current_rules):
    """What to do, given our current ipsets ({name: entries}) and our current rich rules.

    Returns a dict of lists: ``remove_rules``, ``new_ipsets`` (names), ``remove_entries`` and
    ``add_entries`` ({name: [entries]}), ``delete_ipsets`` (names), ``add_rules``. All empty
    means nothing to change.
    """
    changes = {
        "remove_rules": [r for r in current_rules if r not in wanted_rules],
        "new_ipsets": [n for n in wanted_sets if n not in current_sets],
        "remove_entries": {},
        "add_entries": {},
        "delete_ipsets": [n for n in current_sets if n not in wanted_sets],
        "add_rules": [r for r in wanted_rules if r not in current_rules],
    }
    for name, entries in wanted_sets.items():
        add, remove = entry_changes(current_sets.get(name, []), entries)
        if add:
            changes["add_entries"][name] = add
        if remove:
            changes["remove_entries"][name] = remove
    return changes


def has_changes(changes):
    return any(bool(v) for v in changes.values())


def firewalld_lines(ipsets, rules, zone):
    """Sorted text lines for a diff: one per ipset entry and one per rich rule."""
    lines = ["ipset %s: %s" % (name, entry) for name, entries in ipsets.items() for entry in entries]
    lines += ["zone %s: %s" % (zone, rule) for rule in rules]
    return sorted(lines)


# -- ufw ----------------------------------------------------------------------------------
def _ufw_port(port):
    return str(port).replace("-", ":")


def _ufw_weight(port):
    return 2 if ":" in port else 1


def ufw_port_chunks(entries):
    """Comma lists of ufw ports, each within ufw's limit of 15 (a range counts as two)."""
    chunks, current, weight = [], [], 0
    for entry in entries:
        port = _ufw_port(entry["port"])
        if current and weight + _ufw_weight(port) > UFW_MAX_PORTS:
            chunks.append(",".join(current))
            current, weight = [], 0
        current.append(port)
        weight += _ufw_weight(port)
    if current:
        chunks.append(",".join(current))
    return chunks


def _ufw_address(network):
    if network.prefixlen == network.max_prefixlen:
        return str(network.network_address)
    return str(network)


def ufw_rule(network, ports):
    """One rule in the exact form ``ufw show added`` prints it back (without the leading 'ufw ').

    ufw drops host masks (/32, /128) and prints a rule from anywhere in its short form;
    ``network`` None means from anywhere (both families).
    """
    if network is None:
        return "allow %s/tcp comment '%s'" % (ports, OWNER)
    return "allow from %s to any port %s proto tcp comment '%s'" % (_ufw_address(network), ports, OWNER)


def ufw_rules(desired):
    """Every ufw rule we want: one per source and port chunk, in a stable order."""
    rules = []
    cluster = desired["cluster"]
    everyone = all(any(n == a for n in cluster) for a in ANY)
    for group, networks, entries in _groups(desired):
        chunks = ufw_port_chunks(entries)
        sources = [None] if group == "cluster" and everyone else networks
        for network in sources:
            rules += [ufw_rule(network, chunk) for chunk in chunks]
    return rules


def parse_ufw_added(text):
    """Our rules (comment 'raygate') from ``ufw show added``, without the leading 'ufw '."""
    suffix = " comment '%s'" % OWNER
    rules = []
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("ufw ") and not line.startswith("ufw route ") and line.endswith(suffix):
            rules.append(line[len("ufw ") :])
    return rules


def ufw_args(rule, delete=False):
    """The ufw arguments (after the binary) that add, or with delete=True remove, ``rule``."""
    args = shlex.split(rule)
    return (["delete"] if delete else []) + args


def ufw_changes(wanted, current):
    """(to add, to delete): missing rules in wanted order, stale ones in current order."""
    add = [r for r in wanted if r not in current]
    delete = [r for r in current if r not in wanted]
    return add, delete


def parse_ufw_status(text):
    """{'active': bool, 'default_incoming': 'deny'|'allow'|'reject'|None} from ``ufw status verbose``."""
    active = False
    incoming = None
    for line in (text or "").splitlines():
        line = line.strip()
        if line.startswith("Status:"):
            active = line.split(":", 1)[1].strip() == "active"
        elif line.startswith("Default:"):
            match = re.search(r"(\w+) \(incoming\)", line)
            if match:
                incoming = match.group(1)
    return {"active": active, "default_incoming": incoming}
