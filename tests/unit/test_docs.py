"""docs/ARCHITECTURE.md and CONTRIBUTING.md kept true by a test instead of by memory.

docs/ARCHITECTURE.md has one section per folder of plugins/, its heading naming the folder in
backticks (### `plugins/module_utils/node/`: ...). The rules:

- Every .py file under plugins/ (but __init__.py) is named, by its basename in backticks, in the
  section of its own folder. A name elsewhere on the page does not count: `cluster_lock.py` is in
  four folders, and each must be described where it lives.
- Every task file of roles/raygate/tasks/ is named in backticks in the role's section (the heading
  naming `roles/raygate/tasks/`). No pattern stands for several: each file has its own concern.
- Every `*.py` and `*.yml` the page names in backticks exists. A name with a slash resolves from the
  repository root, plugins/, plugins/module_utils/, plugins/plugin_utils/, roles/raygate/ or the
  section's folder; a bare name from the section's folder, roles/raygate/tasks/, playbooks/ or
  plugins/filter/ (the filters' documentation).

CONTRIBUTING.md exists at the root, and every path it names in backticks (a word with a slash, or
ending in a file suffix) exists in the repository.
"""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS = os.path.join(ROOT, "plugins")
TASKS = os.path.join(ROOT, "roles", "raygate", "tasks")
ARCHITECTURE = os.path.join(ROOT, "docs", "ARCHITECTURE.md")
CONTRIBUTING = os.path.join(ROOT, "CONTRIBUTING.md")
ROLE_SECTION = "roles/raygate/tasks/"
# Where a name with a slash may be rooted, besides the section's own folder.
PATH_BASES = ["", "plugins", "plugins/module_utils", "plugins/plugin_utils", "roles/raygate"]
# Where a bare file name may be, besides the section's own folder.
NAME_BASES = ["roles/raygate/tasks", "playbooks", "plugins/filter"]
TICKED = re.compile(r"`([^`\n]+)`")
FILE_NAME = re.compile(r"^[A-Za-z0-9_./-]+\.(py|yml)$")
# A path in CONTRIBUTING.md: no spaces, and a slash or a file suffix.
PATH_LIKE = re.compile(
    r"^[A-Za-z0-9_.-]*(/[A-Za-z0-9_.-]*)+$"
    r"|^[A-Za-z0-9_-]+\.(py|yml|yaml|md|rst|sh|txt|cfg|ini|toml)$"
)


def read(path):
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def sections(text):
    """[(folder or None, text)]: each heading's section, up to the next heading of any level. The
    folder is the first `plugins/.../` or `roles/.../` path in backticks in its heading."""
    found, folder, lines, fence = [], None, [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        if line.startswith("#") and not fence:
            found.append((folder, "\n".join(lines)))
            folders = [t for t in TICKED.findall(line) if t.endswith("/") and t.startswith(("plugins/", "roles/"))]
            folder, lines = (folders[0] if folders else None), [line]
        else:
            lines.append(line)
    found.append((folder, "\n".join(lines)))
    return found


def section_of(text, folder):
    """The text of the section whose heading names ``folder`` (all of them, joined)."""
    return "\n".join(body for name, body in sections(text) if name == folder)


def plugin_files():
    for base, dirs, files in os.walk(PLUGINS):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py") and name != "__init__.py":
                yield os.path.relpath(os.path.join(base, name), ROOT)


def missing_plugin_files(text):
    """The plugins/ files not named in their folder's section of ``text``."""
    missing = []
    for path in plugin_files():
        folder, name = os.path.dirname(path) + "/", os.path.basename(path)
        if "`%s`" % name not in section_of(text, folder):
            missing.append(path)
    return missing


def exists(name, folder):
    if "/" in name:
        bases = PATH_BASES + ([folder] if folder else [])
    else:
        bases = ([folder] if folder else []) + NAME_BASES
    return any(os.path.isfile(os.path.join(ROOT, base, name)) for base in bases)


def named_files(text):
    """(folder, name) for every `*.py` or `*.yml` name in backticks, with its section's folder."""
    for folder, body in sections(text):
        for ticked in TICKED.findall(body):
            if FILE_NAME.match(ticked):
                yield folder, ticked


@pytest.fixture(scope="module")
def architecture():
    return read(ARCHITECTURE)


def test_every_plugins_folder_has_its_section(architecture):
    folders = sorted({os.path.dirname(path) + "/" for path in plugin_files()})
    headed = {folder for folder, _body in sections(architecture)}
    assert not set(folders) - headed, "folders of plugins/ with no section in docs/ARCHITECTURE.md: %s" % sorted(
        set(folders) - headed
    )


def test_every_plugins_file_is_named_in_its_folders_section(architecture):
    missing = missing_plugin_files(architecture)
    assert not missing, "not named in backticks in their folder's section of docs/ARCHITECTURE.md: %s" % missing


def test_a_file_left_out_of_its_section_is_found():
    # The rule can fail: take one file's name out of its section and the check names it.
    text = read(ARCHITECTURE)
    body = section_of(text, "plugins/module_utils/node/")
    cut = text.replace(body, body.replace("`cluster_lock.py`", "`the lock`"))
    assert missing_plugin_files(cut) == ["plugins/module_utils/node/cluster_lock.py"]


def test_every_role_task_file_is_named_in_the_roles_section(architecture):
    body = section_of(architecture, ROLE_SECTION)
    assert body, "docs/ARCHITECTURE.md has no section whose heading names `%s`" % ROLE_SECTION
    files = sorted(name for name in os.listdir(TASKS) if name.endswith(".yml"))
    missing = [name for name in files if "`%s`" % name not in body]
    assert not missing, "task files not named in the role's section of docs/ARCHITECTURE.md: %s" % missing


def test_every_file_the_architecture_names_exists(architecture):
    named = named_files(architecture)
    gone = sorted({"%s (section %s)" % (name, folder) for folder, name in named if not exists(name, folder)})
    assert not gone, "docs/ARCHITECTURE.md names files that do not exist: %s" % gone


def test_a_file_that_is_gone_is_found():
    assert exists("node/cluster_lock.py", None)
    assert not exists("node/cluster_lock2.py", None)
    assert exists("cluster_lock.py", "plugins/action/")
    assert not exists("cluster_lock.py", None), "a bare name outside a folder's section must not resolve by luck"


def contributing_paths(text):
    return sorted({t.rstrip("/") for t in TICKED.findall(text) if PATH_LIKE.match(t) and t not in ("/",)})


def test_contributing_exists_and_every_path_it_names_exists():
    assert os.path.isfile(CONTRIBUTING), "CONTRIBUTING.md is missing at the repository root"
    paths = contributing_paths(read(CONTRIBUTING))
    assert paths, "CONTRIBUTING.md names no file"
    gone = [p for p in paths if not os.path.exists(os.path.join(ROOT, p))]
    assert not gone, "CONTRIBUTING.md names paths that do not exist: %s" % gone


def test_contributing_paths_are_what_looks_like_a_path():
    text = "`make fast` `raygate_x` `plugins/modules/ray_firewall.py` `CHANGELOG.rst` `galaxy.yml`, `tools/`"
    assert contributing_paths(text) == ["CHANGELOG.rst", "galaxy.yml", "plugins/modules/ray_firewall.py", "tools"]
