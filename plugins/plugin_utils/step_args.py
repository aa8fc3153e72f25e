# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The arguments of each role step, built from the task's variables (controller only, pure).

The role's vars/main.yml names each dict once (``raygate_node_args``, ``raygate_firewall_args``,
...) and takes it from the ``raygate.cluster.step_args`` lookup, which hands the step's builder here
an accessor of the task's variables: ``v[name]`` (the templated value, KeyError when undefined),
``name in v``. Rules kept from the Jinja they replace: an optional option that is empty is left out
of the dict (not set to omit); ``int`` and ``bool`` convert as Jinja's filters do; the controller's
TLS files are read (``read(path)``) only by a start that needs them.

``READS[step]`` lists every variable a step reads: the lookup lets a builder read no other
(tools/entry_specs.py counts them as read by whoever uses the step's variable).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp
from ansible_collections.raygate.cluster.plugins.module_utils.node import labels as nl

# Read as they are, never templated: Ansible's own, and templating hostvars would render every host.
RAW = ("hostvars", "groups", "inventory_hostname", "ansible_run_tags", "ansible_skip_tags",
       "ansible_play_hosts", "ansible_play_hosts_all")  # fmt: skip

_TRUE = ("yes", "on", "1", "true", "y", "t")


class StepArgsError(ValueError):
    """A step the lookup does not know, or a variable its table does not list."""


def as_bool(value):
    """Jinja's ``| bool`` as Ansible defines it."""
    if isinstance(value, bool):
        return value
    if value is None:
        return False
    if isinstance(value, str):
        return value.strip().lower() in _TRUE
    return value == 1


def as_int(value):
    """Jinja's ``| int``: an int, else the int of a float's text, else 0."""
    if isinstance(value, bool):
        return int(value)
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def as_float(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _opt(v, name, default=None):
    return v[name] if name in v else default


def _put(args, key, value):
    """``key: "{{ value or omit }}"``: left out when empty."""
    if value:
        args[key] = value


def validated(v):
    """validate_inventory's answer, kept as a fact of localhost, or {}."""
    hostvars = v["hostvars"]
    try:
        local = hostvars["localhost"]
    except KeyError:
        return {}
    found = local["raygate_validated"] if "raygate_validated" in local else None
    return found if isinstance(found, Mapping) else {}


def validated_plan(v):
    plan = (validated(v).get("cluster") or {}).get("plan")
    return plan if isinstance(plan, Mapping) else None


def cluster_addresses(v):
    """Every cluster node's address (validated as IPs on the controller), [] before validation."""
    found = validated(v)
    return [node["ip"] for node in found["cluster"]["nodes"]] if found else []


def plan(v, read=None):
    """The validated plan (the whole cluster's), else this host's ports and offset made a plan."""
    return validated_plan(v) or _own_plan(v["raygate_ports"], v["raygate_port_offset"])


def _own_plan(ports, offset):
    return pp.build_plan(ports or {}, offset=0 if offset in (None, "") else as_int(offset))


def install_args(v, read=None):
    args = {
        "version": v["raygate_ray_version"],
        "extras": v["raygate_ray_extras"],
        "python": v["raygate_python"],
        "base_dir": v["raygate_base_dir"],
    }
    _put(args, "wheelhouse", v["raygate_wheelhouse"])
    _put(args, "index_url", v["raygate_index_url"])
    _put(args, "requirements", v["raygate_requirements"])
    args["installer"] = v["raygate_installer"]
    # upgrade.yml installs side by side first and switches the current link later.
    args["set_current"] = _opt(v, "_raygate_install_set_current", True)
    if v["raygate_user"] != "root":
        args["service_user"] = v["raygate_user"]
    args["service_user_groups"] = v["raygate_user_groups"]
    if v["raygate_runtime"] == "container":
        # The registry's password is no part of it: the tasks give it apart, masked (registry_password).
        args["runtime"] = "container"
        args["engine"] = v["raygate_container_engine"]
        args["image"] = v["raygate_image"]
        args["image_allow_tag"] = as_bool(v["raygate_image_allow_tag"])
        _put(args, "image_archive", v["raygate_image_archive"])
        _put(args, "image_archive_sha256", v["raygate_image_archive_sha256"])
        _put(args, "registry_username", v["raygate_image_registry_username"])
        args["registry_tls_verify"] = as_bool(v["raygate_image_registry_tls_verify"])
        args["run_args"] = _container_run_args(v)
    return args


def _container_run_args(v):
    """What every `run` of the engine gets besides the image: the limits, then the site's own."""
    args = []
    for limit in v["raygate_container_ulimits"]:
        args += ["--ulimit", limit]
    return args + list(v["raygate_container_run_args"])


def _node_container_args(v):
    if v["raygate_runtime"] != "container":
        return {}
    # The node watcher asks the head from inside the container: its script and library, at their paths.
    # Always mounted (an empty directory until the watcher comes), so turning the watcher on or off is no
    # new configuration: the running container already sees it.
    return {
        "container_mounts": [v["raygate_node_check_dir"]],
        "runtime": "container",
        "engine": v["raygate_container_engine"],
        "image": v["raygate_image"],
        "gpu_devices": v["raygate_container_gpus"],
        "container_ulimits": v["raygate_container_ulimits"],
        "container_run_args": v["raygate_container_run_args"],
        "container_ipc": v["raygate_container_ipc"],
    }


def status_labels(v):
    """The Ray node labels of a node that passed the gate in this run (health_labels); None (left out)
    for a node the gate did not check now, so it keeps what it has; {} for one the gate failed now and
    for every node with raygate_health_labels off. _raygate_node_status_labels: a task's own choice."""
    if "_raygate_node_status_labels" in v:
        return v["_raygate_node_status_labels"]
    report = _opt(v, "raygate_health") or {}
    host = v["inventory_hostname"]
    if not as_bool(v["raygate_health_labels"]) or host in (report.get("unhealthy") or {}):
        return {}
    checked = _opt(v, "raygate_gate_status", "") == "checked"
    fingerprint = (_opt(v, "raygate_gpu_health") or {}).get("fingerprint_hash")
    if fingerprint is not None and not isinstance(fingerprint, str):
        raise StepArgsError("health labels: fingerprint_hash must be a string, not %r" % (fingerprint,))
    return nl.from_report(report, host, checked, fingerprint or None) or None


def node_args(v, read):
    """ray_node's options. ``read(path)``: a controller file's text, called only by a start with TLS."""
    args = {
        "role": v["raygate_node_role"],
        "state": v["_raygate_node_state"],
        "node_ip": v["raygate_node_address"],
        "head_ip": v["raygate_head_address"],
        "venv": "%s/current" % v["raygate_base_dir"],
        "plan": v["raygate_plan"],
        "min_worker_ports": as_int(v["raygate_min_worker_ports"]),
    }
    for key in ("num_cpus", "num_gpus", "memory"):
        if "raygate_" + key in v:
            args[key] = v["raygate_" + key]
    if as_int(v["raygate_object_store_memory"]) > 0:
        args["object_store_memory"] = v["raygate_object_store_memory"]
    args["resources"] = v["raygate_resources"]
    args["labels"] = v["raygate_labels"]
    labels = status_labels(v)
    if labels is not None:
        args["status_labels"] = labels
    _put(args, "temp_dir", v["raygate_temp_dir"])
    args["dashboard_proxy"] = v["raygate_dashboard"]["proxy"]
    _put(args, "dashboard_proxy_cert", v["raygate_dashboard_tls_cert"])
    _put(args, "dashboard_proxy_key", v["raygate_dashboard_tls_key"])
    args["dashboard_proxy_binary"] = v["raygate_dashboard_proxy_binary"]
    args["auth"] = v["raygate_auth"]
    args["auth_token_file"] = v["raygate_node_token_path"]
    args["head_wait"] = "gcs"
    # Removed with state absent: the health textfile goes in the same step as the node.
    textfile = v["raygate_health_textfile"]
    args["extra_files"] = [textfile] if textfile else []
    for key in ("env_files", "env", "supervisor", "user"):
        args[key] = v["raygate_" + key]
    args["tls"] = as_bool(v["raygate_tls"])
    args["tls_dir"] = v["raygate_node_tls_dir"]
    # Only a start reads the controller's files (tls.yml makes them); the key goes as node.yml's tls_key.
    if as_bool(v["raygate_node_tls_needed"]):
        args["tls_ca_cert"] = read(v["raygate_tls_ca_path"])
        args["tls_cert"] = read(v["raygate_node_tls_base"] + ".crt")
    args["restart_on_change"] = v["raygate_restart_on_change"]
    args["python_version_match_level"] = v["raygate_python_version_match_level"]
    args["start_timeout"] = as_int(v["raygate_start_timeout"])
    args["drain"] = _opt(v, "_raygate_node_drain", False)
    args["drain_timeout"] = as_int(v["raygate_drain_timeout"])
    # start.yml: what the head's GCS says of a running worker (false: it starts again).
    if "_raygate_node_member" in v:
        args["member"] = v["_raygate_node_member"]
    args["rotate_token"] = as_bool(v["raygate_rotate_token"])
    args.update(_node_gcs_args(v))
    args.update(_node_container_args(v))
    return args


def gcs(v, read=None):
    """GCS fault tolerance's values (docs/GCS-FT.md): ``raygate_gcs``. Managed (raygate_gcs_ft redis
    and no raygate_gcs_redis_address): raygate runs the Redis on the first host of
    raygate_gcs_store_group, else on the head. No secret in it: the password and the cluster id are
    read apart, only where needed (raygate_gcs_password, raygate_gcs_namespace_prefix)."""
    ft, external = v["raygate_gcs_ft"], v["raygate_gcs_redis_address"] or ""
    managed = ft == "redis" and not external
    stores = v["groups"].get(v["raygate_gcs_store_group"]) or []
    store = stores[0] if stores else v["raygate_head_host"]
    hostvars = v["hostvars"]
    own = hostvars[store] if store in hostvars else {}
    address = store
    for name in ("ansible_host", "raygate_node_ip"):
        address = own[name] if name in own else address
    endpoint = external
    if managed:
        endpoint = "%s:%s" % ("[%s]" % address if ":" in address else address, v["raygate_plan"]["gcs_redis"])
    config, state = v["raygate_gcs_redis_config_dir"], _opt(v, "_raygate_node_state")
    return {
        "managed": managed,
        "store_host": store,
        "store_address": address,
        "endpoint": endpoint,
        # The managed Redis knows only its default user (requirepass); an external one may use an ACL user.
        "username": v["raygate_gcs_managed_user"] if managed else v["raygate_gcs_redis_username"],
        # The managed Redis speaks TLS when the cluster does; the user's own Redis when its address is rediss://.
        "redis_tls": (managed and as_bool(v["raygate_tls"])) or external.startswith("rediss://"),
        # Only a head that starts with a Redis needs the password.
        "password_needed": ft == "redis" and v["raygate_node_role"] == "head" and state == "started",
        "conf": config + "/redis.conf",
        "unit_file": "/etc/systemd/system/%s.service" % v["raygate_gcs_redis_unit"],
        "pidfile": v["raygate_gcs_redis_run_dir"] + "/redis.pid",
        "tls_dir": config + "/tls",
    }


def _node_gcs_args(v):
    ft = v["raygate_gcs_ft"]
    args = {"gcs_ft": ft}
    g = v["raygate_gcs"]
    if ft == "redis":
        args["redis_address"] = g["endpoint"]
        args["redis_username"] = g["username"]
        args["redis_tls"] = g["redis_tls"]
    # Only a start reads the cluster id (a teardown from another controller may lack its file).
    if g["password_needed"]:
        args["storage_namespace"] = v["raygate_gcs_namespace_prefix"]
    args["gcs_storage_path"] = v["raygate_gcs_rocksdb_path"]
    if ft != "none":
        args["gcs_reconnect_timeout"] = as_int(v["raygate_gcs_reconnect_timeout"])
    return args


def env_args(v, read=None):
    args = {
        "state": v["_raygate_env_state"],
        "path": v["raygate_nccl_env_file"],
        "fabric": v["raygate_nccl_fabric"],
        "sysfs_root": v["raygate_nccl_sysfs_root"],
        "node_ip": v["raygate_node_address"],
    }
    _put(args, "socket_ifname", v["raygate_nccl_socket_ifname"])
    for key in ("require_gdr", "force_net", "env", "allow_names", "conf", "conf_path"):
        name = "nccl_" + key if key.startswith("conf") else key
        args[name] = v["raygate_nccl_" + key]
    return args


# The firewall options a member outside the run takes from its own inventory (else this host's value).
FIREWALL_OWN = ("backend", "admin_sources", "admin_ports", "allow_any_source", "deny_action", "table", "rules_file")


def firewall_args(v, read=None):
    """ray_firewall's options for _raygate_firewall_host: this host, or a member outside the run
    (firewall_member.yml). Role variables template in the context of the host running the task, so
    a member's own values come from hostvars (its inventory and facts, no role defaults): each option
    is the member's value when its inventory sets one, else this host's (the role default, unless
    this host's own inventory changes it)."""
    host, me = v["_raygate_firewall_host"], v["inventory_hostname"]
    own = {} if host == me else v["hostvars"][host]

    def opt(name):
        return own[name] if name in own else v[name]

    args = {"state": v["_raygate_firewall_state"], "backend": opt("raygate_firewall_backend")}
    args["role"] = "head" if host in v["groups"].get(v["raygate_head_group"], []) else "worker"
    # The validated plan is the whole cluster's; unvalidated, a member's own overrides make its plan.
    if validated_plan(v) is not None or host == me:
        args["plan"] = v["raygate_plan"]
    else:
        args["plan"] = _own_plan(opt("raygate_ports"), opt("raygate_port_offset"))
    args["min_worker_ports"] = as_int(opt("raygate_min_worker_ports"))
    # remove_node.yml excludes the addresses of the nodes it takes out (_raygate_firewall_exclude).
    exclude = _opt(v, "_raygate_firewall_exclude") or []
    sources = opt("raygate_firewall_sources") or cluster_addresses(v)
    args["sources"] = [s for i, s in enumerate(sources) if s not in exclude and s not in sources[:i]]
    for key in FIREWALL_OWN[1:]:
        args[key] = opt("raygate_firewall_" + key)
    _put(args, "zone", opt("raygate_firewall_zone"))
    # The managed GCS Redis's port, on its host only, open to the head only.
    g = v["raygate_gcs"]
    store = g["managed"] and host == g["store_host"]
    args["gcs_store"] = store
    args["gcs_store_sources"] = [v["raygate_head_address"]] if store else []
    # Prometheus scrapers: the metric ports of the plan and node_exporter's, nothing else.
    args["prometheus_sources"] = opt("raygate_prometheus_sources")
    args["node_exporter_port"] = as_int(opt("raygate_prometheus_node_exporter_port"))
    # The role default follows the supervisor (systemd: on), so a member's own supervisor counts.
    if "raygate_firewall_boot" in own:
        boot = own["raygate_firewall_boot"]
    elif "raygate_supervisor" in own:
        boot = own["raygate_supervisor"] == "systemd"
    else:
        boot = v["raygate_firewall_boot"]
    args["boot"] = as_bool(boot)
    return args


def watch_settings(v, read=None):
    """The node watcher's settings (node_watch writes them to /etc/raygate/watch.json; no secret in
    them: the watcher reads the token and the TLS files through the Ray node's own environment files)."""
    host, role, plan_ = v["inventory_hostname"], v["raygate_node_role"], v["raygate_plan"]
    redis = None
    g = v["raygate_gcs"]
    if g["managed"] and role == "head":
        redis = {"host": g["store_address"], "port": as_int(plan_["gcs_redis"])}
    return {
        "host": host,
        "role": role,
        "node_ip": v["raygate_node_address"],
        "head_ip": v["raygate_head_address"],
        "gcs_port": as_int(plan_["gcs"]),
        "venv": "%s/current" % v["raygate_base_dir"],
        "env_files": ["/etc/raygate/ray.env"] + list(v["raygate_env_files"]),
        "user": v["raygate_user"],
        "supervisor": v["raygate_supervisor"],
        "unit": "raygate-ray",
        "lib": v["raygate_node_check_dir"],
        "check_config": v["raygate_node_check_config"],
        "check_timeout": as_int(v["raygate_health_timeout"]),
        "state_dir": v["raygate_watch_state_dir"],
        "textfile": v["raygate_watch_textfile"],
        "interval": as_int(v["raygate_watch_interval"]),
        "deadline": as_int(v["raygate_watch_drain_deadline"]),
        "breaker": {
            "window": as_int(v["raygate_watch_breaker_window"]),
            "threshold": as_int(v["raygate_health_breaker_threshold"]),
            "min_nodes": as_int(v["raygate_health_breaker_min_nodes"]),
        },
        "slurm": v["raygate_slurm"],
        "slurm_node": _opt(v, "raygate_slurm_node_name") or host,
        "redis": redis,
        "container": (
            {"engine": v["raygate_container_engine"], "name": "raygate-ray"}
            if v["raygate_runtime"] == "container"
            else None
        ),
    }


def watch_common_args(v, read=None):
    return {
        "supervisor": v["raygate_supervisor"],
        "script": "%s/raygate_node_watch.py" % v["raygate_node_check_dir"],
        "state_dir": v["raygate_watch_state_dir"],
        "textfile": v["raygate_watch_textfile"],
    }


def gpu_health_args(v, read=None):
    """gpu_health's options (gate.yml); optional ones left out when unset."""
    h = "raygate_health_"
    args = {
        "expected_gpus": as_int(_opt(v, "raygate_num_gpus")),
        "kernel_log": v[h + "kernel_log"],
        "xid_window": as_int(v[h + "xid_window"]),
        "kernel_allow": v[h + "kernel_allow"],
        "kernel_deny": v[h + "kernel_deny"],
        "dcgm_diag_level": as_int(v[h + "dcgm_diag_level"]),
        "fabric": v["raygate_nccl_fabric"],
        "require_gdr": as_bool(v[h + "require_gdr"]),
        "fabric_error_thresholds": v[h + "fabric_error_thresholds"],
        "fabric_window": as_int(v[h + "fabric_window"]),
        "sysfs_root": v[h + "sysfs_root"],
        "service_user": v["raygate_user"],
        "timeout": as_int(v[h + "timeout"]),
        "query_timeout": as_int(v[h + "query_timeout"]),
    }
    for key in ("driver_version", "cuda_version", "xid_fatal", "xid_warn", "fabric_state_file"):
        _put(args, key, v[h + key])
    for key in ("expected_ports", "expected_port_rate_gbps"):
        if as_int(v[h + key]) > 0:
            args[key] = v[h + key]
    if v[h + "textfile"]:
        args["textfile_dir"] = os.path.dirname(v[h + "textfile"])
    return args


def _nccl_test_args(v):
    """What the single-node and the pair nccl-tests share."""
    args = {
        "binary": v["raygate_health_nccl_binary"],
        "gpus": as_int(_opt(v, "raygate_num_gpus")),
        "max_bytes": v["raygate_health_nccl_max_bytes"],
    }
    _put(args, "gpu_model", v["raygate_health_gpu_model"])
    args.update(env_file=v["raygate_nccl_env_file"], env_file_optional=True)
    args["timeout"] = as_int(v["raygate_health_timeout"])
    return args


def nccl_single_args(v, read=None):
    args = _nccl_test_args(v)
    args.update(
        mode="single",
        fabric=v["raygate_nccl_fabric"],
        sysfs_root=v["raygate_health_sysfs_root"],
        fabric_error_thresholds=v["raygate_health_fabric_error_thresholds"],
    )
    if as_float(v["raygate_health_nccl_min_busbw"]) > 0:
        args["min_busbw"] = v["raygate_health_nccl_min_busbw"]
    return args


def nccl_pair_args(v, read=None):
    args = _nccl_test_args(v)
    args.update(mode="pairs", mpirun=v["raygate_health_mpirun"], mpirun_args=v["raygate_health_mpirun_args"])
    if as_float(v["raygate_health_nccl_pair_min_busbw"]) > 0:
        args["min_busbw"] = v["raygate_health_nccl_pair_min_busbw"]
    return args


# health_report's options that are one role variable as it is, or through int or bool.
HEALTH_REPORT_THROUGH = {
    "pair_tests": ("raygate_health_nccl_pairs", as_bool),
    "min_healthy": ("raygate_min_healthy_nodes", as_int),
    "dest": ("raygate_health_report_dir", None),
    "valid_for": ("raygate_health_valid_for", as_int),
    "fail_on_warn": ("raygate_health_fail_on_warn", as_bool),
    "fleet_drift": ("raygate_health_fleet_drift", None),
    "fleet_expect": ("raygate_health_fleet_expect", None),
    "breaker_threshold": ("raygate_health_breaker_threshold", as_int),
    "breaker_min_nodes": ("raygate_health_breaker_min_nodes", as_int),
}


def health_report_args(v, read=None):
    hosts = list(v["ansible_play_hosts"])
    args = {
        "hosts": hosts,
        "answers": v["raygate_answers"],
        "head": v["raygate_head_host"],
        "head_address": v["raygate_head_address"],
        "left_hosts": [h for h in v["ansible_play_hosts_all"] if h not in hosts],
    }
    for option, (name, convert) in HEALTH_REPORT_THROUGH.items():
        args[option] = convert(v[name]) if convert else v[name]
    return args


def _selected(v, tags):
    """Whether --tags/--skip-tags select a task tagged ``tags``, as Ansible's tag selection would
    (a task without the always tag; every task of the role's configure steps is tagged)."""
    run, skip = set(v["ansible_run_tags"]), set(v["ansible_skip_tags"])
    return bool(run & {"all", "tagged"} or run & set(tags)) and not skip & set(tags)


def _done(v, step):
    return as_bool((_opt(v, "_raygate_done") or {}).get(step, False))


def configure_install(v, read=None):
    """configure.yml's install: where the preflight predicted a change and the install tag is selected."""
    return not _done(v, "install") and _selected(v, ["install"])


CONFIGURE_TAGS = ("configure", "nccl", "firewall")


def configure_env(v, read=None):
    return as_bool(v["raygate_nccl_manage"]) and not _done(v, "env") and _selected(v, CONFIGURE_TAGS)


def configure_firewall(v, read=None):
    return as_bool(v["raygate_firewall_manage"]) and not _done(v, "firewall") and _selected(v, CONFIGURE_TAGS)


def dashboard(v, read=None):
    """The dashboard and jobs API (``raygate_dashboard``): over HTTPS only (docs/SECURITY.md) when
    ``proxy``: nginx on the head's address and the plan's dashboard port, in front of Ray's dashboard
    on the head's loopback (ray_node dashboard_proxy). ``url`` is what users reach; ``api_url`` what
    the role's own calls use, delegated to the head: Ray's dashboard itself, on its loopback when proxied."""
    proxy = as_bool(v["raygate_dashboard_https"]) and (
        as_bool(v["raygate_tls"]) or len(v["raygate_dashboard_tls_cert"] or "") > 0
    )
    port = v["raygate_plan"]["dashboard"]
    url = "%s://%s:%s" % ("https" if proxy else "http", v["raygate_head_address"], port)
    return {"proxy": proxy, "url": url, "api_url": "http://127.0.0.1:%s" % port if proxy else url}


def removal(v, read=None):
    """remove_node.yml's nodes (``raygate_removal``): the hosts it takes out (raygate_remove as a list
    or "a,b", each once, in order) and their validated addresses ([] before validation)."""
    given = v["raygate_remove"]
    names = given.split(",") if isinstance(given, str) else list(given or [])
    hosts = []
    for name in (str(n).strip() for n in names):
        if name and name not in hosts:
            hosts.append(name)
    found = validated(v)
    nodes = found["cluster"]["nodes"] if found else []
    return {"hosts": hosts, "addresses": [n["ip"] for n in nodes if n["name"] in hosts]}


def configure(v, read=None):
    """configure.yml's three steps at once (``_raygate_configure``): {install, env, firewall}."""
    return {"install": configure_install(v), "env": configure_env(v), "firewall": configure_firewall(v)}


def watch_query(v, read=None):
    """node_watch's options to read what the watcher found (watch_query.yml)."""
    return dict(watch_common_args(v), state="query")


def watch_present(v, read=None):
    """node_watch's options to install and run the watcher (watch.yml)."""
    return dict(watch_common_args(v), state="present", settings=watch_settings(v))


def watch_absent(v, read=None):
    """node_watch's options to remove the watcher (node_absent.yml), with what it needed of
    node_check.yml unless raygate_node_check keeps raygate-node-check for Slurm's HealthCheckProgram."""
    command = v["raygate_node_check_bin"]
    also = [v["raygate_node_check_dir"], v["raygate_node_check_config"], command, command + "-slurm"]
    if as_bool(v["raygate_node_check"]):
        also = []
    return dict(watch_common_args(v), state="absent", remove_also=also)


# Each step's builder.
STEPS = {
    "plan": plan,
    "gcs": gcs,
    "ray_install": install_args,
    "ray_node": node_args,
    "nccl_env": env_args,
    "ray_firewall": firewall_args,
    "gpu_health": gpu_health_args,
    "nccl_single": nccl_single_args,
    "nccl_pair": nccl_pair_args,
    "health_report": health_report_args,
    "configure": configure,
    "dashboard": dashboard,
    "removal": removal,
    "watch_query": watch_query,
    "watch_present": watch_present,
    "watch_absent": watch_absent,
}

_NCCL_TEST = ("raygate_health_nccl_binary", "raygate_num_gpus", "raygate_health_nccl_max_bytes",
              "raygate_health_gpu_model", "raygate_nccl_env_file", "raygate_health_timeout")  # fmt: skip
_VALIDATED = ("hostvars",)
_FIREWALL_OPTIONS = tuple("raygate_firewall_" + k for k in FIREWALL_OWN + ("sources", "zone", "boot")) + (
    "raygate_ports", "raygate_port_offset", "raygate_min_worker_ports", "raygate_prometheus_sources",
    "raygate_prometheus_node_exporter_port", "raygate_supervisor")  # fmt: skip

# Every variable each step reads (a builder reading another fails: see StepVariables).
READS = {
    "plan": _VALIDATED + ("raygate_ports", "raygate_port_offset"),
    "gcs": (
        "raygate_gcs_ft",
        "raygate_gcs_redis_address",
        "groups",
        "raygate_gcs_store_group",
        "raygate_head_host",
        "hostvars",
        "raygate_plan",
        "raygate_gcs_redis_config_dir",
        "_raygate_node_state",
        "raygate_gcs_managed_user",
        "raygate_gcs_redis_username",
        "raygate_tls",
        "raygate_node_role",
        "raygate_gcs_redis_unit",
        "raygate_gcs_redis_run_dir",
    ),  # fmt: skip
    "ray_install": (
        "raygate_ray_version",
        "raygate_ray_extras",
        "raygate_python",
        "raygate_base_dir",
        "raygate_wheelhouse",
        "raygate_index_url",
        "raygate_requirements",
        "raygate_installer",
        "_raygate_install_set_current",
        "raygate_user",
        "raygate_user_groups",
        "raygate_runtime",
        "raygate_container_engine",
        "raygate_image",
        "raygate_image_allow_tag",
        "raygate_image_archive",
        "raygate_image_archive_sha256",
        "raygate_image_registry_username",
        "raygate_image_registry_tls_verify",
        "raygate_container_ulimits",
        "raygate_container_run_args",
    ),  # fmt: skip
    "ray_node": (
        "raygate_node_role",
        "_raygate_node_state",
        "raygate_node_address",
        "raygate_head_address",
        "raygate_base_dir",
        "raygate_plan",
        "raygate_min_worker_ports",
        "raygate_num_cpus",
        "raygate_num_gpus",
        "raygate_memory",
        "raygate_object_store_memory",
        "raygate_resources",
        "raygate_labels",
        "_raygate_node_status_labels",
        "raygate_health",
        "inventory_hostname",
        "raygate_health_labels",
        "raygate_gate_status",
        "raygate_gpu_health",
        "raygate_temp_dir",
        "raygate_dashboard",
        "raygate_dashboard_tls_cert",
        "raygate_dashboard_tls_key",
        "raygate_dashboard_proxy_binary",
        "raygate_auth",
        "raygate_node_token_path",
        "raygate_health_textfile",
        "raygate_env_files",
        "raygate_env",
        "raygate_supervisor",
        "raygate_user",
        "raygate_tls",
        "raygate_node_tls_dir",
        "raygate_node_tls_needed",
        "raygate_tls_ca_path",
        "raygate_node_tls_base",
        "raygate_restart_on_change",
        "raygate_python_version_match_level",
        "raygate_start_timeout",
        "_raygate_node_drain",
        "raygate_drain_timeout",
        "_raygate_node_member",
        "raygate_rotate_token",
        "raygate_gcs_ft",
        "raygate_gcs",
        "raygate_gcs_namespace_prefix",
        "raygate_gcs_rocksdb_path",
        "raygate_runtime",
        "raygate_container_engine",
        "raygate_image",
        "raygate_container_gpus",
        "raygate_container_ulimits",
        "raygate_container_run_args",
        "raygate_container_ipc",
        "raygate_node_check_dir",
        "raygate_gcs_reconnect_timeout",
    ),  # fmt: skip
    "nccl_env": (
        "_raygate_env_state",
        "raygate_nccl_env_file",
        "raygate_nccl_fabric",
        "raygate_nccl_sysfs_root",
        "raygate_node_address",
        "raygate_nccl_socket_ifname",
        "raygate_nccl_require_gdr",
        "raygate_nccl_force_net",
        "raygate_nccl_env",
        "raygate_nccl_allow_names",
        "raygate_nccl_conf",
        "raygate_nccl_conf_path",
    ),  # fmt: skip
    "ray_firewall": _VALIDATED
    + _FIREWALL_OPTIONS
    + (
        "_raygate_firewall_host",
        "inventory_hostname",
        "_raygate_firewall_state",
        "groups",
        "raygate_head_group",
        "raygate_plan",
        "_raygate_firewall_exclude",
        "raygate_gcs",
        "raygate_head_address",
    ),  # fmt: skip
    "_watch_settings": (
        "raygate_runtime",
        "raygate_container_engine",
        "inventory_hostname",
        "raygate_node_role",
        "raygate_plan",
        "raygate_gcs",
        "raygate_node_address",
        "raygate_head_address",
        "raygate_base_dir",
        "raygate_env_files",
        "raygate_user",
        "raygate_supervisor",
        "raygate_node_check_dir",
        "raygate_node_check_config",
        "raygate_health_timeout",
        "raygate_watch_state_dir",
        "raygate_watch_textfile",
        "raygate_watch_interval",
        "raygate_watch_drain_deadline",
        "raygate_watch_breaker_window",
        "raygate_health_breaker_threshold",
        "raygate_health_breaker_min_nodes",
        "raygate_slurm",
        "raygate_slurm_node_name",
    ),  # fmt: skip
    "_watch_common": (
        "raygate_supervisor",
        "raygate_node_check_dir",
        "raygate_watch_state_dir",
        "raygate_watch_textfile",
    ),  # fmt: skip
    "gpu_health": ("raygate_num_gpus", "raygate_nccl_fabric", "raygate_user")
    + tuple(
        "raygate_health_" + k
        for k in (
            "kernel_log",
            "xid_window",
            "kernel_allow",
            "kernel_deny",
            "dcgm_diag_level",
            "require_gdr",
            "fabric_error_thresholds",
            "fabric_window",
            "sysfs_root",
            "timeout",
            "query_timeout",
            "driver_version",
            "cuda_version",
            "xid_fatal",
            "xid_warn",
            "fabric_state_file",
            "expected_ports",
            "expected_port_rate_gbps",
            "textfile",
        )
    ),  # fmt: skip
    "nccl_single": _NCCL_TEST
    + (
        "raygate_nccl_fabric",
        "raygate_health_sysfs_root",
        "raygate_health_fabric_error_thresholds",
        "raygate_health_nccl_min_busbw",
    ),  # fmt: skip
    "nccl_pair": _NCCL_TEST
    + ("raygate_health_mpirun", "raygate_health_mpirun_args", "raygate_health_nccl_pair_min_busbw"),  # fmt: skip
    "health_report": (
        "ansible_play_hosts",
        "raygate_answers",
        "raygate_head_host",
        "raygate_head_address",
        "ansible_play_hosts_all",
    )
    + tuple(n for n, _c in HEALTH_REPORT_THROUGH.values()),  # fmt: skip
    "configure": (
        "raygate_nccl_manage",
        "raygate_firewall_manage",
        "_raygate_done",
        "ansible_run_tags",
        "ansible_skip_tags",
    ),  # fmt: skip
}
# What the watcher's steps share (inner tables, not steps of their own).
_WATCH_COMMON, _WATCH_SETTINGS = READS.pop("_watch_common"), READS.pop("_watch_settings")
READS["dashboard"] = ("raygate_dashboard_https", "raygate_tls", "raygate_dashboard_tls_cert", "raygate_plan",
                      "raygate_head_address")  # fmt: skip
READS["removal"] = _VALIDATED + ("raygate_remove",)
READS["watch_query"] = _WATCH_COMMON
READS["watch_present"] = tuple(sorted(set(_WATCH_COMMON + _WATCH_SETTINGS)))
READS["watch_absent"] = _WATCH_COMMON + ("raygate_node_check_dir", "raygate_node_check_config",
                                         "raygate_node_check_bin", "raygate_node_check")  # fmt: skip


class StepVariables(Mapping):
    """The variables one step may read, from ``fetch(name)`` (the value; KeyError when undefined) and
    ``defined(name)``, each fetched once. A name outside the step's READS fails."""

    def __init__(self, step, fetch, defined):
        self._allowed = frozenset(READS[step])
        self._fetch, self._defined, self._seen = fetch, defined, {}

    def _check(self, name):
        if name not in self._allowed:
            raise StepArgsError("step_args: %r is not in the variables its step reads (READS)" % name)

    def __getitem__(self, name):
        self._check(name)
        if name not in self._seen:
            self._seen[name] = self._fetch(name)
        return self._seen[name]

    def __contains__(self, name):
        self._check(name)
        return name in self._seen or self._defined(name)

    def __iter__(self):
        return iter(self._allowed)

    def __len__(self):
        return len(self._allowed)


def build(step, fetch, defined, read=None):
    """The arguments of ``step`` (a name of STEPS) from the accessors of the task's variables."""
    if step not in STEPS:
        raise StepArgsError("step_args: no step %r (known: %s)" % (step, ", ".join(sorted(STEPS))))
    return STEPS[step](StepVariables(step, fetch, defined), read)


def from_dict(step, values, read=None):
    """build() over a plain dict of already templated values (the unit tests')."""
    return build(step, values.__getitem__, values.__contains__, read)
