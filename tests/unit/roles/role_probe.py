"""What the role tests that template the role with ansible-playbook share: paths, and one run of a
probe playbook (local connection, no node touched, the repository's ansible.cfg left out)."""

import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
ROLE = os.path.join(ROOT, "roles", "raygate")
COLLECTIONS = os.path.join(ROOT, ".build", "collections")
PLAYBOOK_BIN = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")


def run_playbook(tmp, *args):
    """ansible-playbook -i inventory.yml site.yml in TMP (then ARGS), with TMP/roles as the roles path."""
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.abspath(COLLECTIONS), ANSIBLE_ROLES_PATH=str(tmp / "roles"))
    env.pop("ANSIBLE_CONFIG", None)
    return subprocess.run(
        [PLAYBOOK_BIN, "-i", "inventory.yml", "site.yml", *args],
        cwd=tmp,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
