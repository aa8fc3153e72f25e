# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The node watcher's installation (the node_watch module, and node_steps' ``node_watch`` step).

Under systemd it is a oneshot service and its timer (``raygate-watch.timer``, every ``interval``
seconds); under the process supervisor a daemon of its own (``raygate-node-watch loop``, its pid
and the hash of what it runs in ``run_dir``), started in a session of its own so that it outlives
the Ansible task and any Ray restart, and restarted when its settings or script change. ``absent``
stops it and removes its settings, units, state and textfile; ``query`` only reads its state (what
it found last, and whether it took the node out).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandRunner
from ansible_collections.raygate.cluster.plugins.module_utils.files import read_text, write_file
from ansible_collections.raygate.cluster.plugins.module_utils.waiter import wait_for

PID_FILE = "raygate-watch.pid"
HARDENING = ("NoNewPrivileges=yes", "ProtectSystem=full", "ProtectHome=read-only", "PrivateDevices=no")


def render_service(python, script, config):
    return "\n".join(
        [
            "# Managed by raygate.cluster.node_watch: local changes are overwritten.",
            "[Unit]",
            "Description=raygate node watcher: the gate's node checks between runs",
            "After=network-online.target",
            "",
            "[Service]",
            "Type=oneshot",
            "ExecStart=%s %s --config %s once" % (python, script, config),
            "TimeoutStartSec=infinity",
        ]
        + list(HARDENING)
        + [""]
    )


def render_timer(name, interval):
    return "\n".join(
        [
            "# Managed by raygate.cluster.node_watch: local changes are overwritten.",
            "[Unit]",
            "Description=raygate node watcher, every %d s" % interval,
            "",
            "[Timer]",
            "OnBootSec=%d" % interval,
            "OnUnitActiveSec=%d" % interval,
            "AccuracySec=1s",
            "Unit=%s.service" % name,
            "",
            "[Install]",
            "WantedBy=timers.target",
            "",
        ]
    )


def running(pid):
    """Whether ``pid`` runs (a zombie that its parent has not reaped yet does not)."""
    try:
        with open("/proc/%d/stat" % pid, encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Watcher:
    def __init__(self, module):
        self.module = module
        self.p = module.params
        self.check = module.check_mode
        self.changed = False
        self.diffs = []
        name = self.p["unit_name"]
        self.service = os.path.join(self.p["unit_dir"], name + ".service")
        self.timer = os.path.join(self.p["unit_dir"], name + ".timer")
        self.pid_file = os.path.join(self.p["run_dir"], PID_FILE)
        self.runner = CommandRunner(timeout=120)

    # -- shared ------------------------------------------------------------------------------

    def systemctl(self, *args):
        rc, out, err = self.runner.run(["systemctl"] + list(args))
        return rc, (out + err).strip()

    def write(self, path, content, mode=0o644):
        changed, diff = write_file(path, content, mode=mode, check_mode=self.check)
        if changed:
            self.changed = True
            self.diffs.append(diff)
        return changed

    def state(self):
        text = read_text(os.path.join(self.p["state_dir"], "state.json"))
        try:
            return json.loads(text) if text else {}
        except ValueError:
            return {}

    def settings(self):
        settings = dict(self.p["settings"] or {})
        if not settings:
            self.module.fail_json(msg="node_watch: state=present needs settings (the watcher's configuration)")
        for key in ("interval", "role", "node_ip"):
            if key not in settings:
                self.module.fail_json(msg="node_watch: settings lacks %s" % key)
        if int(settings["interval"]) < 10:
            self.module.fail_json(msg="node_watch: interval %s is under 10 s" % settings["interval"])
        return settings

    # -- the process supervisor's daemon ---------------------------------------------------------

    def daemon(self):
        """``(pid, stamp)`` of the running daemon, or ``(None, None)``."""
        text = read_text(self.pid_file)
        try:
            record = json.loads(text) if text else {}
            pid = int(record["pid"])
            with open("/proc/%d/cmdline" % pid, "rb") as fh:
                cmdline = fh.read().decode(errors="replace")
        except (ValueError, KeyError, TypeError, OSError):
            return None, None
        if self.p["script"] not in cmdline or "loop" not in cmdline:
            return None, None
        return pid, record.get("stamp")

    def stop_daemon(self):
        pid, _stamp = self.daemon()
        if pid is None:
            return False
        if not self.check:
            # Its process group: the daemon and the check it may be running.
            try:
                group = os.getpgid(pid)
                os.killpg(group, signal.SIGTERM)
            except OSError:
                return True
            if not wait_for(lambda: (not running(pid), None), timeout=10, interval=0.2)[0]:
                try:
                    os.killpg(group, signal.SIGKILL)
                except OSError:
                    pass
        return True

    def start_daemon(self, stamp):
        """The watcher detaches itself (``--daemon``: two forks, a session of its own) and writes its
        pid and ``stamp`` to the pid file; this waits for that."""
        os.makedirs(self.p["state_dir"], mode=0o755, exist_ok=True)
        os.makedirs(self.p["run_dir"], mode=0o755, exist_ok=True)
        argv = [self.p["python"], self.p["script"], "--config", self.p["config_path"], "--daemon",
                "--pid-file", self.pid_file, "--stamp", stamp, "loop"]  # fmt: skip
        out = os.path.join(self.p["state_dir"], "daemon.out")
        rc, text, _err = self.runner.run(argv, output_file=out, cwd="/")
        started = wait_for(lambda: (self.daemon()[1] == stamp, None), timeout=15, interval=0.1)[0]
        if rc != 0 or not started:
            self.module.fail_json(msg="node_watch: the watcher did not start (rc %d): %s" % (rc, text.strip()[-600:]))

    # -- the states ---------------------------------------------------------------------------------

    def present(self):
        settings = self.settings()
        config = json.dumps(settings, indent=1, sort_keys=True) + "\n"
        if not os.path.isfile(self.p["script"]):
            self.module.fail_json(msg="node_watch: no watcher script at %s (the node-check bundle)" % self.p["script"])
        self.write(self.p["config_path"], config)
        if self.p["supervisor"] == "systemd":
            self.present_systemd(int(settings["interval"]))
            return
        digest = hashlib.sha256(config.encode() + (read_text(self.p["script"]) or "").encode()).hexdigest()[:16]
        _pid, stamp = self.daemon()
        if stamp == digest:
            return
        self.changed = True
        if not self.check:
            self.stop_daemon()
            self.start_daemon(digest)

    def present_systemd(self, interval):
        name = self.p["unit_name"]
        units = self.write(self.service, render_service(self.p["python"], self.p["script"], self.p["config_path"]))
        units = self.write(self.timer, render_timer(name, interval)) or units
        if self.check:
            return
        if units:
            self.systemctl("daemon-reload")
        enabled = self.systemctl("is-enabled", name + ".timer")[0] == 0
        active = self.systemctl("is-active", name + ".timer")[0] == 0
        if units and active:
            self.systemctl("restart", name + ".timer")
        if not (enabled and active):
            rc, out = self.systemctl("enable", "--now", name + ".timer")
            if rc != 0:
                self.module.fail_json(msg="node_watch: systemctl enable --now %s.timer: %s" % (name, out))
            self.changed = True

    def absent(self):
        name = self.p["unit_name"]
        if os.path.exists(self.timer) or os.path.exists(self.service):
            self.changed = True
            if not self.check:
                self.systemctl("disable", "--now", name + ".timer")
                self.systemctl("stop", name + ".service")
                for path in (self.timer, self.service):
                    if os.path.exists(path):
                        os.unlink(path)
                self.systemctl("daemon-reload")
        self.changed = self.stop_daemon() or self.changed
        for path in (self.pid_file, self.p["config_path"], self.p["textfile"]):
            if path and os.path.lexists(path):
                self.changed = True
                if not self.check:
                    os.unlink(path)
        for path in [self.p["state_dir"]] + list(self.p["remove_also"]):
            if os.path.lexists(path):
                self.changed = True
                if self.check:
                    continue
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)


ARGUMENT_SPEC = dict(
    state=dict(type="str", choices=["present", "absent", "query"], default="present"),
    supervisor=dict(type="str", choices=["process", "systemd"], default="process"),
    settings=dict(type="dict"),
    config_path=dict(type="path", default="/etc/raygate/watch.json"),
    script=dict(type="path", default="/opt/raygate/node-check/raygate_node_watch.py"),
    python=dict(type="path", default="/usr/bin/python3"),
    state_dir=dict(type="path", default="/var/lib/raygate/watch"),
    run_dir=dict(type="path", default="/run/raygate"),
    unit_dir=dict(type="path", default="/etc/systemd/system"),
    unit_name=dict(type="str", default="raygate-watch"),
    textfile=dict(type="path", default=""),
    remove_also=dict(type="list", elements="path", default=[]),
)
REQUIRED_IF = [("state", "present", ["settings"])]


def run(module):
    watcher = Watcher(module)
    before = watcher.state()
    if module.params["state"] == "present":
        watcher.present()
    elif module.params["state"] == "absent":
        watcher.absent()
    result = dict(changed=watcher.changed, watch=before)
    if module._diff and watcher.diffs:
        result["diff"] = watcher.diffs
    module.exit_json(**result)
