"""With the firewall on: move an object between two workers, and report, from a task on
every node, the NCCL/FI variables the task sees next to the node's env file (JSON)."""

import json
import os
import shlex
import sys

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

PREFIXES = ("NCCL_", "FI_", "OFI_NCCL_")


def read_env_file(path):
    env = {}
    with open(path) as fh:
        for line in fh:
            line = line.strip()
            if line and not line.startswith("#"):
                key, _sep, value = line.partition("=")
                env[key] = shlex.split(value)[0] if value else ""
    return env


@ray.remote(num_cpus=1)
def seen(path):
    return {
        "ip": ray.util.get_node_ip_address(),
        "task_env": {k: v for k, v in os.environ.items() if k.startswith(PREFIXES)},
        "file_env": read_env_file(path),
    }


@ray.remote(num_cpus=1)
def produce(size):
    return b"r" * size


@ray.remote(num_cpus=1)
def consume(blob):
    return {"ip": ray.util.get_node_ip_address(), "bytes": len(blob)}


def pinned(fn, node):
    return fn.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False))


def main(address, env_path):
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    nodes = sorted((n for n in ray.nodes() if n["Alive"]), key=lambda n: n["NodeManagerAddress"])
    envs = ray.get([pinned(seen, n).remote(env_path) for n in nodes], timeout=300)
    # 20 MB lives in the object store of the first worker and must travel to the second.
    workers = [n for n in nodes if n["NodeManagerAddress"] != ray.util.get_node_ip_address()]
    blob = pinned(produce, workers[0]).remote(20 * 1024 * 1024)
    moved = ray.get(pinned(consume, workers[1]).remote(blob), timeout=300)
    print(json.dumps({"envs": envs, "moved": dict(moved, source=workers[0]["NodeManagerAddress"])}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
