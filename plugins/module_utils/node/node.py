# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The work of raygate.cluster.ray_node, runnable by its module or as a node_steps step."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import socket
import time

from ansible.module_utils.urls import open_url

from ansible_collections.raygate.cluster.plugins.module_utils import files
from ansible_collections.raygate.cluster.plugins.module_utils._runner import DEFAULT_PATH, CommandError, CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.files import parse_env, read_text, render_env, write_file
from ansible_collections.raygate.cluster.plugins.module_utils.net import port_plan as pp
from ansible_collections.raygate.cluster.plugins.module_utils.node import labels as nl
from ansible_collections.raygate.cluster.plugins.module_utils.node import procs as ray_procs
from ansible_collections.raygate.cluster.plugins.module_utils.waiter import wait_for

STATE_FILE = "ray-node.json"
FLAGS_FILE = "raygate-start-flags.json"
GCS_SECRET_FILE = "gcs-secret.env"
# `ray start` reads the Redis password only from --redis-password (no environment variable in
# Ray 2.60). The argument names this variable instead of the password: systemd expands it from
# the 0600 secret file, and a process start substitutes it just before running `ray start`, so
# neither the unit nor the returned command ever holds the password.
REDIS_PASSWORD_VAR = "RAYGATE_REDIS_PASSWORD"
REDIS_PASSWORD_ARG = "--redis-password=${%s}" % REDIS_PASSWORD_VAR
# Ray refuses a storage namespace holding its cluster separator (RAY_CHECK in gcs_server).
_NAMESPACE_BAD = "@"


def send_signal(pids, sig):
    """Send ``sig`` to each of ``pids``; one that is already gone is not an error."""
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


UNIT_HASH_PREFIX = "# raygate-config-hash: "


def render_unit(role, command, env_files, description=None, config_hash=None, venv_bin=None):
    """The systemd unit for a node: ``ray start --block`` as the main process.

    No ExecStop: on SIGTERM ``ray start --block`` stops the node's processes itself;
    KillMode=mixed then SIGKILLs whatever is left after the timeout. ``ray start --block``
    exits 1 when it is told to stop, hence SuccessExitStatus=1. That same exit 1 is what it
    does when its raylet dies, so Restart=on-failure would leave a dead node down: Restart=always
    (a stop through systemctl is never restarted).

    config_hash is kept in a comment: the unit outlives a reboot, the state file in /run does not.
    venv_bin goes first on PATH, as under the process supervisor: a job's entrypoint
    (``ray job submit -- python script.py``) and runtime environments run Ray's Python, not the
    system's (which may have no ``python`` at all).
    """
    lines = ["# Managed by raygate.cluster.ray_node: local changes are overwritten."]
    if config_hash:
        lines.append(UNIT_HASH_PREFIX + config_hash)
    lines += [
        "[Unit]",
        "Description=%s" % (description or "Ray %s node (raygate)" % role),
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=simple",
    ]
    if venv_bin:
        lines.append("Environment=PATH=%s:%s" % (venv_bin, DEFAULT_PATH))
    lines += ["EnvironmentFile=-%s" % path for path in env_files]
    lines += [
        "ExecStart=%s" % " ".join(_systemd_quote(a) for a in command + ["--block"]),
        "KillMode=mixed",
        "SuccessExitStatus=1",
        "Restart=always",
        "RestartSec=5",
        "TimeoutStopSec=60",
        "LimitNOFILE=1048576",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(lines)


def _systemd_quote(arg):
    if arg and all(c.isalnum() or c in "-_=./:,@%+" for c in arg):
        return arg
    return '"%s"' % arg.replace("\\", "\\\\").replace('"', '\\"')


class Node:
    def __init__(self, module):
        self.module = module
        self.p = module.params
        self.venv_bin = os.path.join(self.p["venv"], "bin")
        env = {"PATH": self.venv_bin + ":" + DEFAULT_PATH, "HOME": os.environ.get("HOME", "/root")}
        self.runner = CommandRunner(timeout=max(self.p["start_timeout"], 60), base_env=env)
        self.ray = os.path.join(self.venv_bin, "ray")
        self.state_path = os.path.join(self.p["state_dir"], STATE_FILE)
        # Beside the virtualenv it describes: kept while the venv is, removed with it (purge).
        self.flags_path = os.path.join(os.path.realpath(self.p["venv"]), FLAGS_FILE)
        self.env_path = os.path.join(self.p["config_dir"], "ray.env")
        self.labels_path = os.path.join(self.p["config_dir"], "labels.yaml")
        self.unit_path = os.path.join(self.p["unit_dir"], self.p["unit_name"] + ".service")
        self.secret_path = os.path.join(self.p["config_dir"], GCS_SECRET_FILE)
        self.session_roots = tuple(r for r in (self.p["temp_dir"], "/tmp/ray") if r)
        self.warnings = []
        self.diff = {"before": "", "after": ""}

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

    def node_env(self, plan):
        """Environment of the Ray node: auth, env-only ports, env files, user extras."""
        env = {"RAY_USAGE_STATS_ENABLED": "0"}
        if self.p["auth"]:
            env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=self.p["auth_token_file"])
        if self.p["python_version_match_level"] == "minor":
            env["RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL"] = "minor"
        env.update(pp.env_vars(plan, self.p["role"]))
        env.update(self.gcs_env())
        env.update({k: str(v) for k, v in self.p["env"].items()})
        return env

    # -- GCS fault tolerance ----------------------------------------------------------
    def version_tag(self):
        """The installed Ray's directory name (ray-2.60.0-py3.11): one storage per Ray version,
        so upgrade.yml's new version starts on fresh tables and a rollback finds the old ones."""
        return os.path.basename(os.path.realpath(self.p["venv"]).rstrip("/")) or "ray"

    def storage_namespace(self):
        """RAY_external_storage_namespace: the cluster's prefix, then the Ray version."""
        return "%s-%s" % (self.p["storage_namespace"], self.version_tag())

    def gcs_storage_path(self):
        return os.path.join(self.p["gcs_storage_path"], self.version_tag())

    def gcs_problems(self):
        """What is wrong with the GCS fault tolerance options, before anything changes."""
        p = self.p
        problems = []
        if p["gcs_reconnect_timeout"] is not None and p["gcs_reconnect_timeout"] < 1:
            problems.append("gcs_reconnect_timeout must be at least 1 second")
        if p["gcs_ft"] != "redis" or p["role"] != "head":
            return problems
        if not p["redis_address"]:
            problems.append("gcs_ft is redis but redis_address is empty")
        if p["redis_password"] is None or not p["redis_password"].strip():
            problems.append("gcs_ft is redis but redis_password is empty: raygate never backs the GCS by an open Redis")
        namespace = p["storage_namespace"] or ""
        if not namespace.strip():
            problems.append("gcs_ft is redis but storage_namespace is empty: clusters sharing a Redis would mix tables")
        elif _NAMESPACE_BAD in namespace or any(c.isspace() for c in namespace):
            problems.append("storage_namespace %r must not contain '@' or spaces (Ray refuses '@')" % namespace)
        return problems

    def gcs_env(self):
        """The environment GCS fault tolerance needs: the store on the head, the reconnect
        timeout on every node (each raylet decides for itself how long to wait for the GCS)."""
        p = self.p
        env = {}
        if p["gcs_ft"] == "none":
            return env
        if p["gcs_reconnect_timeout"] is not None:
            env["RAY_gcs_rpc_server_reconnect_timeout_s"] = str(p["gcs_reconnect_timeout"])
        if p["role"] != "head":
            return env
        if p["gcs_ft"] == "redis":
            env["RAY_REDIS_ADDRESS"] = p["redis_address"] or ""
            env["RAY_external_storage_namespace"] = self.storage_namespace()
        else:
            env["RAY_gcs_storage"] = "rocksdb"
            env["RAY_gcs_storage_path"] = self.gcs_storage_path()
        return env

    def uses_redis_password(self):
        return self.p["role"] == "head" and self.p["gcs_ft"] == "redis" and bool(self.p["redis_password"])

    def secret_text(self):
        return render_env(
            {REDIS_PASSWORD_VAR: self.p["redis_password"]},
            header="Managed by raygate: the GCS Redis password (mode 0600; read by the Ray head's unit).",
        )

    def write_secret(self, check_mode):
        """The password file (0600) for the head's unit; True when it changed. Never diffed."""
        if not self.uses_redis_password():
            return False
        return write_file(self.secret_path, self.secret_text(), mode=0o600, check_mode=check_mode)[0]

    def with_password(self, args):
        """``args`` with the password in place of its variable: only for the process launch."""
        if not self.uses_redis_password():
            return args
        value = "--redis-password=%s" % self.p["redis_password"]
        return [value if a == REDIS_PASSWORD_ARG else a for a in args]

    def file_env(self):
        env = {}
        for path in self.p["env_files"]:
            text = read_text(path)
            if text is None:
                continue
            try:
                env.update(parse_env(text))
            except ValueError as exc:
                self.fail("environment file %s: %s" % (path, exc))
        return env

    def start_args(self, plan, supported, labels=None):
        """The `ray start` command; ``labels`` are all the node's labels (default: the option)."""
        p = self.p
        args = [self.ray, "start"]
        if p["role"] == "head":
            args.append("--head")
        else:
            args.append("--address=%s:%s" % (p["head_ip"], plan["gcs"]))
        port_args, dropped = pp.ray_start_args(plan, p["role"], supported)
        args += ["--node-ip-address=%s" % p["node_ip"]] + port_args
        for key in ("num_cpus", "num_gpus", "memory", "object_store_memory"):
            if p[key] is not None:
                args.append("--%s=%s" % (key.replace("_", "-"), p[key]))
        if p["resources"]:
            args.append("--resources=%s" % json.dumps(p["resources"], sort_keys=True, separators=(",", ":")))
        if p["labels"] if labels is None else labels:
            args.append("--labels-file=%s" % self.labels_path)
        if p["role"] == "head":
            args.append("--dashboard-host=%s" % (p["dashboard_host"] or p["node_ip"]))
            if p["temp_dir"]:
                args.append("--temp-dir=%s" % p["temp_dir"])
        if supported is None or "--disable-usage-stats" in supported:
            args.append("--disable-usage-stats")
        if self.uses_redis_password():
            # Hidden options in Ray 2.60 (absent from `ray start --help`, present in its code):
            # never filtered by the supported flags.
            if p["redis_username"]:
                args.append("--redis-username=%s" % p["redis_username"])
            args.append(REDIS_PASSWORD_ARG)
        return args, dropped

    def config_hash(self, plan, env):
        p = self.p
        token = self.token() if p["auth"] else None
        desired = {
            "role": p["role"],
            "venv": os.path.realpath(p["venv"]),
            "node_ip": p["node_ip"],
            "head_ip": p["head_ip"] if p["role"] == "worker" else None,
            "ports": pp.role_ports(plan, p["role"]),
            "amounts": [p["num_cpus"], p["num_gpus"], p["memory"], p["object_store_memory"]],
            "resources": p["resources"],
            "labels": p["labels"],
            "temp_dir": p["temp_dir"] if p["role"] == "head" else None,
            "dashboard_host": p["dashboard_host"],
            "env": env,
            "token": hashlib.sha256(token.encode()).hexdigest() if token else None,
            "supervisor": p["supervisor"],
        }
        if p["gcs_ft"] != "none":
            # Only when on: a cluster without fault tolerance keeps the hash it had before.
            password = p["redis_password"] if self.uses_redis_password() else None
            desired["gcs"] = {
                "ft": p["gcs_ft"],
                "username": p["redis_username"] if password else None,
                "password": hashlib.sha256(password.encode()).hexdigest() if password else None,
            }
        blob = json.dumps(desired, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:16]

    def checked_labels(self):
        """The configured labels and the given status labels (None: not given), checked as Ray
        checks them; fails before anything changes."""
        try:
            labels = nl.check(self.p["labels"], "labels")
            status = self.p["status_labels"]
            if status is not None:
                status = nl.check(status, "status_labels", reserved_ok=False)
                nl.merge(labels, status)
        except ValueError as exc:
            self.fail("%s; nothing was changed" % exc)
        return labels, status

    # -- what runs now ----------------------------------------------------------------
    def carried_status_labels(self):
        """The status labels the node was last started with, as its labels file says."""
        return nl.status_from_file(read_text(self.labels_path))

    def ray_processes(self):
        return ray_procs.ray_processes(session_roots=self.session_roots)

    def recorded(self):
        """What raygate recorded when it started this node: the state file, or after a reboot
        (the state dir is in /run) the configuration hash kept in the systemd unit."""
        text = read_text(self.state_path)
        try:
            record = json.loads(text) if text else {}
        except ValueError:
            record = {}
        if not record and self.p["supervisor"] == "systemd":
            for line in (read_text(self.unit_path) or "").splitlines():
                if line.startswith(UNIT_HASH_PREFIX):
                    record = {"config_hash": line[len(UNIT_HASH_PREFIX) :].strip(), "role": self.p["role"]}
        return record

    def check_ports_free(self, plan):
        listeners = pp.find_listeners(sorted(pp.all_ports(plan, self.p["role"])))
        if listeners:
            msgs = [pp.describe_listener(port, owners) for port, owners in sorted(listeners.items())]
            self.fail(
                "cannot start Ray on %s: %s. Stop that process or move the port plan "
                "(raygate_ports / raygate_port_offset)." % (self.p["node_ip"], "; ".join(msgs)),
                busy_ports=sorted(listeners),
            )

    def supported_flags(self):
        """The flags of the installed `ray start`, cached per virtualenv: asking Ray costs seconds."""
        key = self.flags_key()
        cached = read_text(self.flags_path)
        try:
            doc = json.loads(cached) if cached else {}
        except ValueError:
            doc = {}
        if key and doc.get("key") == key and isinstance(doc.get("flags"), list):
            return set(doc["flags"])
        rc, out, err = self.run([self.ray, "start", "--help"], timeout=120)
        if rc != 0:
            self.fail("%s start --help failed: %s" % (self.ray, (err or out).strip()[-1000:]))
        flags = pp.parse_ray_start_help(out)
        if key:  # the venv holds `ray`, so its directory exists
            try:
                write_file(self.flags_path, json.dumps({"key": key, "flags": sorted(flags)}) + "\n")
            except OSError:
                pass  # a read-only venv: ask Ray every time
        return flags

    def flags_key(self):
        """Identifies the installed Ray: the virtualenv's real path and its `ray` script's stat."""
        try:
            st = os.stat(self.ray)
        except OSError:
            return None
        return "%s:%d:%d" % (os.path.dirname(self.flags_path), st.st_mtime_ns, st.st_size)

    # -- actions ----------------------------------------------------------------------
    def started(self):
        p = self.p
        if not p["node_ip"]:
            self.fail("node_ip is required to start a Ray node")
        if p["role"] == "worker" and not p["head_ip"]:
            self.fail("head_ip is required to start a worker")
        labels, status = self.checked_labels()
        if p["supervisor"] == "systemd" and not files.systemd_booted():
            self.fail(
                "supervisor is systemd but systemd is not the init system here (no %s); set supervisor (the role "
                "variable raygate_supervisor) to process" % files.SYSTEMD_RUNTIME_DIR
            )
        plan = self.plan()
        problems = self.gcs_problems()
        if problems:
            self.fail("GCS fault tolerance: " + "; ".join(problems))
        installed = os.access(self.ray, os.X_OK)
        if not installed and not self.module.check_mode:
            self.fail("Ray is not installed at %s; run raygate.cluster.ray_install first" % self.p["venv"])
        if p["auth"] and p["auth_token"] is not None and not p["auth_token"].strip():
            self.fail("auth_token is empty; give the cluster's token or leave it unset")
        token_file_changed = self.write_token(check_mode=True)
        token_file_changed = self.write_secret(check_mode=True) or token_file_changed
        if p["auth"] and self.token() is None and not self.module.check_mode:
            self.fail("auth is on but the token file %s is missing on this node" % p["auth_token_file"])
        env = self.node_env(plan)
        env_all = dict(self.file_env(), **env)
        digest = self.config_hash(plan, env_all)
        procs = self.ray_processes()
        raylet = ray_procs.find_daemon(procs, "raylet")
        record = self.recorded()
        result = {"config_hash": digest, "gcs_address": "%s:%s" % (self.head_ip(), plan["gcs"]), "restarted": False}
        result["new_session"] = False
        if p["gcs_ft"] != "none" and p["role"] == "head":
            result["gcs_storage"] = (
                {"backend": "redis", "address": p["redis_address"], "namespace": self.storage_namespace()}
                if p["gcs_ft"] == "redis"
                else {"backend": "rocksdb", "path": self.gcs_storage_path()}
            )
        # Status labels are no part of the configuration: never a reason to restart. Ray cannot
        # relabel a running node, so one that is left alone keeps those it was started with.
        carried = self.carried_status_labels()
        result["status_labels"] = carried
        if p["role"] == "head":
            result["dashboard_url"] = "http://%s:%s" % (p["dashboard_host"] or p["node_ip"], plan["dashboard"])
        rotating = self.check_token_drift(procs)
        dead = None if rotating else self.dead_session(plan, procs, raylet)
        if raylet and not dead and not rotating and record.get("config_hash") == digest and self.supervised_ok():
            # Same token (it is in the digest), only the file differs (mode, trailing newline).
            if token_file_changed and not self.module.check_mode:
                self.write_token(check_mode=False)
                self.write_secret(check_mode=False)
            return dict(result, changed=token_file_changed, pid=raylet["pid"])
        if dead or rotating:
            # What runs here is no working member (see dead_session), or runs on the old token:
            # clear it, whatever restart_on_change says, and start the node again.
            self.warnings.append(dead or "the auth token is being rotated (rotate_token); restarting this node")
            result["restarted"] = True
            if not self.module.check_mode:
                self.stop(plan, procs)
        elif raylet or procs:
            if not p["restart_on_change"]:
                why = "with a different configuration" if record else "but was not started by raygate"
                self.warnings.append(
                    "Ray is already running on this node %s; leaving it (set restart_on_change: true to restart)" % why
                )
                return dict(result, changed=False, pid=raylet["pid"] if raylet else None)
            result["restarted"] = True
            if not self.module.check_mode:
                self.stop(plan, procs)
        else:
            self.check_ports_free(plan)
        # Unset, the node starts with the status labels of its last start: a restart (a new head,
        # an upgrade) says nothing new about its state. A stop with status_labels {} forgets them.
        if status is None:
            status = dict((key, value) for key, value in carried.items() if key not in labels)
        result["status_labels"] = status
        node_labels = dict(labels, **status)
        if self.module.check_mode:
            return dict(result, changed=True)
        supported = self.supported_flags()
        args, dropped = self.start_args(plan, supported, node_labels)
        if dropped:
            self.warnings.append("the installed Ray has no flag for port(s) %s; Ray picks them" % ", ".join(dropped))
        self.write_token(check_mode=False)
        self.write_secret(check_mode=False)
        if p["gcs_ft"] == "rocksdb" and p["role"] == "head":
            # The GCS's own disk store: readable by root only, like Redis's data directory.
            os.makedirs(self.gcs_storage_path(), mode=0o700, exist_ok=True)
        self.write_config(env, args, digest, node_labels, sorted(status))
        # Recorded before the launch: a run interrupted during `ray start` leaves a node whose
        # configuration is known, so the next run judges it instead of refusing a stranger.
        self.write_record(digest, None)
        pid = self.launch(args, env_all)
        if p["role"] == "head":
            if p["head_wait"] == "dashboard":
                self.wait_head(result["dashboard_url"])
            else:
                self.wait_gcs(plan)
        self.write_record(digest, pid)
        return dict(result, changed=True, new_session=True, pid=pid, command=args, dropped_ports=dropped)

    def write_record(self, digest, pid):
        os.makedirs(self.p["state_dir"], mode=0o755, exist_ok=True)
        record = {"config_hash": digest, "role": self.p["role"], "pid": pid, "started_at": time.time()}
        write_file(self.state_path, json.dumps(record, sort_keys=True) + "\n", mode=0o644)

    def gcs_answers(self, plan):
        """None when the GCS accepts a connection on its planned address, else the error."""
        try:
            socket.create_connection((self.head_ip(), int(plan["gcs"])), timeout=3).close()
            return None
        except OSError as exc:
            return str(exc) or exc.__class__.__name__

    def dead_session(self, plan, procs, raylet):
        """Why the Ray processes here are no working member, or None when they may be one.

        A head is one only while its raylet and GCS run and the GCS answers: after a crash of
        gcs_server the raylets and helpers live on for a while, then only the orphaned
        log_monitor and monitor are left. A worker is none without a raylet (it died, or a
        drain ended it), or when the head's GCS does not list it alive (member: false)."""
        if not procs:
            return None
        names = ", ".join(sorted({proc["comm"] for proc in procs}))
        if self.p["role"] == "head":
            gcs = ray_procs.find_daemon(procs, "gcs_server")
            error = self.gcs_answers(plan) if gcs and raylet else None
            if gcs and raylet and error is None:
                return None
            why = (
                "no %s runs" % ("raylet" if gcs else "gcs_server")
                if not (gcs and raylet)
                else ("its GCS does not answer on %s:%s (%s)" % (self.head_ip(), plan["gcs"], error))
            )
            return "the head is not working: %s; clearing what is left of its session (%s) and starting it again" % (
                why,
                names,
            )
        if not raylet:
            return (
                "no raylet runs on this worker, only leftover Ray processes (%s); stopping them and starting "
                "the node again" % names
            )
        if self.p["member"] is False:
            return (
                "the head's GCS does not list this worker alive with its configuration (raylet pid %s belongs to "
                "another session); stopping it and joining again" % raylet["pid"]
            )
        return None

    def check_token_drift(self, procs):
        """True when the running node uses another token than the given one and rotate_token
        allows a restart; fails before anything changes when it does not."""
        p = self.p
        if not (p["auth"] and p["auth_token"] is not None and procs):
            return False
        current = read_text(p["auth_token_file"])
        if current is None or current.strip() == p["auth_token"].strip():
            return False
        if p["rotate_token"]:
            return True
        self.fail(
            "the Ray node running on %s uses another auth token than the one given (the file %s differs): the "
            "cluster's token was rotated, or this controller holds another copy of it. Nothing was changed. Restore "
            "the cluster's token on the controller (raygate_auth_token or raygate_auth_token_file), or rotate it "
            "across the whole cluster with rotate_token: true (-e raygate_rotate_token=true), which restarts every "
            "node, head first" % (p["node_ip"] or socket.gethostname(), p["auth_token_file"]),
            token_drift=True,
        )

    def token(self):
        """The token the node is to use: the given one, else the token file's content (None if neither)."""
        if self.p["auth_token"] is not None:
            return self.p["auth_token"].strip() + "\n"
        return read_text(self.p["auth_token_file"])

    def write_token(self, check_mode):
        """Write the given token to the token file (0600); True when it changed. Never diffed."""
        if not self.p["auth"] or self.p["auth_token"] is None:
            return False
        return write_file(self.p["auth_token_file"], self.token(), mode=0o600, check_mode=check_mode)[0]

    def head_ip(self):
        return self.p["node_ip"] if self.p["role"] == "head" else self.p["head_ip"]

    def supervised_ok(self):
        if self.p["supervisor"] != "systemd":
            return True
        rc, out, err = self.run(["systemctl", "is-active", self.p["unit_name"]])
        return out.strip() == "active"

    def write_config(self, env, args, digest=None, labels=None, status_keys=()):
        """Written only when Ray (re)starts: the labels file is then what the running node carries."""
        changed, diff = write_file(self.env_path, render_env(env, header="Managed by raygate: Ray node environment."))
        self.diff = diff
        labels = self.p["labels"] if labels is None else labels
        if labels:
            write_file(self.labels_path, nl.render_file(labels, status_keys))
        elif os.path.lexists(self.labels_path):
            # Not passed to Ray: a stale file would claim status labels the node does not carry.
            os.unlink(self.labels_path)
        if self.p["supervisor"] == "systemd":
            env_files = [self.env_path] + list(self.p["env_files"])
            if self.uses_redis_password():
                env_files.append(self.secret_path)
            unit = render_unit(self.p["role"], args, env_files, config_hash=digest, venv_bin=self.venv_bin)
            write_file(self.unit_path, unit)

    def launch(self, args, env):
        os.makedirs(self.p["state_dir"], mode=0o755, exist_ok=True)
        if self.p["supervisor"] == "systemd":
            for cmd in (["daemon-reload"], ["enable", self.p["unit_name"]], ["restart", self.p["unit_name"]]):
                rc, out, err = self.run(["systemctl"] + cmd)
                if rc != 0:
                    self.fail("systemctl %s failed: %s" % (" ".join(cmd), (err or out).strip()))
        else:
            log = os.path.join(self.p["state_dir"], "ray-start.log")
            rc, out, err = self.run(self.with_password(args), env=env, output_file=log, cwd="/")
            if rc != 0:
                self.fail("ray start failed (rc=%s); its output:\n%s" % (rc, out[-3000:]), rc=rc, command=args)
        ok, raylet, elapsed = wait_for(self._raylet_up, timeout=self.p["start_timeout"], interval=0.5)
        if not ok:
            self.fail("Ray started but no raylet process appeared within %ss" % self.p["start_timeout"])
        return raylet["pid"]

    def wait_gcs(self, plan):
        address = (self.p["node_ip"], int(plan["gcs"]))

        def listening():
            try:
                socket.create_connection(address, timeout=2).close()
                return True, None
            except OSError as exc:
                return False, str(exc)

        ok, last, elapsed = wait_for(listening, timeout=self.p["start_timeout"], interval=0.2)
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

    def stop(self, plan, procs=None):
        """Graceful, then forced, then kill what is left; returns what ran before."""
        procs = self.ray_processes() if procs is None else procs
        if self.p["supervisor"] == "systemd" and os.path.exists(self.unit_path):
            self.run(["systemctl", "stop", self.p["unit_name"]], timeout=120)
        if procs:
            self.terminate()
        self.kill_leftovers()
        return ray_procs.summarize(procs)

    def terminate(self):
        """What `ray stop --grace-period` does, without its seconds of Python start-up.

        Three rounds, in Ray's own order: the raylet (its workers and agents follow it), then
        every other Ray process, then the GCS last (it lingers while clients are connected).
        Each round sends SIGTERM, waits up to a third of stop_grace, and kills what is left.
        """
        rounds = (
            lambda p: p["comm"] == "raylet",
            lambda p: p["comm"] not in ("raylet", "gcs_server"),
            lambda p: p["comm"] == "gcs_server",
        )
        for in_round in rounds:
            targets = [p["pid"] for p in self.ray_processes() if in_round(p)]
            if targets:
                self.signal_and_wait(targets, self.p["stop_grace"] / 3.0)

    def signal_and_wait(self, pids, grace):
        send_signal(pids, signal.SIGTERM)

        def exited():
            alive = {p["pid"] for p in self.ray_processes()}
            left = [pid for pid in pids if pid in alive]
            return not left, left

        left = wait_for(exited, timeout=grace, interval=0.1)[1]
        send_signal(left, signal.SIGKILL)

    def drain(self, plan, raylet):
        """Ask the GCS to drain this worker (``ray drain-node``, preemption with a deadline of
        drain_timeout), then wait for its raylet to exit: Ray ends a drained raylet once its tasks
        are done. A Ray without drain-node is stopped undrained, with a warning; a refused drain
        fails before anything stops."""
        node_id = raylet["flags"].get("node_id")
        if not node_id:
            self.warnings.append("the raylet (pid %s) shows no node id; stopped without draining" % raylet["pid"])
            return {"drained": False}
        env = dict(self.file_env(), **self.node_env(plan))
        args = [
            self.ray, "drain-node", "--address", "%s:%s" % (self.head_ip(), plan["gcs"]),
            "--node-id", node_id, "--reason", "DRAIN_NODE_REASON_PREEMPTION",
            "--reason-message", "raygate: node %s leaves the cluster" % self.p["node_ip"],
            "--deadline-remaining-seconds", str(self.p["drain_timeout"]),
        ]  # fmt: skip
        started = time.monotonic()
        rc, out, err = self.run(args, env=env, timeout=120)
        if rc != 0:
            text = (err or out).strip()
            if "No such command" in text:
                self.warnings.append("the installed Ray has no drain-node; stopped without draining")
                return {"drained": False}
            self.fail(
                "Ray refused to drain this node (%s); nothing was stopped. Set drain: false to stop it "
                "without draining" % text[-600:]
            )

        def raylet_gone():
            alive = {p["pid"] for p in self.ray_processes()}
            return raylet["pid"] not in alive, None

        done = wait_for(raylet_gone, timeout=self.p["drain_timeout"], interval=0.2)[0]
        if not done:
            self.warnings.append(
                "the node still ran tasks after drain_timeout (%ss); stopping it anyway" % self.p["drain_timeout"]
            )
        return {"drained": True, "drain_seconds": round(time.monotonic() - started, 1), "drain_timed_out": not done}

    def kill_leftovers(self):
        def gone():
            left = self.ray_processes()
            send_signal([proc["pid"] for proc in left], signal.SIGKILL)
            return not left, left

        wait_for(gone, timeout=30, interval=0.2)

    def leftovers(self, plan):
        gpu = []
        smi = self.runner.which("nvidia-smi")
        if smi:
            rc, out, err = self.run([smi, "--query-compute-apps=pid,process_name", "--format=csv,noheader"])
            gpu = [line.strip() for line in out.splitlines() if line.strip()] if rc == 0 else []
        ports = pp.find_listeners(sorted(pp.all_ports(plan, self.p["role"])))
        return {
            "processes": ray_procs.summarize(self.ray_processes()),
            "ports": [pp.describe_listener(port, owners) for port, owners in sorted(ports.items())],
            "gpu_processes": gpu,
        }

    def forget_status_labels(self):
        """Drop the status labels from the labels file, so the next start without status_labels
        starts without them. The file stays (empty, maybe): a systemd unit passes it at boot."""
        labels, status = nl.parse_file(read_text(self.labels_path))
        write_file(self.labels_path, nl.render_file({k: v for k, v in labels.items() if k not in status}, []))

    def remove_empty_dirs(self):
        for directory in (self.p["config_dir"], self.p["state_dir"]):
            try:
                os.rmdir(directory)
            except OSError:
                pass  # absent, or holds files raygate did not write: leave it

    def stopped(self, purge_files):
        plan = self.plan()
        procs = self.ray_processes()
        unit_active = False
        if self.p["supervisor"] == "systemd" and os.path.exists(self.unit_path):
            unit_active = not self.module.check_mode and self.supervised_ok()
        removable = [self.state_path]
        if purge_files:
            removable += [self.env_path, self.labels_path, os.path.join(self.p["state_dir"], "ray-start.log")]
            removable += list(self.p["extra_files"])
            removable.append(self.p["auth_token_file"])
            removable.append(self.secret_path)
            if self.p["supervisor"] == "systemd":
                removable.append(self.unit_path)
        removable = [path for path in removable if os.path.lexists(path)]
        forget = not purge_files and self.p["status_labels"] == {} and bool(self.carried_status_labels())
        changed = bool(procs) or unit_active or bool(removable) or forget
        result = {"changed": changed, "stopped": ray_procs.summarize(procs), "removed": removable}
        result["status_labels_forgotten"] = forget
        raylet = ray_procs.find_daemon(procs, "raylet")
        if self.p["drain"] and self.p["role"] == "head":
            self.fail("drain is for workers: the head holds the GCS, and stopping it stops the whole cluster")
        result["drained"] = False
        if self.module.check_mode:
            result["drained"] = bool(self.p["drain"] and raylet)
            return dict(result, leftovers={"processes": [], "ports": [], "gpu_processes": []})
        if self.p["drain"] and raylet:
            result.update(self.drain(plan, raylet))
            procs = self.ray_processes()
        if procs or unit_active:
            self.stop(plan, procs)
        if forget:
            self.forget_status_labels()
        if self.p["supervisor"] == "systemd" and self.unit_path in removable:
            self.run(["systemctl", "disable", self.p["unit_name"]])
        for path in removable:
            os.unlink(path)
        if purge_files:
            self.remove_empty_dirs()
        if self.p["supervisor"] == "systemd" and self.unit_path in removable:
            self.run(["systemctl", "daemon-reload"])
        left = self.leftovers(plan)
        if any(left.values()):
            self.fail("Ray is not fully stopped on this node: %s" % json.dumps(left), leftovers=left, **result)
        return dict(result, leftovers=left)


ARGUMENT_SPEC = dict(
    role=dict(type="str", choices=["head", "worker"], required=True),
    state=dict(type="str", choices=["started", "stopped", "absent"], default="started"),
    node_ip=dict(type="str"),
    head_ip=dict(type="str"),
    venv=dict(type="path", default="/opt/raygate/current"),
    ports=dict(type="dict", default={}),
    port_offset=dict(type="int", default=0),
    min_worker_ports=dict(type="int", default=64),
    num_cpus=dict(type="int"),
    num_gpus=dict(type="int"),
    memory=dict(type="int"),
    object_store_memory=dict(type="int"),
    resources=dict(type="dict", default={}),
    labels=dict(type="dict", default={}),
    status_labels=dict(type="dict"),
    temp_dir=dict(type="path"),
    dashboard_host=dict(type="str"),
    auth=dict(type="bool", default=True),
    auth_token_file=dict(type="path", default="/etc/raygate/auth_token", no_log=False),
    env_files=dict(type="list", elements="path", default=["/etc/raygate/nccl.env"]),
    env=dict(type="dict", default={}),
    config_dir=dict(type="path", default="/etc/raygate"),
    state_dir=dict(type="path", default="/run/raygate"),
    extra_files=dict(type="list", elements="path", default=[]),
    supervisor=dict(type="str", choices=["process", "systemd"], default="process"),
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
    redis_password=dict(type="str", no_log=True),
    storage_namespace=dict(type="str"),
    gcs_storage_path=dict(type="path", default="/var/lib/raygate/gcs"),
    gcs_reconnect_timeout=dict(type="int"),
)


def run(module):
    """Start or stop the node as ``module.params`` say; ends with ``module.exit_json`` or ``module.fail_json``."""
    node = Node(module)
    state = module.params["state"]
    if state == "started":
        result = node.started()
    else:
        result = node.stopped(purge_files=state == "absent")
    if module._diff:
        result["diff"] = node.diff
    for warning in node.warnings:
        module.warn(warning)
    module.exit_json(**result)
