# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""What Ray's mutual TLS (raygate_tls) costs, on the 3 sandbox nodes: site.yml's bring-up, and one
1 GiB object moved from a worker to the head, with TLS off and on, k times each (default 3).

Each round takes the cluster down (teardown.yml keeps the virtualenv) and brings it up with the
setting, the health gate off (its checks are the same either way), then a driver on the head (as
the service user, as Ray's own processes) makes a 1 GiB array on node2 and times ``ray.get`` of it
on the head, three objects a round. It writes its table into docs/BENCHMARKS.md between its
markers. Run as root through `make bench-tls`; never in CI (about 10 minutes).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bringup import merge_doc  # noqa: E402  (bench/ is not a package)

SANDBOX = os.path.join(ROOT, "tests", "sandbox", "sandbox.sh")
PLAYBOOK = os.path.join(ROOT, ".venv", "bin", "ansible-playbook")
INVENTORY = os.path.join(ROOT, "inventories", "sandbox")
MARK_BEGIN = "<!-- tls:begin (written by bench/tls.py; edit outside the markers) -->"
MARK_END = "<!-- tls:end -->"
HEAD, WORKER = "198.18.0.11", "198.18.0.12"
# A gate-less bring-up with object stores that hold a 1 GiB object (the sandbox's are 256 MiB).
EXTRA = ["-e", "raygate_health_gate=false", "-e", "raygate_object_store_memory=1610612736",
         "-e", "raygate_memory=3221225472"]  # fmt: skip
TLS_ENV = (
    "RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=/etc/raygate/auth_token RAY_USE_TLS=1 "
    "RAY_TLS_SERVER_CERT=/etc/raygate/tls/node.crt RAY_TLS_SERVER_KEY=/etc/raygate/tls/node.key "
    "RAY_TLS_CA_CERT=/etc/raygate/tls/ca.crt"
)
PLAIN_ENV = "RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH=/etc/raygate/auth_token"
MOVE = """
import time, ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy as On
ray.init(address="%(head)s:6379", logging_level="ERROR", log_to_driver=False)
worker = [n["NodeID"] for n in ray.nodes() if n["Alive"] and n["NodeManagerAddress"] == "%(worker)s"][0]
@ray.remote(num_cpus=0)
def make():
    return b"\x01" * (1 << 30)
for _ in range(%(count)d):
    ref = make.options(scheduling_strategy=On(worker, soft=False)).remote()
    ray.wait([ref], fetch_local=False)
    start = time.monotonic()
    data = ray.get(ref)
    print("MOVED %%d %%.3f" %% (len(data), time.monotonic() - start))
    del data, ref
"""


def run(cmd, timeout=1800):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise SystemExit(
            "%s failed (rc=%d):\n%s" % (" ".join(cmd), proc.returncode, (proc.stdout + proc.stderr)[-3000:])
        )
    return proc.stdout


def play(name, tls):
    start = time.monotonic()
    run([PLAYBOOK, "-i", INVENTORY, os.path.join(ROOT, name), "-e", "raygate_tls=%s" % str(tls).lower()] + EXTRA)
    return time.monotonic() - start


def move(tls, count):
    env = TLS_ENV if tls else PLAIN_ENV
    script = MOVE % {"head": HEAD, "worker": WORKER, "count": count}
    # As the service user: a root driver leaves root's directories in the session, which Ray's
    # own processes (raygate_user) then cannot write.
    driver = "cd / && runuser -u ray -- env %s /opt/raygate/current/bin/python - <<'EOF'\n%s\nEOF" % (env, script)
    out = run([SANDBOX, "exec", "1", "bash", "-c", driver])
    return [float(m.group(2)) for m in re.finditer(r"^MOVED (\d+) ([0-9.]+)$", out, re.M) if int(m.group(1)) == 1 << 30]


def median(values):
    return "%.2f s (%.2f-%.2f)" % (statistics.median(values), min(values), max(values)) if values else "-"


def render(results, rounds, date):
    off, on = results["off"], results["on"]

    def ratio(key):
        return "x%.2f" % (statistics.median(on[key]) / statistics.median(off[key])) if off[key] and on[key] else "-"

    return "\n".join([
        "Measured by `make bench-tls` on %s: 3 sandbox nodes on this 2-core machine, %d rounds a setting, "
        "the health gate off; medians (min-max)." % (date, rounds),
        "",
        "| | TLS off | TLS on (`raygate_tls`, the default) | on / off |",
        "| --- | --- | --- | --- |",
        "| site.yml bring-up, to all joined | %s | %s | %s |" % (median(off["up"]), median(on["up"]), ratio("up")),
        "| one 1 GiB object, worker to head (`ray.get`) | %s | %s | %s |"
        % (median(off["move"]), median(on["move"]), ratio("move")),
    ])  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--objects", type=int, default=3, help="1 GiB objects moved per round")
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs", "BENCHMARKS.md"))
    args = parser.parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("bench/tls.py needs root (the sandbox)")
    run([SANDBOX, "up", "3"], timeout=300)  # the sandbox inventory's three nodes
    results = {"off": {"up": [], "move": []}, "on": {"up": [], "move": []}}
    try:
        play("site.yml", True)  # installs Ray once; every round starts from "installed, not running"
        for _round in range(args.rounds):
            for tls in (False, True):
                play("teardown.yml", tls)
                key = "on" if tls else "off"
                results[key]["up"].append(play("site.yml", tls))
                results[key]["move"] += move(tls, args.objects)
                print(key, json.dumps(results[key]), flush=True)
        play("teardown.yml", True)
    finally:
        run([SANDBOX, "down"], timeout=300)
    block = render(results, args.rounds, datetime.date.today().isoformat())
    print(block)
    with open(args.doc) as fh:
        text = fh.read()
    with open(args.doc, "w") as fh:
        fh.write(merge_doc(text, "%s\n%s\n%s" % (MARK_BEGIN, block, MARK_END), begin=MARK_BEGIN, end=MARK_END))


if __name__ == "__main__":
    main()
