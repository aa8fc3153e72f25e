"""What the role tests that template the role with ansible-playbook share: paths, and one run of a
probe playbook (local connection, no node touched, the repository's ansible.cfg left out)."""

import os
import subprocess
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "..")
ROLES = os.path.join(ROOT, "roles")
# The shared role: the defaults and the derived values a probe role links to.
ROLE = os.path.join(ROLES, "_common")


def task_file(name):
    """The path of the task file NAME, in whichever of the collection's roles holds it."""
    found = [
        os.path.join(ROLES, r, "tasks", name)
        for r in sorted(os.listdir(ROLES))
        if os.path.exists(os.path.join(ROLES, r, "tasks", name))
    ]
    assert len(found) == 1, "task file %s: %s" % (name, found or "in no role")
    return found[0]


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
