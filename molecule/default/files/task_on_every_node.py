"""Run one Ray task pinned to each alive node and print where each ran (JSON)."""

import json
import socket
import sys

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy


@ray.remote(num_cpus=1)
def where():
    return {"ip": ray.util.get_node_ip_address(), "hostname": socket.gethostname()}


def main(address):
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    nodes = [n for n in ray.nodes() if n["Alive"]]
    refs = [
        where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
        for n in nodes
    ]
    print(json.dumps({"nodes": len(nodes), "ran_on": ray.get(refs, timeout=300)}))


if __name__ == "__main__":
    main(sys.argv[1])
