"""Try a TCP connect to HOST on each PORT; print {port: open|refused|timeout} as JSON.

The ports are tried side by side: a port the firewall drops costs its whole timeout, and one after
the other the probes of a closed node added those up (verify's slowest tasks)."""

import json
import socket
import sys
from concurrent.futures import ThreadPoolExecutor


def probe(host, port, timeout):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return "open"
    except ConnectionRefusedError:
        return "refused"
    except OSError:
        return "timeout"


def main(host, ports, timeout=3.0):
    with ThreadPoolExecutor(max_workers=max(1, len(ports))) as pool:
        results = list(pool.map(lambda p: probe(host, int(p), timeout), ports))
    print(json.dumps({str(p): r for p, r in zip(ports, results)}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
