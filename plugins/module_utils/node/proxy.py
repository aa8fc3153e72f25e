# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The head's HTTPS front for Ray's dashboard and jobs API (ray_node's ``dashboard_proxy``).

Ray serves its dashboard over plain HTTP only (ray#22466), so with the proxy on the dashboard
listens on 127.0.0.1 and nginx, from the distribution's packages, serves it over TLS on the head's
address and the plan's dashboard port: the same port, another address, so the firewall and the
port plan stay as they are. nginx runs as the service user (the port is above 1024; the node's
key is readable by that account), with its own configuration, pid file and temporary
directories, never the distribution's: a site's own nginx is left alone.

It follows the head: started once Ray runs with the current configuration, reloaded (SIGHUP, after
``nginx -t``) when its configuration or certificate changed (a renewal), stopped with Ray.
"""

from __future__ import annotations

import hashlib
import os
import signal

from ansible_collections.raygate.cluster.plugins.module_utils.files import read_text, write_file
from ansible_collections.raygate.cluster.plugins.module_utils.node import service_user
from ansible_collections.raygate.cluster.plugins.module_utils.node.unit import HARDENING, systemd_quote
from ansible_collections.raygate.cluster.plugins.module_utils.waiter import wait_for, wait_port

CONF_FILE = "dashboard-proxy.conf"
STAMP_FILE = "dashboard-proxy.sha256"
LOOPBACK = "127.0.0.1"


def render_conf(listen, upstream_port, cert, key, run_dir, daemon, user=None):
    """nginx's whole configuration: one TLS server on ``listen`` (``host:port``) in front of the
    dashboard on 127.0.0.1:``upstream_port``. Streaming (job logs, websockets) and uploads of any
    size (a job's working directory) pass as they are; plain HTTP to this port is refused by nginx."""
    lines = [
        "# Managed by raygate.cluster.ray_node: local changes are overwritten.",
        "# The HTTPS front of Ray's dashboard and jobs API; Ray's dashboard listens on %s only." % LOOPBACK,
        "daemon %s;" % ("on" if daemon else "off"),
    ]
    if user:
        # Only a root master reads a user directive: the workers run as the service user, not nobody.
        lines.append("user %s;" % user)
    lines += [
        "worker_processes 1;",
        "pid %s/nginx.pid;" % run_dir,
        "error_log %s/error.log warn;" % run_dir,
        "events {",
        "    worker_connections 1024;",
        "}",
        "http {",
        "    access_log off;",
        "    server_tokens off;",
    ]
    for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        lines.append("    %s_temp_path %s/%s;" % (kind, run_dir, kind))
    lines += [
        "    map $http_upgrade $raygate_connection {",
        "        default upgrade;",
        "        '' close;",
        "    }",
        "    server {",
        "        listen %s ssl;" % listen,
        "        ssl_certificate %s;" % cert,
        "        ssl_certificate_key %s;" % key,
        "        ssl_protocols TLSv1.2 TLSv1.3;",
        "        client_max_body_size 0;",
        "        location / {",
        "            proxy_pass http://%s:%s;" % (LOOPBACK, upstream_port),
        "            proxy_http_version 1.1;",
        "            proxy_set_header Host $host;",
        "            proxy_set_header Upgrade $http_upgrade;",
        "            proxy_set_header Connection $raygate_connection;",
        "            proxy_set_header X-Forwarded-Proto https;",
        "            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;",
        "            proxy_buffering off;",
        "            proxy_request_buffering off;",
        "            proxy_read_timeout 1h;",
        "            proxy_send_timeout 1h;",
        "        }",
        "    }",
        "}",
        "",
    ]
    return "\n".join(lines)


def render_unit(binary, conf, run_dir, user=None):
    """The proxy's systemd unit: nginx in the foreground as the service user, sandboxed as the
    node's unit is, its runtime directory made by systemd."""
    start = [binary, "-c", conf, "-e", run_dir + "/error.log"]
    lines = [
        "# Managed by raygate.cluster.ray_node: local changes are overwritten.",
        "[Unit]",
        "Description=HTTPS proxy of the Ray dashboard (raygate)",
        "Wants=network-online.target",
        "After=network-online.target",
        "",
        "[Service]",
        "Type=simple",
    ]
    if user and user != service_user.ROOT:
        lines.append("User=%s" % user)
        lines += list(HARDENING)
    lines += [
        "RuntimeDirectory=%s" % os.path.basename(run_dir),
        "ExecStartPre=%s" % " ".join(systemd_quote(a) for a in start + ["-t", "-q"]),
        "ExecStart=%s" % " ".join(systemd_quote(a) for a in start),
        "ExecReload=/bin/kill -HUP $MAINPID",
        "Restart=always",
        "RestartSec=5",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    return "\n".join(lines)


def listen_address(host, port):
    return "[%s]:%s" % (host, port) if ":" in host else "%s:%s" % (host, port)


class DashboardProxy:
    """The head's ``dashboard_proxy`` options; runs, fails and warns through the node."""

    def __init__(self, node):
        self.node = node
        self.p = node.p
        self.run_dir = self.p["dashboard_proxy_run_dir"]
        self.conf_path = os.path.join(self.p["config_dir"], CONF_FILE)
        self.stamp_path = os.path.join(self.p["state_dir"], STAMP_FILE)
        self.unit_name = self.p["dashboard_proxy_unit"]
        self.unit_path = os.path.join(self.p["unit_dir"], self.unit_name + ".service")

    # -- what it is to be -------------------------------------------------------------
    def on(self):
        return bool(self.p["dashboard_proxy"]) and self.p["role"] == "head"

    def systemd(self):
        return self.p["supervisor"] == "systemd"

    def cert_paths(self):
        """The certificate and key nginx serves: the site's own (files on the head), else the node's."""
        if self.p["dashboard_proxy_cert"]:
            return self.p["dashboard_proxy_cert"], self.p["dashboard_proxy_key"]
        return self.node.tls.cert_path, self.node.tls.key_path

    def check(self):
        """Fails before anything changes: no certificate to serve, half of one, or no nginx."""
        if not self.on():
            return
        cert, key = self.p["dashboard_proxy_cert"], self.p["dashboard_proxy_key"]
        if bool(cert) != bool(key):
            self.node.fail(
                "dashboard_proxy: give dashboard_proxy_cert and dashboard_proxy_key together (paths on the head)"
            )
        if not cert and not self.p["tls"]:
            self.node.fail(
                "dashboard_proxy serves the head's TLS certificate, but tls is off: turn tls on (the role's "
                "raygate_tls) or give dashboard_proxy_cert and dashboard_proxy_key (the role's "
                "raygate_dashboard_tls_cert and raygate_dashboard_tls_key)"
            )
        if self.p["dashboard_host"] not in (None, "", LOOPBACK):
            self.node.fail(
                "dashboard_host %s and dashboard_proxy together: behind the proxy Ray's dashboard listens on %s; "
                "unset dashboard_host" % (self.p["dashboard_host"], LOOPBACK)
            )
        for path in (cert, key) if cert else ():
            if not os.path.isfile(path) and not self.node.module.check_mode:
                self.node.fail("dashboard_proxy: %s is not a file on this node" % path)
        binary = self.p["dashboard_proxy_binary"]
        if not os.access(binary, os.X_OK) and not self.node.module.check_mode:
            self.node.fail(
                "dashboard_proxy: %s is not there; install nginx from the distribution's packages (the role "
                "does on the head) or set dashboard_proxy_binary" % binary
            )

    def bind_address(self):
        """The address Ray's dashboard listens on: loopback behind the proxy, else the node's."""
        if self.on():
            return LOOPBACK
        return self.p["dashboard_host"] or self.p["node_ip"]

    def url(self, plan):
        return "https://%s" % listen_address(self.p["node_ip"], plan["dashboard"])

    def dashboard_url(self, plan):
        """What users reach the dashboard at: the proxy's HTTPS, else Ray's own HTTP."""
        if self.on():
            return self.url(plan)
        return "http://%s:%s" % (self.bind_address(), plan["dashboard"])

    def follow(self, plan, result):
        """The proxy run (or reloaded) for the head's Ray that runs now; ``result`` with what it did."""
        if not self.on():
            return result
        done = self.ensure(plan)
        return dict(result, changed=result["changed"] or done["changed"], dashboard_proxy=done)

    def conf(self, plan):
        cert, key = self.cert_paths()
        user = self.node.run_as.user()
        as_root = user is None or user.is_root
        return render_conf(
            listen_address(self.p["node_ip"], plan["dashboard"]),
            plan["dashboard"],
            cert,
            key,
            self.run_dir,
            daemon=not self.systemd(),
            user=service_user.ROOT if as_root and not self.systemd() else None,
        )

    def unit(self):
        return render_unit(self.p["dashboard_proxy_binary"], self.conf_path, self.run_dir, user=self.p["user"])

    def stamp(self, conf):
        """What the running proxy must have loaded: its configuration and the certificate's files."""
        cert, key = self.cert_paths()
        text = conf + (read_text(cert) or "") + (read_text(key) or "")
        return hashlib.sha256(text.encode()).hexdigest()

    # -- what runs --------------------------------------------------------------------
    def master_pid(self):
        """The running proxy's master (its pid file, a live nginx with our configuration), or None."""
        text = read_text(os.path.join(self.run_dir, "nginx.pid"))
        try:
            pid = int((text or "").strip())
        except ValueError:
            return None
        cmdline = read_text("/proc/%d/cmdline" % pid)
        if cmdline is None or self.conf_path not in cmdline.replace("\0", " "):
            return None
        return pid

    def pids(self):
        """The proxy's processes (master and workers): their listeners are raygate's own."""
        master = self.master_pid()
        if master is None:
            return set()
        found = {master}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            stat = read_text("/proc/%s/stat" % entry)
            if stat and stat.rsplit(")", 1)[-1].split()[1:2] == [str(master)]:
                found.add(int(entry))
        return found

    def installed(self):
        """Whether this node has the proxy's configuration or unit (whatever dashboard_proxy says now)."""
        return os.path.exists(self.conf_path) or os.path.exists(self.unit_path)

    def running(self):
        if self.systemd():
            rc, out, err = self.node.run(["systemctl", "is-active", self.unit_name])
            return out.strip() == "active"
        return self.master_pid() is not None

    # -- changes ----------------------------------------------------------------------
    def ensure(self, plan):
        """Run the proxy with the current configuration and certificate; what it did."""
        conf = self.conf(plan)
        check_mode = self.node.module.check_mode
        changed = write_file(self.conf_path, conf, check_mode=check_mode)[0]
        unit_changed = self.systemd() and write_file(self.unit_path, self.unit(), check_mode=check_mode)[0]
        changed = changed or unit_changed
        running = self.running()
        loaded = read_text(self.stamp_path)
        stamp = self.stamp(conf)
        settled = running and not changed and (loaded is None or loaded.strip() == stamp)
        if check_mode:
            action = "none" if settled else ("reload" if running else "start")
            return {"url": self.url(plan), "action": action, "changed": action != "none"}
        if settled:
            if loaded is None:
                # A proxy with no record in /run: the unit started it at boot, from these very files.
                write_file(self.stamp_path, stamp + "\n")
            return {"url": self.url(plan), "action": "none", "changed": False}
        self.test()
        action = "reload" if running else "start"
        if self.systemd():
            self.systemctl(["daemon-reload"])
            self.systemctl(["enable", self.unit_name])
            self.systemctl(["reload" if running and not unit_changed else "restart", self.unit_name])
        elif running:
            os.kill(self.master_pid(), signal.SIGHUP)
        else:
            self.start_daemon()
        write_file(self.stamp_path, stamp + "\n")
        self.wait_listening(plan)
        return {"url": self.url(plan), "action": action, "changed": True}

    def prepare_run_dir(self):
        user = self.node.run_as.user()
        if not os.path.isdir(self.run_dir):
            os.makedirs(self.run_dir, mode=0o755)
        if user is not None and not user.is_root:
            service_user.own_tree(self.run_dir, user)

    def nginx(self, extra):
        return [self.p["dashboard_proxy_binary"], "-c", self.conf_path, "-e", self.run_dir + "/error.log"] + extra

    def test(self):
        """``nginx -t`` as the account that will run it: a bad certificate or a key it cannot read
        fails here, naming nginx's own words, before a running proxy is touched."""
        self.prepare_run_dir()
        rc, out, err = self.node.run(self.nginx(["-t", "-q"]), user=self.node.run_as.user())
        if rc != 0:
            self.node.fail(
                "the dashboard's HTTPS proxy (nginx) refuses its configuration %s: %s"
                % (self.conf_path, (err or out).strip())
            )

    def start_daemon(self):
        log = os.path.join(self.run_dir, "start.log")
        rc, out, err = self.node.run(self.nginx([]), output_file=log, user=self.node.run_as.user(), cwd="/")
        if rc != 0:
            self.node.fail("the dashboard's HTTPS proxy (nginx) did not start (rc=%s): %s" % (rc, out.strip()[-2000:]))

    def systemctl(self, args):
        rc, out, err = self.node.run(["systemctl"] + args)
        if rc != 0:
            self.node.fail("systemctl %s failed: %s" % (" ".join(args), (err or out).strip()))

    def wait_listening(self, plan):
        """Until the proxy accepts connections on the head's address and the dashboard's port."""
        address = (self.p["node_ip"], int(plan["dashboard"]))
        ok, last, elapsed = wait_port(address, timeout=30)
        if not ok:
            log = read_text(os.path.join(self.run_dir, "error.log")) or ""
            self.node.fail(
                "the dashboard's HTTPS proxy (nginx) does not listen on %s:%s (last error: %s); its log: %s"
                % (address[0], address[1], last, log.strip()[-1500:])
            )

    def stop(self):
        """Stop the proxy, under either supervisor; True when one ran."""
        was = False
        if self.systemd() and os.path.exists(self.unit_path):
            was = self.running()
            self.node.run(["systemctl", "stop", self.unit_name], timeout=60)
        master = self.master_pid()
        if master is not None:
            was = True
            try:
                os.kill(master, signal.SIGTERM)
            except ProcessLookupError:
                pass
            wait_for(lambda: (self.master_pid() is None and not self.pids(), None), timeout=30, interval=0.1)
        self.forget()
        return was

    def forget(self):
        """Drop the record of what the proxy loaded (it is not running, or about to be stopped)."""
        if os.path.lexists(self.stamp_path):
            os.unlink(self.stamp_path)

    def disable(self):
        self.node.run(["systemctl", "disable", self.unit_name])

    def removable(self):
        """The proxy's files a teardown removes (its configuration and unit; a site's own certificate
        stays). Not its stamp: stop() removes that, with the proxy it describes."""
        paths = [self.conf_path, self.unit_path]
        return [path for path in paths if os.path.lexists(path)]
