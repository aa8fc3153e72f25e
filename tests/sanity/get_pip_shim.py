"""Offline stand-in for the get-pip script that ansible-test downloads.

ansible-test bootstraps each of its virtualenvs by running a cached get-pip script
(~/.ansible/test/cache/get_pip_<version>.py). That host is unreachable from CI, so
this script takes its place: pip comes from the interpreter's own ensurepip, then the
requested packages come from the package registry (PyPI), which CI can reach.
"""

import subprocess
import sys

# get-pip-only flags that plain `pip install` does not know.
GET_PIP_ONLY = {"--no-setuptools", "--no-wheel"}


def main(argv):
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"])
    args = [a for a in argv if a not in GET_PIP_ONLY]
    subprocess.check_call([sys.executable, "-m", "pip", "install"] + args)


if __name__ == "__main__":
    main(sys.argv[1:])
