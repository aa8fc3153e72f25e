"""Try a TCP connect to HOST on each PORT; print {port: open|refused|timeout} as JSON."""

import json
import socket
import sys


def probe(host, port, timeout):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return "open"
    except ConnectionRefusedError:
        return "refused"
    except OSError:
        return "timeout"


def main(host, ports, timeout=3.0):
    print(json.dumps({str(p): probe(host, int(p), timeout) for p in ports}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
