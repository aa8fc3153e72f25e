# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The work of raygate.cluster.ray_node, runnable by its module or as a node_steps step.

``Node`` is the node's lifecycle: it judges what runs, starts Ray, waits for it and stops it. It
composes the parts that own the rest, each in the file named for it: the configuration, its hash
and the record of a start (config.py), the systemd unit (unit.py), the auth token (auth.py), the
GCS store's secrets and environment (gcs_store.py), the labels file (labels_file.py), the `ray
start` command (start_command.py), whether a running session is a working member (session.py),
the drain of a worker (drain.py), the signals that end Ray's processes (stop.py), the account
Ray runs as (run_as.py), its TLS files (tls_files.py) and the head's HTTPS proxy (proxy.py). The
states stopped and absent, which take the node down with these, are in teardown.py.
"""

from __future__ import annotations

import os

from ansible.module_utils.urls import open_url

from ansible_collections.raygate.cluster.plugins.module_utils import files
from ansible_collections.raygate.cluster.plugins.module_utils._runner import DEFAULT_PATH, CommandError, CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp
from ansible_collections.raygate.cluster.plugins.module_utils.node import procs as ray_procs
from ansible_collections.raygate.cluster.plugins.module_utils.node import teardown
from ansible_collections.raygate.cluster.plugins.module_utils.node.auth import AuthToken
from ansible_collections.raygate.cluster.plugins.module_utils.node.config import NodeConfig
from ansible_collections.raygate.cluster.plugins.module_utils.node.container import Container
from ansible_collections.raygate.cluster.plugins.module_utils.node.drain import Drain
from ansible_collections.raygate.cluster.plugins.module_utils.node.gcs_store import GCS_SECRET_FILE, GcsStore
from ansible_collections.raygate.cluster.plugins.module_utils.node.labels_file import LabelsFile
from ansible_collections.raygate.cluster.plugins.module_utils.node.proxy import DashboardProxy
from ansible_collections.raygate.cluster.plugins.module_utils.node.run_as import RunAs
from ansible_collections.raygate.cluster.plugins.module_utils.node.session import Session
from ansible_collections.raygate.cluster.plugins.module_utils.node.start_command import StartCommand
from ansible_collections.raygate.cluster.plugins.module_utils.node.stop import Stopper
from ansible_collections.raygate.cluster.plugins.module_utils.node.tls_files import TlsFiles
from ansible_collections.raygate.cluster.plugins.module_utils.node.unit import Unit
from ansible_collections.raygate.cluster.plugins.module_utils.waiter import wait_for, wait_port

STATE_FILE = "ray-node.json"
FLAGS_FILE = "raygate-start-flags.json"


class Node:
    """One Ray node as ``module.params`` describe it; composes the parts that own its pieces."""

    def __init__(self, module):
        self.module = module
        self.p = module.params
        self.venv_bin = os.path.join(self.p["venv"], "bin")
        env = {"PATH": self.venv_bin + ":" + DEFAULT_PATH, "HOME": os.environ.get("HOME", "/root")}
        self.runner = CommandRunner(timeout=max(self.p["start_timeout"], 60), base_env=env)
        self.ray = os.path.join(self.venv_bin, "ray") if self.p.get("runtime") != "container" else "ray"
        self.state_path = os.path.join(self.p["state_dir"], STATE_FILE)
        # Beside the virtualenv it describes: kept while the venv is, removed with it (purge).
        self.flags_path = os.path.join(os.path.realpath(self.p["venv"]), FLAGS_FILE)
        if self.ray == "ray":  # the image's `ray`: its `ray start` flags per image, in the state dir
            self.flags_path = os.path.join(self.p["state_dir"], FLAGS_FILE)
        self.env_path = os.path.join(self.p["config_dir"], "ray.env")
        self.labels_path = os.path.join(self.p["config_dir"], "labels.yaml")
        self.unit_path = os.path.join(self.p["unit_dir"], self.p["unit_name"] + ".service")
        self.secret_path = os.path.join(self.p["config_dir"], GCS_SECRET_FILE)
        self.session_roots = tuple(r for r in (self.p["temp_dir"], "/tmp/ray") if r)
        self.warnings = []
        self.diff = {"before": "", "after": ""}
        # The parts; each reads the options and runs, fails and warns through this node.
        self.unit = Unit(self)
        self.auth = AuthToken(self)
        self.gcs = GcsStore(self)
        self.labels = LabelsFile(self)
        self.command = StartCommand(self)
        self.drainer = Drain(self)
        self.stopper = Stopper(self)
        self.config = NodeConfig(self)
        self.session = Session(self)
        self.run_as = RunAs(self)
        self.tls = TlsFiles(self)
        self.proxy = DashboardProxy(self)
        self.container = Container(self)

    def fail(self, msg, **kwargs):
        self.module.fail_json(msg=msg, **kwargs)

    def run(self, args, **kwargs):
        try:
            return self.runner.run(args, **kwargs)
        except CommandError as exc:
            self.fail(str(exc))

    # -- the desired configuration ----------------------------------------------------
    def plan(self):
        return pp.node_plan_or_fail(self.p, self.fail)

    # -- what runs now ----------------------------------------------------------------
    def ray_processes(self):
        return ray_procs.ray_processes(session_roots=self.session_roots)

    def head_ip(self):
        return self.p["node_ip"] if self.p["role"] == "head" else self.p["head_ip"]

    # -- state: started ---------------------------------------------------------------
    def started(self):
        """Leave a running node that matches the configuration, else (re)start it; the module's result."""
        labels, status = self.check_start()
        plan = self.plan()
        token_file_changed = self.check_ready()
        env = self.config.env(plan)
        env_all = dict(self.config.file_env(), **env)
        digest = self.config.hash(plan, env_all)
        procs = self.ray_processes()
        raylet = ray_procs.find_daemon(procs, "raylet")
        record = self.config.recorded()
        result = self.start_result(plan, digest)
        kept = self.keep_or_clear(plan, procs, raylet, record, digest, token_file_changed, result)
        if kept is not None:
            return kept
        # Unset, the node starts with the status labels of its last start: a restart (a new head,
        # an upgrade) says nothing new about its state. A stop with status_labels {} forgets them.
        if status is None:
            status = dict((key, value) for key, value in result["status_labels"].items() if key not in labels)
        result["status_labels"] = status
        node_labels = dict(labels, **status)
        if self.module.check_mode:
            return dict(result, changed=True)
        return self.start_ray(plan, result, env, env_all, node_labels, sorted(status))

    def check_start(self):
        """The checks of the options (and that systemd runs here when it is to supervise), before
        the plan; the labels and status labels."""
        p = self.p
        if not p["node_ip"]:
            self.fail("node_ip is required to start a Ray node")
        if p["role"] == "worker" and not p["head_ip"]:
            self.fail("head_ip is required to start a worker")
        labels, status = self.labels.checked()
        self.run_as.user()
        if p["supervisor"] == "systemd" and not files.systemd_booted():
            self.fail(
                "supervisor is systemd but systemd is not the init system here (no %s); set supervisor (the role "
                "variable raygate_supervisor) to process" % files.SYSTEMD_RUNTIME_DIR
            )
        return labels, status

    def check_ready(self):
        """What a start needs (GCS options, Ray or its image, the token); True when a secret file changes."""
        problems = self.gcs.problems()
        if problems:
            self.fail("GCS fault tolerance: " + "; ".join(problems))
        if self.container.on():
            self.container.check(self.module.check_mode)
        elif not os.access(self.ray, os.X_OK) and not self.module.check_mode:
            self.fail("Ray is not installed at %s; run raygate.cluster.ray_install first" % self.p["venv"])
        self.auth.check_given()
        self.tls.check(self.module.check_mode)
        self.proxy.check()
        token_file_changed = self.auth.write(check_mode=True)
        token_file_changed = self.gcs.write_secret(check_mode=True) or token_file_changed
        token_file_changed = self.tls.write(check_mode=True) or token_file_changed
        self.auth.check_present(self.module.check_mode)
        return token_file_changed

    def start_result(self, plan, digest):
        """The result's start: what the node is to be, and the status labels it carries now."""
        p = self.p
        result = {"config_hash": digest, "gcs_address": "%s:%s" % (self.head_ip(), plan["gcs"]), "restarted": False}
        result["user"] = p["user"]
        result["tls"] = self.tls.digest()
        result["new_session"] = False
        storage = self.gcs.described()
        if storage is not None:
            result["gcs_storage"] = storage
        # Status labels are no part of the configuration: never a reason to restart. Ray cannot
        # relabel a running node, so one that is left alone keeps those it was started with.
        result["status_labels"] = self.labels.carried_status()
        if p["role"] == "head":
            result["dashboard_url"] = self.proxy.dashboard_url(plan)
        return result

    def keep_or_clear(self, plan, procs, raylet, record, digest, token_file_changed, result):
        """What runs here: left alone (returns the result), or stopped for a new start (returns None)."""
        rotating = self.auth.drift(procs)
        renewing = bool(raylet) and (self.tls.renewed() or bool(self.container.image_changed(record)))
        dead = None if rotating or renewing else self.session.dead(plan, procs, raylet)
        settled = raylet and not (dead or rotating or renewing)
        if settled and record.get("config_hash") == digest and self.unit.supervised_ok():
            # Same token and certificate (in the digest, renewed), only a file differs (mode, newline).
            if token_file_changed and not self.module.check_mode:
                self.auth.write(check_mode=False)
                self.gcs.write_secret(check_mode=False)
                self.tls.write(check_mode=False)
            result = dict(result, changed=token_file_changed, pid=raylet["pid"])
            return self.proxy.follow(plan, result)
        if dead or rotating or renewing:
            # What runs here is no working member (see Session.dead), runs on the old token, or on a
            # certificate that was renewed: clear it, whatever restart_on_change says, and start again.
            self.warnings.append(dead or restart_reason(rotating, raylet and self.container.image_changed(record)))
        elif not (raylet or procs):
            check_ports_free(self, plan)
            return None
        elif not self.p["restart_on_change"]:
            why = "with a different configuration" if record else "but was not started by raygate"
            self.warnings.append(
                "Ray is already running on this node %s; leaving it (set restart_on_change: true to restart)" % why
            )
            return dict(result, changed=False, pid=raylet["pid"] if raylet else None)
        result["restarted"] = True
        if not self.module.check_mode:
            self.stopper.stop(procs)
        return None

    def start_ray(self, plan, result, env, env_all, node_labels, status_keys):
        """Write the node's files, launch Ray and wait for it; the result of a start."""
        digest = result["config_hash"]
        supported = self.command.supported_flags()
        args, dropped = self.command.args(plan, supported, node_labels)
        if dropped:
            self.warnings.append("the installed Ray has no flag for port(s) %s; Ray picks them" % ", ".join(dropped))
        self.auth.write(check_mode=False)
        self.gcs.write_secret(check_mode=False)
        self.tls.write(check_mode=False)
        self.gcs.make_storage_dir()
        self.run_as.own_runtime_dirs()
        self.config.write(env, args, digest, node_labels, status_keys, env_all)
        # Recorded before the launch: a run interrupted during `ray start` leaves a node whose
        # configuration is known, so the next run judges it instead of refusing a stranger.
        self.config.write_record(digest, None)
        pid = self.launch(args, env_all, digest)
        if self.p["role"] == "head":
            if self.p["head_wait"] == "dashboard":
                self.wait_head("http://%s:%s" % (self.proxy.bind_address(), plan["dashboard"]))
            else:
                self.wait_gcs(plan)
        self.config.write_record(digest, pid)
        result = dict(result, changed=True, new_session=True, pid=pid, command=args, dropped_ports=dropped)
        return self.proxy.follow(plan, result)

    def launch(self, args, env, digest):
        os.makedirs(self.p["state_dir"], mode=0o755, exist_ok=True)
        if self.p["supervisor"] == "systemd":
            self.unit.start()
        elif self.container.on():
            self.container.launch(args, digest)
        else:
            log = os.path.join(self.p["state_dir"], "ray-start.log")
            command = self.gcs.with_password(args)
            rc, out, err = self.run(command, env=env, output_file=log, cwd="/", user=self.run_as.user())
            if rc != 0:
                self.fail("ray start failed (rc=%s); its output:\n%s" % (rc, out[-3000:]), rc=rc, command=args)
        ok, raylet, elapsed = wait_for(self._raylet_up, timeout=self.p["start_timeout"], interval=0.5)
        if not ok:
            why = "Ray started but no raylet process appeared within %ss" % self.p["start_timeout"]
            self.fail(why + self.container.hint())
        return raylet["pid"]

    def wait_gcs(self, plan):
        address = (self.p["node_ip"], int(plan["gcs"]))
        ok, last, elapsed = wait_port(address, timeout=self.p["start_timeout"])
        if not ok:
            self.fail(
                "the head's GCS did not accept connections on %s:%s within %ss (last error: %s)"
                % (address[0], address[1], self.p["start_timeout"], last)
            )

    def _raylet_up(self):
        raylet = ray_procs.find_daemon(self.ray_processes(), "raylet")
        return raylet is not None, raylet

    def wait_head(self, dashboard_url):
        url = dashboard_url + "/api/gcs_healthz"

        def healthy():
            try:
                resp = open_url(url, timeout=5, validate_certs=False)
                return resp.getcode() == 200, None
            except Exception as exc:  # any failure means "not yet": keep polling
                return False, str(exc)

        ok, last, elapsed = wait_for(healthy, timeout=self.p["start_timeout"], interval=0.5)
        if not ok:
            self.fail("the head did not answer %s within %ss (last error: %s)" % (url, self.p["start_timeout"], last))

    # -- state: stopped / absent (teardown.py) ----------------------------------------
    def leftovers(self, plan):
        gpu = ray_procs.gpu_processes(self.runner, self.module.warn)
        ports = pp.find_listeners(sorted(pp.all_ports(plan, self.p["role"])))
        left = {
            "processes": ray_procs.summarize(self.ray_processes()),
            "ports": [pp.describe_listener(port, owners) for port, owners in sorted(ports.items())],
            "gpu_processes": gpu,
        }
        if self.container.on():
            left["containers"] = [self.container.name] if self.container.exists() else []
        return left


def check_ports_free(node, plan):
    """Fails naming each port of the plan some process already listens on, and its owner."""
    listeners = pp.find_listeners(sorted(pp.all_ports(plan, node.p["role"])))
    # The head's own HTTPS proxy holds the dashboard's port on the node's address: raygate's, not a stranger.
    ours = node.proxy.pids()
    listeners = dict(
        (port, owners) for port, owners in listeners.items() if not all(o.get("pid") in ours for o in owners)
    )
    if listeners:
        msgs = [pp.describe_listener(port, owners) for port, owners in sorted(listeners.items())]
        node.fail(
            "cannot start Ray on %s: %s. Stop that process or move the port plan "
            "(raygate_ports / raygate_port_offset)." % (node.p["node_ip"], "; ".join(msgs)),
            busy_ports=sorted(listeners),
        )


def restart_reason(rotating, new_image=None):
    """Why a running node is restarted whatever restart_on_change says (not a dead session)."""
    if new_image:
        return new_image
    if rotating:
        return "the auth token is being rotated (rotate_token); restarting this node"
    return "this node's TLS certificate or CA was renewed; restarting this node to use it"


ARGUMENT_SPEC = dict(
    role=dict(type="str", choices=["head", "worker"], required=True),
    state=dict(type="str", choices=["started", "stopped", "absent"], default="started"),
    node_ip=dict(type="str"),
    head_ip=dict(type="str"),
    venv=dict(type="path", default="/opt/raygate/current"),
    num_cpus=dict(type="int"),
    num_gpus=dict(type="int"),
    memory=dict(type="int"),
    object_store_memory=dict(type="int"),
    resources=dict(type="dict", default={}),
    labels=dict(type="dict", default={}),
    status_labels=dict(type="dict"),
    temp_dir=dict(type="path"),
    dashboard_host=dict(type="str"),
    dashboard_proxy=dict(type="bool", default=False),
    dashboard_proxy_cert=dict(type="path"),
    dashboard_proxy_key=dict(type="path", no_log=False),
    dashboard_proxy_binary=dict(type="path", default="/usr/sbin/nginx"),
    dashboard_proxy_unit=dict(type="str", default="raygate-dashboard-proxy"),
    dashboard_proxy_run_dir=dict(type="path", default="/run/raygate-dashboard-proxy"),
    auth=dict(type="bool", default=True),
    auth_token_file=dict(type="path", default="/etc/raygate/auth_token", no_log=False),
    env_files=dict(type="list", elements="path", default=["/etc/raygate/nccl.env"]),
    env=dict(type="dict", default={}),
    config_dir=dict(type="path", default="/etc/raygate"),
    state_dir=dict(type="path", default="/run/raygate"),
    extra_files=dict(type="list", elements="path", default=[]),
    supervisor=dict(type="str", choices=["process", "systemd"], default="process"),
    user=dict(type="str", default="root"),
    tls=dict(type="bool", default=False),
    tls_dir=dict(type="path", default="/etc/raygate/tls"),
    tls_ca_cert=dict(type="str"),
    tls_cert=dict(type="str"),
    tls_key=dict(type="str", no_log=True),
    unit_name=dict(type="str", default="raygate-ray"),
    unit_dir=dict(type="path", default="/etc/systemd/system"),
    restart_on_change=dict(type="bool", default=False),
    python_version_match_level=dict(type="str", choices=["patch", "minor"], default="patch"),
    stop_grace=dict(type="int", default=10),
    start_timeout=dict(type="int", default=180),
    head_wait=dict(type="str", choices=["gcs", "dashboard"], default="dashboard"),
    auth_token=dict(type="str", no_log=True),
    drain=dict(type="bool", default=False),
    drain_timeout=dict(type="int", default=600),
    member=dict(type="bool"),
    rotate_token=dict(type="bool", default=False),
    gcs_ft=dict(type="str", choices=["none", "redis", "rocksdb"], default="none"),
    redis_address=dict(type="str"),
    redis_username=dict(type="str", default=""),
    redis_tls=dict(type="bool", default=False),
    redis_password=dict(type="str", no_log=True),
    storage_namespace=dict(type="str"),
    gcs_storage_path=dict(type="path", default="/var/lib/raygate/gcs"),
    gcs_reconnect_timeout=dict(type="int"),
    runtime=dict(type="str", choices=["venv", "container"], default="venv"),
    engine=dict(type="str", choices=["podman", "docker"], default="podman"),
    image=dict(type="str"),
    container_name=dict(type="str", default="raygate-ray"),
    gpu_devices=dict(type="list", elements="str", default=["nvidia.com/gpu=all"]),
    container_ulimits=dict(type="list", elements="str", default=["memlock=-1:-1"]),
    container_run_args=dict(type="list", elements="str", default=[]),
    container_ipc=dict(type="str", choices=["host", "private"], default="host"),
    container_mounts=dict(type="list", elements="path", default=[]),
    **pp.plan_argspec(),
)


def lock_path(params):
    """The file one ray_node run holds while it changes the node: beside the state directory (it
    goes with a teardown, the lock file with its run), so it holds for state ``absent`` too."""
    return params["state_dir"].rstrip("/") + ".lock"


def run(module):
    """Start or stop the node as ``module.params`` say; ends with ``module.exit_json`` or ``module.fail_json``.

    One run at a time per node: an earlier run's call that still works (a head start launched in the
    background by a run that was killed goes on by design), or the node watcher taking the node out
    (raygate_node_watch.py holds the same lock), is waited for, at most the time it may
    take (start_timeout plus drain_timeout), and then judged as it left the node. Check mode changes
    nothing and takes no lock.
    """
    if module.check_mode:
        _run(module)
        return
    path = lock_path(module.params)
    wait = module.params["start_timeout"] + module.params["drain_timeout"]
    os.makedirs(os.path.dirname(path) or "/", mode=0o755, exist_ok=True)
    try:
        with files.exclusive_lock(path, timeout=wait):
            _run(module)
    except files.LockBusy as busy:
        module.fail_json(
            msg="another ray_node call (or the node watcher taking this node out) is still starting or stopping "
            "Ray on this node (pid %s, lock %s) after %d s: wait for it to end, or stop that process, then run again"
            % (busy.holder or "unknown", busy.path, busy.waited)
        )


def _run(module):
    node = Node(module)
    state = module.params["state"]
    if state == "started":
        result = node.started()
    else:
        result = teardown.stopped(node, purge_files=state == "absent")
    if module._diff:
        result["diff"] = node.diff
    for warning in node.warnings:
        module.warn(warning)
    module.exit_json(**result)
