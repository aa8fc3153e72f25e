#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: ray_firewall
short_description: Open the Ray port plan to the cluster's own sources only (nftables, firewalld, ufw)
version_added: 0.1.0
description:
  - Ray's dashboard and jobs API run arbitrary code for whoever reaches them. This module opens
    the ports of the port plan that this node listens on (see O(role)) to the cluster's own
    sources (O(sources)) and, for the O(admin_ports) only, to O(admin_sources); the metric ports
    only (and node_exporter's, O(node_exporter_port)) to O(prometheus_sources); nobody else.
  - The ports come from the same plan as M(raygate.cluster.ray_node) (O(ports),
    O(port_offset), O(min_worker_ports)), so both modules always agree on them. The plan is
    validated the same way (range, overlaps, worker range size, ephemeral port range).
  - Three backends. V(nftables) owns one table (O(table), family C(inet)) and replaces it
    atomically. V(firewalld) owns ipsets and the rich rules that reference them. V(ufw) owns
    the allow rules carrying the comment C(raygate). Nothing else is touched on any backend.
  - Every input is validated before any command that changes something runs; a bad source,
    an unknown admin port name or a plan problem fails the task naming the value and the fix.
  - Idempotent. nftables compares a short sha256 of the rendered ruleset, kept as a comment
    in the table; firewalld and ufw compare the rules and entries we own with the desired ones.
requirements:
  - the backend's tool on the node, C(nft) (nftables) for V(nftables), C(firewall-cmd) with firewalld running
    for V(firewalld), C(ufw) for V(ufw); V(auto) needs one of them
  - systemd (C(systemctl)) for O(boot=true) with nftables
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
  - raygate.cluster.port_plan
attributes:
  check_mode:
    support: full
    details:
      - Only reads the current state (firewalld, ufw) and, with nftables, validates the rendered
        ruleset with C(nft -c) without loading it.
  diff_mode:
    support: full
    details:
      - nftables, the C(nft list table) output before and the rendered ruleset after;
        firewalld and ufw, sorted lines of the entries and rules raygate owns.
options:
  state:
    description:
      - V(present) opens the plan ports to the sources. V(absent) removes exactly what raygate
        owns on the chosen backend (and, with nftables, O(rules_file)).
    type: str
    choices: [present, absent]
    default: present
  backend:
    description:
      - V(auto) picks firewalld when C(firewall-cmd --state) says running, else ufw when
        C(ufw status verbose) reports it active, else nftables when C(nft) is installed,
        else fails.
      - An explicit backend whose tool is missing fails (set the role variable
        C(raygate_firewall_backend) to choose another one); explicit V(firewalld) also needs
        firewalld running.
    type: str
    choices: [auto, nftables, firewalld, ufw]
    default: auto
  role:
    description: Which plan ports this node listens on (the head has a few more than a worker).
    type: str
    choices: [head, worker]
    default: worker
  sources:
    description:
      - Addresses or CIDR networks allowed to reach every plan port of this node, normally
        every node of the cluster. IPv4 and IPv6 both work. A bare IPv4 address means C(/32),
        a bare IPv6 address C(/128).
      - A network written with host bits set (V(198.18.0.5/24)) is used as its network
        (V(198.18.0.0/24)) with a warning. Duplicates and networks inside another listed one
        are dropped. An unparsable value fails before any change.
      - Required (non-empty) with O(state=present) unless O(allow_any_source=true); a C(/0)
        is refused unless O(allow_any_source=true).
    type: list
    elements: str
    default: []
  admin_sources:
    description:
      - Addresses or networks that may also reach the O(admin_ports) (for example an
        operator's workstation for the dashboard), parsed like O(sources).
    type: list
    elements: str
    default: []
  admin_ports:
    description:
      - Plan port names open to O(admin_sources), from the plan keys (V(gcs), V(dashboard),
        V(client_server), V(node_manager), V(object_manager), V(dashboard_agent_listen),
        V(dashboard_agent_grpc), V(runtime_env_agent), V(metrics_export),
        V(autoscaler_metric), V(dashboard_metric)) and V(worker) for the worker port range.
      - Unknown names fail listing the valid ones; names not on this node's O(role) are ignored.
    type: list
    elements: str
    default: [dashboard]
  allow_any_source:
    description:
      - Open the plan ports to every address (C(0.0.0.0/0) and C(::/0)). A warning says so on
        every run. Anyone who can reach the ports can then run code on the cluster.
    type: bool
    default: false
  deny_action:
    description:
      - What happens to packets for the plan ports from other sources, with nftables.
        V(drop) drops them silently, V(reject) answers with a TCP reset.
      - With firewalld and ufw the host's own default policy (zone target, ufw default
        incoming policy) decides; this option is not used there.
    type: str
    choices: [drop, reject]
    default: drop
  table:
    description: The nftables table raygate owns (family C(inet)).
    type: str
    default: raygate
  zone:
    description:
      - The firewalld zone for the rich rules. Default is the default zone
        (C(firewall-cmd --get-default-zone)).
    type: str
  rules_file:
    description:
      - With nftables, where the rendered ruleset is saved (mode 0644), so the operator can load
        it at boot (C(nft -f <file>)); it replaces the table atomically. Removed by O(state=absent).
    type: path
    default: /etc/raygate/firewall.nft
  boot:
    description:
      - With nftables, also install and enable a systemd unit, C(<table>-firewall.service) in
        O(unit_dir), that loads O(rules_file) at boot, early (before C(network-pre.target)) and
        after Debian's C(nftables.service). Without it a rebooted node comes back with no
        raygate table, so the plan ports are not governed until the next run.
      - V(false) removes such a unit if raygate installed one. O(state=absent) always removes it.
      - Needs systemd; firewalld and ufw keep their own rules across reboots and ignore it.
    type: bool
    default: false
  unit_dir:
    description: Where the boot unit of O(boot) is written.
    type: path
    default: /etc/systemd/system
  gcs_store:
    description:
      - This host runs the managed Redis of GCS fault tolerance (the role's C(ray_gcs_store) group), so
        open the plan's C(gcs_redis) port, to O(gcs_store_sources) only.
    type: bool
    default: false
    version_added: 0.5.0
  gcs_store_sources:
    description:
      - Who may reach the GCS store's port (the head's address, or the heads'); required with O(gcs_store=true).
        O(allow_any_source) never opens that port wider.
    type: list
    elements: str
    default: []
    version_added: 0.5.0
  prometheus_sources:
    description:
      - Addresses or networks of the Prometheus servers that scrape this node, parsed like
        O(sources). They may reach the plan's metric ports of this node's O(role) (V(metrics_export)
        on every node, V(autoscaler_metric) and V(dashboard_metric) on the head) and
        O(node_exporter_port), and nothing else.
      - Empty (the default) opens nothing to them.
    type: list
    elements: str
    default: []
    version_added: 0.5.0
  node_exporter_port:
    description:
      - The port of node_exporter on this node, which serves the health textfile; opened to
        O(prometheus_sources) only. V(0) opens none. It must not be a port of the plan.
      - It is not a Ray port, so with nftables raygate only accepts it from O(prometheus_sources)
        and does not drop it for anybody else (the host's own rules decide for them); firewalld
        and ufw refuse it to others by their default policy.
    type: int
    default: 9100
    version_added: 0.5.0
notes:
  - Nothing but raygate's own rules is ever changed. No default policy, no C(ufw enable), no
    flush of other tables, no reload beyond C(firewall-cmd --reload). SSH is never governed
    (plan ports are 1024 or higher, and a plan covering port 22 is refused outright).
  - nftables - one table C(inet <table>) with a C(filter) chain hooked on C(input), policy
    accept (only our ports are governed), loaded in one C(nft -f) transaction that creates,
    deletes and redefines the table. Rule order - C(ct state established,related accept)
    first (loading a drop rule must not cut live Ray connections), C(iif "lo" accept), the
    cluster sets C(cluster4)/C(cluster6) to every plan port, the admin sets
    C(admin4)/C(admin6) to the admin ports, the Prometheus sets C(prometheus4)/C(prometheus6)
    to the metric ports and node_exporter's, then the plan ports are dropped or rejected
    for everybody else. Other tables (for example a host firewall with its own drop
    policy) still see the packets; a packet must be accepted by every base chain. The
    saved O(rules_file) is loaded at boot only with O(boot=true).
  - firewalld - sources live in ipsets raygate owns (C(raygate4), C(raygate6),
    C(raygate-admin4), C(raygate-admin6), C(raygate-store4), C(raygate-store6), C(raygate-prom4),
    C(raygate-prom6), type C(hash:net)); rich rules in O(zone) that
    reference them accept the plan ports. A rule is raygate's when it references one of these
    ipsets, so O(state=absent) removes exactly those rules and ipsets. Changes are made to
    the permanent configuration and applied with one C(firewall-cmd --reload). Whether others
    are refused depends on the zone's target (the default targets reject); a zone with
    target ACCEPT (such as C(trusted)) makes these rules restrict nothing.
    O(allow_any_source) is written as the entries C(0.0.0.0/1), C(128.0.0.0/1), C(::/1) and
    C(8000::/1) (hash:net cannot hold a C(/0)).
  - ufw - one C(allow) rule per source and group of at most 15 ports (a range counts as two),
    all with the comment C(raygate); stale ones are deleted with the same rule spec. ufw's
    default incoming policy decides what others get; with C(allow) these rules restrict
    nothing, and while ufw is inactive they are stored but not enforced; the module warns in
    both cases and never enables ufw or changes its defaults.
  - With O(backend=auto), a host where ufw is installed but inactive and nft is available gets
    the nftables backend.
"""

EXAMPLES = r"""
- name: Head - open the plan to the cluster, the dashboard also to an operator's workstation
  raygate.cluster.ray_firewall:
    role: head
    sources: [10.0.0.0/24, "fd00:10::/64"]
    admin_sources: [192.0.2.10]
    admin_ports: [dashboard]

- name: Every node - the cluster, and Prometheus scraping Ray's metrics and node_exporter
  raygate.cluster.ray_firewall:
    role: worker
    sources: [10.0.0.0/24]
    prometheus_sources: [192.0.2.50]
    node_exporter_port: 9100

- name: Workers - the cluster's node addresses only, rejecting everybody else
  raygate.cluster.ray_firewall:
    role: worker
    sources: [10.0.0.1, 10.0.0.2, 10.0.0.3]
    deny_action: reject

- name: A second cluster on the same hosts, with its own table
  raygate.cluster.ray_firewall:
    role: worker
    port_offset: 20000
    table: raygate_b
    rules_file: /etc/raygate/firewall-b.nft
    sources: [10.0.0.0/24]

- name: Force firewalld in a given zone
  raygate.cluster.ray_firewall:
    backend: firewalld
    zone: internal
    role: worker
    sources: [10.0.0.0/24]

- name: Remove everything raygate added to the firewall
  raygate.cluster.ray_firewall:
    state: absent
"""

RETURN = r"""
backend:
  description: The backend used.
  returned: always
  type: str
  sample: nftables
ports:
  description: The plan ports of this role that the rules cover (the worker range as one entry).
  returned: always
  type: list
  elements: dict
  sample: [{name: node_manager, port: "8076", proto: tcp}, {name: worker, port: "10002-10999", proto: tcp}]
sources:
  description: The normalised cluster sources (V(0.0.0.0/0) and V(::/0) with O(allow_any_source)).
  returned: always
  type: list
  elements: str
  sample: [198.18.0.0/24, "2001:db8::/64"]
admin_sources:
  description: The normalised admin sources.
  returned: always
  type: list
  elements: str
  sample: [192.0.2.10/32]
prometheus_sources:
  description: The normalised Prometheus sources.
  returned: always
  type: list
  elements: str
  sample: [192.0.2.50/32]
  version_added: 0.5.0
prometheus_ports:
  description:
    - The ports open to O(prometheus_sources) - the metric ports of the plan on this node, then
      node_exporter's (name V(node_exporter)). Empty without Prometheus sources.
  returned: always
  type: list
  elements: dict
  sample: [{name: metrics_export, port: "8269", proto: tcp}, {name: node_exporter, port: "9100", proto: tcp}]
  version_added: 0.5.0
rules:
  description:
    - Backend-neutral view of what is allowed - one entry per plan port with every source that
      may reach it, then node_exporter's port with the Prometheus sources. Empty with O(state=absent).
  returned: always
  type: list
  elements: dict
  sample: [{port: "8265", proto: tcp, sources: [192.0.2.10/32, 198.18.0.0/24]}]
zone:
  description: The firewalld zone holding the rich rules.
  returned: when the backend is firewalld
  type: str
  sample: public
diff:
  description: Before and after, as text (see the diff_mode attribute).
  returned: in diff mode
  type: dict
  sample: {before: "", after: "table inet raygate {}\n..."}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils.net import firewall_step


def main():
    module = AnsibleModule(
        argument_spec=firewall_step.ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    firewall_step.run(module)


if __name__ == "__main__":
    main()
