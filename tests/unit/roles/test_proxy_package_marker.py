"""The dashboard proxy's nginx package: installed by the role when missing, and removed by a teardown
with raygate_teardown_purge only when raygate installed it (issue 44, item 5), as the managed Redis's.

The real task files run under ansible-playbook (local connection, no node touched): dashboard_proxy.yml
whole, and teardown_purge.yml's nginx tasks. Only the package manager is a stand-in, a module in the
probe role's library/: a package is installed when a file of its name is in a directory, so the
proxy's binary (raygate_dashboard_proxy_binary) is that file, as /usr/sbin/nginx is the package's.
Each run is checked the style's way: check mode changes nothing, then the run, then a run again
that changes nothing.
"""

import json
import os
import re
import sys

import pytest
import yaml
from role_probe import PLAYBOOK_BIN, ROLE, run_playbook, task_file

# A package manager in a directory: RAYGATE_FAKE_PACKAGES/<name> is the installed package.
FAKE_PACKAGE = """#!/usr/bin/python
import os
from ansible.module_utils.basic import AnsibleModule

module = AnsibleModule({"name": {"type": "str"}, "state": {"type": "str"}}, supports_check_mode=True)
path = os.path.join(os.environ["RAYGATE_FAKE_PACKAGES"], module.params["name"])
want = module.params["state"] == "present"
changed = os.path.exists(path) != want
with open(path + ".calls", "a") as log:
    log.write("%s%s\\n" % (module.params["state"], " (check)" if module.check_mode else ""))
if changed and not module.check_mode:
    if want:
        open(path, "w").close()
    else:
        os.remove(path)
module.exit_json(changed=changed)
"""
PURGE_TASKS = ("Ask whether raygate installed nginx", "Remove nginx when", "Forget that raygate installed nginx")


def real_tasks(name, only=None):
    """A task file of the role as written, the package module swapped for the stand-in."""
    with open(task_file(name)) as fh:
        tasks = yaml.safe_load(fh)
    if only:
        tasks = [t for t in tasks if t["name"].startswith(only)]
        assert len(tasks) == len(only), [t["name"] for t in tasks]
    for task in tasks:
        if "ansible.builtin.package" in task:
            task["fake_package"] = task.pop("ansible.builtin.package")
    return tasks


@pytest.fixture
def node(tmp_path, monkeypatch):
    """The probe role (the real defaults/ and vars/, the two task lists) and this node's paths."""
    if not os.path.exists(PLAYBOOK_BIN):
        pytest.skip("ansible-playbook is not installed next to this Python")
    role = tmp_path / "roles" / "probe"
    role.mkdir(parents=True)
    for part in ("defaults", "vars"):
        os.symlink(os.path.abspath(os.path.join(ROLE, part)), role / part)
    (role / "tasks").mkdir()
    (role / "library").mkdir()
    (role / "library" / "fake_package.py").write_text(FAKE_PACKAGE)
    (role / "tasks" / "install.yml").write_text(yaml.safe_dump(real_tasks("dashboard_proxy.yml")))
    (role / "tasks" / "purge.yml").write_text(yaml.safe_dump(real_tasks("teardown_purge.yml", PURGE_TASKS)))
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump([{"ansible.builtin.include_tasks": "{{ step }}.yml"}]))
    local = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"hosts": {"h1": local}}}))
    (tmp_path / "site.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "roles": ["probe"]}]))
    packages = tmp_path / "packages"
    packages.mkdir()
    # ansible-playbook's modules inherit it (local connection).
    monkeypatch.setenv("RAYGATE_FAKE_PACKAGES", str(packages))
    # The marker's directory does not exist yet: the install makes it (a node with nothing of raygate's).
    paths = {
        "raygate_dashboard_proxy_binary": str(packages / "nginx"),
        "_raygate_dashboard_proxy_marker": str(tmp_path / "var" / "lib" / "nginx-package-installed-by-raygate"),
    }
    (tmp_path / "paths.json").write_text(json.dumps(paths))
    return tmp_path


def play(tmp, step, check=False):
    """One run of install.yml or purge.yml; its PLAY RECAP's changed count."""
    args = ["-e", "@paths.json", "-e", "step=%s" % step] + (["--check"] if check else [])
    proc = run_playbook(tmp, *args)
    out = proc.stdout + proc.stderr
    found = re.search(r"h1\s+:\s+ok=\d+\s+changed=(\d+)\s+unreachable=0\s+failed=0", out)
    assert proc.returncode == 0 and found, out
    return int(found.group(1))


def installed(tmp):
    return (tmp / "packages" / "nginx").exists()


def marker(tmp):
    path = tmp / "var" / "lib" / "nginx-package-installed-by-raygate"
    return path.read_text() if path.exists() else None


def calls(tmp):
    path = tmp / "packages" / "nginx.calls"
    return path.read_text().splitlines() if path.exists() else []


def test_raygate_installs_nginx_marks_it_and_the_purge_removes_both(node):
    # Check mode: the install is announced, nothing installed, no marker.
    assert play(node, "install", check=True) == 1
    assert not installed(node) and marker(node) is None
    # The install, with the marker and its directory; again, nothing (the binary is there: the package
    # manager is not asked).
    assert play(node, "install") == 3
    assert installed(node) and marker(node) == "nginx\n"
    assert play(node, "install") == 0
    assert calls(node) == ["present (check)", "present"]
    # The purge: check mode announces the removal and the marker's, and does neither.
    assert play(node, "purge", check=True) == 2
    assert installed(node) and marker(node) == "nginx\n"
    assert play(node, "purge") == 2
    assert not installed(node) and marker(node) is None
    # A second teardown changes nothing, in check mode neither.
    assert play(node, "purge") == 0
    assert play(node, "purge", check=True) == 0
    assert calls(node) == ["present (check)", "present", "absent (check)", "absent"]


def test_an_nginx_that_was_there_before_raygate_stays(node):
    (node / "packages" / "nginx").write_text("")
    assert play(node, "install") == 0
    assert marker(node) is None
    assert play(node, "purge") == 0
    assert installed(node) and calls(node) == []
