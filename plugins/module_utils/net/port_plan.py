# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

import difflib
import os
import re

# The port plan: the one source of every port Ray listens on. Every other part of the
# collection (ray_node flags, environment, firewall rules, preflight checks) derives its ports
# from a plan built here, so a port can never be opened in the firewall but not passed to Ray,
# or the other way round.
#
# All defaults sit below Linux's default ephemeral range (32768-60999). Ray's own defaults for
# the dashboard agent and runtime-env agent (52365/44217/44227) are inside it, so the kernel
# can give them to an outgoing connection before Ray binds them; that is why every port is
# pinned.

# Insertion order is the order of `ray start` arguments and of messages.
DEFAULT_PORTS = {
    "gcs": 6379,
    "dashboard": 8265,
    "client_server": 10001,
    "node_manager": 8076,
    "object_manager": 8077,
    "dashboard_agent_listen": 8266,
    "dashboard_agent_grpc": 8267,
    "runtime_env_agent": 8268,
    "metrics_export": 8269,
    "autoscaler_metric": 8270,
    "dashboard_metric": 8271,
    "min_worker": 10002,
    "max_worker": 10999,
    # Not a Ray port: the Redis that raygate manages for GCS fault tolerance (raygate_gcs_ft:
    # redis) listens here on its store host. Redis's own default, 6379, is the GCS port.
    "gcs_redis": 6380,
}

# Ports of the GCS store, not of a Ray node: ray_node neither passes nor checks them, and the
# firewall opens them only on the store host, to the head(s) only (store_firewall_ports).
STORE_KEYS = frozenset(["gcs_redis"])

HEAD_ONLY = frozenset(["gcs", "dashboard", "client_server", "autoscaler_metric", "dashboard_metric"])

FLAGS = {
    "gcs": "--port",
    "dashboard": "--dashboard-port",
    "client_server": "--ray-client-server-port",
    "node_manager": "--node-manager-port",
    "object_manager": "--object-manager-port",
    "dashboard_agent_listen": "--dashboard-agent-listen-port",
    "dashboard_agent_grpc": "--dashboard-agent-grpc-port",
    "runtime_env_agent": "--runtime-env-agent-port",
    "metrics_export": "--metrics-export-port",
    "min_worker": "--min-worker-port",
    "max_worker": "--max-worker-port",
}

# Ray reads these from the environment only; `ray start` has no flag for them.
ENV_ONLY = {
    "autoscaler_metric": "AUTOSCALER_METRIC_PORT",
    "dashboard_metric": "DASHBOARD_METRIC_PORT",
}

WORKER_RANGE = ("min_worker", "max_worker")
SINGLE_KEYS = tuple(k for k in DEFAULT_PORTS if k not in WORKER_RANGE)
ROLES = ("head", "worker")
PORT_MIN = 1024
PORT_MAX = 65535

_INT_RE = re.compile(r"^[+-]?[0-9]+$")
_LONG_OPT_RE = re.compile(r"(?<![\w-])--[A-Za-z0-9][A-Za-z0-9_-]*")
_DIGITS_RE = re.compile(r"^[0-9]+$")
_SOCKET_RE = re.compile(r"^socket:\[([0-9]+)\]$")
_TCP_LISTEN = "0A"


def plan_argspec():
    """The port plan's options, shared by ray_node and ray_firewall (mirrored by the doc fragment
    raygate.cluster.port_plan): fresh dicts on every call, as a spec hands its defaults out by reference."""
    return dict(
        ports=dict(type="dict", default={}),
        port_offset=dict(type="int", default=0),
        plan=dict(type="dict"),
        min_worker_ports=dict(type="int", default=64),
    )


class PortPlanError(ValueError):
    """A port plan input that cannot be turned into a plan (unknown key, non-integer value...)."""


def _to_int(name, value):
    """Coerce an int or a numeric string (Ansible often passes strings) to int."""
    # bool is an int subclass; `True` as a port is always a mistake.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and _INT_RE.match(value.strip()):
        return int(value.strip())
    raise PortPlanError(f"{name}={value!r} is not an integer: set it to a port number in {PORT_MIN}..{PORT_MAX}")


def _unknown_key_message(key):
    known = sorted(DEFAULT_PORTS)
    close = difflib.get_close_matches(str(key), known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown port key {key!r}{hint}; known keys: {', '.join(known)}"


def build_plan(overrides=None, offset=0) -> dict:
    """Defaults, then `overrides` (None values keep the default), then `offset` added to every port."""
    if overrides is None:
        overrides = {}
    if not isinstance(overrides, dict):
        raise PortPlanError(f"port overrides must be a dict of key: port, got {overrides!r}")
    offset = _to_int("offset", offset)
    plan = dict(DEFAULT_PORTS)
    for key, value in overrides.items():
        if key not in DEFAULT_PORTS:
            raise PortPlanError(_unknown_key_message(key))
        if value is not None:
            plan[key] = _to_int(f"ports.{key}", value)
    return {key: port + offset for key, port in plan.items()}


def _check_role(role):
    if role not in ROLES:
        raise PortPlanError(f"role must be one of {', '.join(ROLES)}, got {role!r}")


def _range_text(lo, hi):
    return f"{lo}-{hi}"


def _worker_label(plan):
    return f"ports.min_worker..ports.max_worker={_range_text(plan['min_worker'], plan['max_worker'])}"


def _type_problems(plan):
    """Missing, unknown, non-integer and out-of-range values; returns (problems, int-valued keys)."""
    problems = []
    for key in plan:
        if key not in DEFAULT_PORTS:
            problems.append(f"ports.{key} is not a known port key: remove it ({_unknown_key_message(key)})")
    good = {}
    for key in DEFAULT_PORTS:
        if key not in plan:
            problems.append(f"ports.{key} is missing: build the plan with build_plan() so every key is set")
            continue
        value = plan[key]
        if not isinstance(value, int) or isinstance(value, bool):
            problems.append(
                f"ports.{key}={value!r} is not an integer: set it to a port number in {PORT_MIN}..{PORT_MAX}"
            )
            continue
        good[key] = value
        if not PORT_MIN <= value <= PORT_MAX:
            problems.append(
                f"ports.{key}={value} is outside {PORT_MIN}..{PORT_MAX}: choose a port in {PORT_MIN}..{PORT_MAX} "
                f"(ports below {PORT_MIN} need root)"
            )
    return problems, good


def _worker_problems(good, min_worker_ports):
    """Range order and size; returns (problems, whether the range is usable for further checks)."""
    if "min_worker" not in good or "max_worker" not in good:
        return [], False
    lo, hi = good["min_worker"], good["max_worker"]
    if lo > hi:
        return [
            f"ports.min_worker={lo} is greater than ports.max_worker={hi}: swap them so min_worker <= max_worker"
        ], False
    size = hi - lo + 1
    if size < min_worker_ports:
        return [
            f"{_worker_label(good)} holds {size} ports, fewer than the {min_worker_ports} required: "
            "widen the range (every Ray worker process needs its own port)"
        ], True
    return [], True


def _overlap_problems(good, range_ok):
    problems = []
    singles = [k for k in SINGLE_KEYS if k in good]
    for i, key in enumerate(singles):
        for other in singles[i + 1 :]:
            if good[key] == good[other]:
                problems.append(
                    f"ports.{other}={good[other]} overlaps ports.{key}={good[key]}: choose another port for one of them"
                )
    if range_ok:
        for key in singles:
            if good["min_worker"] <= good[key] <= good["max_worker"]:
                problems.append(
                    f"ports.{key}={good[key]} lies inside the worker range {_worker_label(good)}: "
                    "choose a port outside it or move the range"
                )
    return problems


def _ephemeral_problems(good, range_ok, ephemeral_range):
    lo, hi = int(ephemeral_range[0]), int(ephemeral_range[1])
    where = f"the ephemeral port range {_range_text(lo, hi)} (net.ipv4.ip_local_port_range)"
    why = "the kernel may hand it to an outgoing connection before Ray binds it"
    fix = f"choose a port outside {_range_text(lo, hi)} or change net.ipv4.ip_local_port_range"
    problems = []
    for key in SINGLE_KEYS:
        if key in good and lo <= good[key] <= hi:
            problems.append(f"ports.{key}={good[key]} is inside {where}: {why}; {fix}")
    if range_ok and good["min_worker"] <= hi and good["max_worker"] >= lo:
        problems.append(f"{_worker_label(good)} intersects {where}: {why}; {fix}")
    return problems


def _intervals(plan, range_ok):
    """(label, lo, hi) for every single port and the worker range, for interval comparisons."""
    items = [(f"ports.{k}={plan[k]}", plan[k], plan[k]) for k in SINGLE_KEYS if k in plan]
    if range_ok:
        items.append((_worker_label(plan), plan["min_worker"], plan["max_worker"]))
    return items


def _offset_problems(good, range_ok, offset):
    # build_plan adds the offset uniformly, so the offset-0 plan is this plan minus the offset.
    base = {key: port - offset for key, port in good.items()}
    problems = []
    for label, lo, hi in _intervals(good, range_ok):
        for base_label, base_lo, base_hi in _intervals(base, range_ok):
            if lo <= base_hi and base_lo <= hi:
                problems.append(
                    f"{label} (offset {offset}) collides with the offset-0 cluster's {base_label}: both clusters "
                    "would listen there; choose an offset that moves every port past the other cluster's ports"
                )
    return problems


def validate_plan(plan, ephemeral_range=None, min_worker_ports=64, offset=0) -> list:
    """Every problem with `plan` as a list of messages naming keys, values and the fix; [] means fine.

    `offset` is the offset `plan` was built with. The offset-0 plan is derived as `plan` minus
    `offset` (exact, because build_plan adds it to every port), so callers need not pass it.
    """
    if not isinstance(plan, dict):
        return [f"the port plan must be a dict of key: port, got {plan!r}: build it with build_plan()"]
    problems, good = _type_problems(plan)
    worker, range_ok = _worker_problems(good, int(min_worker_ports))
    problems.extend(worker)
    problems.extend(_overlap_problems(good, range_ok))
    if ephemeral_range is not None:
        problems.extend(_ephemeral_problems(good, range_ok, ephemeral_range))
    if offset:
        problems.extend(_offset_problems(good, range_ok, _to_int("offset", offset)))
    return problems


def _role_keys(role):
    _check_role(role)
    return [k for k in DEFAULT_PORTS if k not in STORE_KEYS and (role == "head" or k not in HEAD_ONLY)]


def role_ports(plan, role) -> dict:
    """The plan keys that apply to `role` ('head' or 'worker'), name -> port, worker range included."""
    return {key: plan[key] for key in _role_keys(role)}


def _normalise_flag(flag):
    return flag if flag.startswith("--") else "--" + flag


def ray_start_args(plan, role, supported_flags=None) -> tuple:
    """(`ray start` port arguments as '--flag=value', plan keys dropped because the installed Ray lacks the flag).

    The worker range is kept or dropped as a pair: half a range would combine with Ray's default
    for the other end and could make min > max.
    """
    keys = [k for k in _role_keys(role) if k in FLAGS]
    if supported_flags is None:
        supported = set(FLAGS.values())
    else:
        supported = {_normalise_flag(f) for f in supported_flags}
    dropped = [k for k in keys if FLAGS[k] not in supported]
    if any(k in dropped for k in WORKER_RANGE):
        dropped = [k for k in keys if k in dropped or k in WORKER_RANGE]
    args = [f"{FLAGS[k]}={int(plan[k])}" for k in keys if k not in dropped]
    return args, dropped


def env_vars(plan, role) -> dict:
    """Environment for ports Ray reads only from the environment (head only); {} for workers."""
    return {ENV_ONLY[k]: str(plan[k]) for k in _role_keys(role) if k in ENV_ONLY}


def firewall_ports(plan, role) -> list:
    """What the firewall opens for `role`: [{'name', 'port' (string), 'proto'}], sorted by port."""
    rules = [{"name": k, "port": str(plan[k]), "proto": "tcp"} for k in _role_keys(role) if k not in WORKER_RANGE]
    lo, hi = plan["min_worker"], plan["max_worker"]
    # Older nft rejects "10002-10002" ("Range has zero or negative size"): write one port plainly.
    rules.append({"name": "worker", "port": str(lo) if lo == hi else _range_text(lo, hi), "proto": "tcp"})
    rules.sort(key=lambda r: int(r["port"].split("-")[0]))
    return rules


def store_firewall_ports(plan) -> list:
    """What the firewall of the GCS store host opens, to the head(s) only: [{'name', 'port', 'proto'}]."""
    return [{"name": k, "port": str(plan[k]), "proto": "tcp"} for k in DEFAULT_PORTS if k in STORE_KEYS]


def all_ports(plan, role) -> set:
    """Every single port `role` listens on, the worker range expanded."""
    keys = _role_keys(role)
    ports = {plan[k] for k in keys if k not in WORKER_RANGE}
    ports.update(range(plan["min_worker"], plan["max_worker"] + 1))
    return ports


def _option_lines(text):
    """Lines of click's option list that declare options (not wrapped help text)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.strip().lower() == "options:":
            lines = lines[i + 1 :]
            break
    indent = None
    for line in lines:
        stripped = line.lstrip()
        if not stripped.startswith("-"):
            continue
        this = len(line) - len(stripped)
        # Declarations share the shallowest indent; wrapped help is indented further.
        if indent is None:
            indent = this
        if this == indent:
            yield stripped


def parse_ray_start_help(text) -> set:
    """The set of '--long-option' names declared in `ray start --help` (click format)."""
    flags = set()
    for line in _option_lines(text or ""):
        # Click puts at least two spaces between the declaration and its help text.
        declaration = re.split(r"\s{2,}", line, maxsplit=1)[0]
        flags.update(_LONG_OPT_RE.findall(declaration))
    return flags


def parse_port_range(text) -> tuple:
    """(lo, hi) from /proc/sys/net/ipv4/ip_local_port_range content such as '32768\\t60999\\n'."""
    fields = (text or "").split()
    # str.isdigit() also accepts non-ASCII digits; the kernel writes ASCII only.
    if len(fields) != 2 or not all(_DIGITS_RE.match(f) for f in fields):
        raise PortPlanError(f"cannot parse ip_local_port_range {text!r}: expected two port numbers")
    lo, hi = int(fields[0]), int(fields[1])
    if not 0 < lo <= hi <= PORT_MAX:
        raise PortPlanError(f"ip_local_port_range {text!r} is not a valid range 1..{PORT_MAX} with low <= high")
    return lo, hi


def node_plan(overrides, offset=0, min_worker_ports=64, range_path="/proc/sys/net/ipv4/ip_local_port_range", plan=None):
    """The plan on a node: (plan, problems), checked against this node's ephemeral range.

    ``plan`` is the plan the controller computed and validated once for the run (validate_inventory);
    it is taken as data, its shape and values checked again but not derived from ``overrides`` a second
    time. Without it, the plan is built here from ``overrides`` and ``offset``, for a module called on
    its own. Raises PortPlanError when the overrides themselves are unusable."""
    if plan is None:
        plan = build_plan(overrides, offset=offset)
    else:
        offset = 0
    text = _read_text(range_path)
    ephemeral = parse_port_range(text) if text else None
    return plan, validate_plan(plan, ephemeral_range=ephemeral, min_worker_ports=min_worker_ports, offset=offset)


def node_plan_or_fail(params, fail):
    """``node_plan`` from a module's ``plan``, or its ``ports``/``port_offset``, and ``min_worker_ports``;
    ``fail(msg, **kw)`` on unusable input or problems on this node, so every module refuses a plan in
    the same words."""
    given = params.get("plan")
    if given is not None and (params["ports"] or params["port_offset"]):
        return fail(
            "plan and ports/port_offset were both given: pass the computed plan alone (the role does), "
            "or only the overrides and the offset for the module to build it"
        )
    try:
        plan, errors = node_plan(params["ports"], params["port_offset"], params["min_worker_ports"], plan=given)
    except PortPlanError as exc:
        return fail("invalid port plan: %s" % exc)
    if errors:
        return fail("invalid port plan on this node: " + "; ".join(errors), errors=errors)
    return plan


def _listening_inodes(ports, proc_root):
    """port -> set of socket inodes LISTENing on it, from net/tcp and net/tcp6."""
    found = {}
    for name in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc_root, "net", name)) as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue  # no IPv6 (or no IPv4) in this kernel/namespace
        for row in rows:
            fields = row.split()
            if len(fields) < 10 or fields[3] != _TCP_LISTEN:
                continue
            try:
                port = int(fields[1].rsplit(":", 1)[1], 16)
                inode = int(fields[9])
            except (IndexError, ValueError):
                continue
            if port in ports:
                found.setdefault(port, set()).add(inode)
    return found


def _read_text(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")
    except OSError:
        return None


def _socket_owners(inodes, proc_root):
    """inode -> list of pids holding it, from /proc/<pid>/fd symlinks; unreadable pids are skipped."""
    owners = {}
    try:
        pids = [p for p in os.listdir(proc_root) if p.isdigit()]
    except OSError:
        return owners
    for pid in pids:
        fd_dir = os.path.join(proc_root, pid, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # vanished, or another user's process without privilege
        for fd in fds:
            try:
                match = _SOCKET_RE.match(os.readlink(os.path.join(fd_dir, fd)))
            except OSError:
                continue  # fd closed or process exited mid-scan
            if match and int(match.group(1)) in inodes:
                owners.setdefault(int(match.group(1)), set()).add(int(pid))
    return owners


def _owner_info(pid, proc_root):
    comm = _read_text(os.path.join(proc_root, str(pid), "comm"))
    cmdline = _read_text(os.path.join(proc_root, str(pid), "cmdline"))
    return {
        "pid": pid,
        "comm": comm.strip() if comm else "unknown",
        "cmdline": " ".join(a for a in (cmdline or "").split("\0") if a),
    }


def find_listeners(ports, proc_root="/proc") -> dict:
    """port -> [{'pid', 'comm', 'cmdline'}] for each requested port a TCP socket LISTENs on.

    Ports nobody listens on are absent. An owner that cannot be found (another user's process
    without privilege, or a race) is reported as {'pid': None, 'comm': 'unknown', 'cmdline': ''}.
    """
    wanted = {int(p) for p in ports}
    by_port = _listening_inodes(wanted, proc_root)
    if not by_port:
        return {}
    all_inodes = set().union(*by_port.values())
    owners = _socket_owners(all_inodes, proc_root)
    result = {}
    for port, inodes in sorted(by_port.items()):
        pids = set()
        unknown = False
        for inode in inodes:
            pids.update(owners.get(inode, ()))
            unknown = unknown or inode not in owners
        entries = [_owner_info(pid, proc_root) for pid in sorted(pids)]
        if unknown:
            entries.append({"pid": None, "comm": "unknown", "cmdline": ""})
        result[port] = entries
    return result


def describe_listener(port, owners) -> str:
    """One line naming who holds `port`, e.g. 'port 8265 is already bound by redis-server (pid 123)'."""
    names = []
    for owner in owners or []:
        if owner.get("pid") is None:
            names.append("an unknown process (not visible to this user; run as root to name it)")
        else:
            names.append(f"{owner.get('comm') or 'unknown'} (pid {owner['pid']})")
    if not names:
        names = ["an unknown process"]
    return f"port {int(port)} is already bound by {', '.join(names)}"
