# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Bring-up (c) and re-run (d) of site.yml with raygate_runtime container against venv, on the sandbox.

For each N (default 3 and 6), on fresh sandbox nodes (root; `make image` first):

- venv: site.yml once to install the pinned Ray, teardown.yml (which keeps the virtualenv), then (c)
  site.yml and (d) site.yml again, then teardown.yml: the virtualenv is there, as the image is "warm";
- container, cold: the image is in no node's storage, so (c) pulls it on every node (from a registry
  on the sandbox bridge, serving `make image`'s registry data); (d) again; teardown.yml keeps the image;
- container, warm: (c) with the image there on every node, (d) again; teardown.yml with purge;
- the pull alone: `podman pull` of the image on node1, nothing else running.

Writes .build/bench/container.json and the part of docs/BENCHMARKS.md between its markers. Timing
only: the suites (tests/integration/container) assert the behaviour. A re-run that restarted a
container is reported (the container's start time before and after).
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bringup  # noqa: E402

ROOT = bringup.ROOT
SANDBOX = bringup.SANDBOX
IMAGE_STATE = "/srv/raygate/image"
REGISTRY = "198.18.0.1:5051"
MARK_BEGIN = "<!-- bench-container:begin (written by bench/container.py; edit outside the markers) -->"
MARK_END = "<!-- bench-container:end -->"
CDI_SPEC = (
    "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n  - name: all\n    containerEdits:\n"
    "      deviceNodes:\n        - path: /dev/nvidia0\n          hostPath: /dev/null\n"
)


def sh(index, command):
    return bringup.run([SANDBOX, "exec", str(index), "bash", "-c", command], check=False)


def registry(work):
    with open(os.path.join(IMAGE_STATE, "registry", "config.yml"), encoding="utf-8") as fh:
        config = fh.read().replace("127.0.0.1:5050", REGISTRY)
    path = os.path.join(work, "bench-registry.yml")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(config)
    proc = subprocess.Popen(["docker-registry", "serve", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        answer = bringup.run(
            ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://%s/v2/" % REGISTRY], check=False
        )
        if answer.stdout.strip() == "200":
            return proc
        time.sleep(0.5)
    proc.terminate()
    raise SystemExit("bench: the registry on %s did not answer" % REGISTRY)


def started(n):
    return [sh(i, "podman inspect --format '{{.State.StartedAt}}' raygate-ray").stdout.strip() for i in range(1, n + 1)]


def one_size(bench, n, image, work):
    bringup.run([SANDBOX, "down"], check=False)
    bringup.run([SANDBOX, "up", str(n)])
    # On the bridge, which exists while the sandbox is up.
    proc = registry(work)
    try:
        return measure(bench, n, image, work)
    finally:
        proc.terminate()
        bringup.run([SANDBOX, "down"], check=False)


def measure(bench, n, image, work):
    for i in range(1, n + 1):
        sh(i, "mkdir -p /etc/cdi && cat > /etc/cdi/site-nvidia.yaml <<'EOF'\n%sEOF" % CDI_SPEC)
    inv = bench.inventory(n)
    extra = os.path.join(work, "container-vars.yml")
    with open(extra, "w", encoding="utf-8") as fh:
        fh.write(
            "raygate_runtime: container\nraygate_image: %s\nraygate_image_registry_tls_verify: false\n"
            "raygate_container_ulimits: [nofile=20000:20000, nproc=32768:32768]\n" % image
        )
    box = ["-e", "@" + extra]
    row = {"nodes": n}
    bench.playbook(inv, "site.yml")  # the venv's install, not measured
    bench.playbook(inv, "teardown.yml")
    row["venv_c"] = bench.playbook(inv, "site.yml")
    row["venv_d"] = bench.playbook(inv, "site.yml")
    bench.playbook(inv, "teardown.yml", extra_args=["-e", "raygate_teardown_purge=true"])
    row["container_cold_c"] = bench.playbook(inv, "site.yml", extra_args=box)
    before = started(n)
    row["container_cold_d"] = bench.playbook(inv, "site.yml", extra_args=box)
    row["restarted_cold_d"] = sum(1 for a, b in zip(before, started(n)) if a != b)
    bench.playbook(inv, "teardown.yml", extra_args=box)
    row["container_warm_c"] = bench.playbook(inv, "site.yml", extra_args=box)
    before = started(n)
    row["container_warm_d"] = bench.playbook(inv, "site.yml", extra_args=box)
    row["restarted_warm_d"] = sum(1 for a, b in zip(before, started(n)) if a != b)
    bench.playbook(inv, "teardown.yml", extra_args=box + ["-e", "raygate_teardown_purge=true"])
    t0 = time.monotonic()
    pulled = sh(1, "podman pull -q --tls-verify=false %s" % image)
    row["pull_one_node"] = time.monotonic() - t0 if pulled.returncode == 0 else None
    sh(1, "podman rmi -f %s" % image)
    return row


def render(doc):
    lines = [
        MARK_BEGIN,
        "",
        "## Container runtime against venv (issue 43)",
        "",
        "%s, commit %s, %s. Seconds of wall time, one run each." % (doc["date"], doc["commit"], doc["machine"]),
        "",
        "| N | venv (c) | venv (d) | container cold (c) | cold (d) | container warm (c) | warm (d) "
        "| warm (c) / venv (c) | pull, one node alone | containers restarted by (d) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["rows"]:
        pull = "%.1f" % r["pull_one_node"] if r["pull_one_node"] is not None else "failed"
        lines.append(
            "| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %s | %d |"
            % (
                r["nodes"], r["venv_c"], r["venv_d"], r["container_cold_c"], r["container_cold_d"],
                r["container_warm_c"], r["container_warm_d"], r["container_warm_c"] / r["venv_c"], pull,
                r["restarted_cold_d"] + r["restarted_warm_d"],
            )
        )  # fmt: skip
    lines += ["", MARK_END]
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="3,6")
    parser.add_argument("--doc", default=os.path.join(ROOT, "docs", "BENCHMARKS.md"))
    parser.add_argument("--json", default=os.path.join(ROOT, ".build", "bench", "container.json"))
    parser.add_argument("--image-out", default=os.path.join(ROOT, ".build", "image"))
    parser.add_argument("--ray-version", default="2.60.0")
    parser.add_argument("--ray", default=os.path.join(ROOT, ".build", "bench-venv", "bin", "ray"))
    parser.add_argument("--ansible-playbook", default=os.path.join(ROOT, ".venv", "bin", "ansible-playbook"))
    args = parser.parse_args(argv)
    with open(os.path.join(args.image_out, "ray-%s.digest" % args.ray_version), encoding="utf-8") as fh:
        image = "%s/raygate/ray@%s" % (REGISTRY, fh.read().strip())
    bench = bringup.Bench(args)
    os.makedirs(bench.work, exist_ok=True)
    bringup.run([os.path.join(ROOT, "tools", "image", "build.sh"), "registry", "start"])
    rows = [one_size(bench, int(n), image, bench.work) for n in args.nodes.split(",")]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT, check=False
    )
    cores = os.cpu_count()
    doc = {
        "date": time.strftime("%Y-%m-%d"),
        "commit": commit.stdout.strip(),
        "machine": "%d cores" % cores,
        "rows": rows,
    }
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
    with open(args.doc, encoding="utf-8") as fh:
        existing = fh.read()
    merged = bringup.merge_doc(existing, render(doc), begin=MARK_BEGIN, end=MARK_END)
    with open(args.doc, "w", encoding="utf-8") as fh:
        fh.write(merged)
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
