"""docs/ARCHITECTURE.md and CONTRIBUTING.md kept true by a test instead of by memory.

docs/ARCHITECTURE.md has one section per folder of plugins/ and one per role, its heading naming the
folder in backticks (### `plugins/module_utils/node/`: ..., ### `roles/ray_node/tasks/`: ...). The
rules:

- Every .py file under plugins/ (but __init__.py) is named, by its basename in backticks, in the
  section of its own folder. A name elsewhere on the page does not count: `cluster_lock.py` is in
  four folders, and each must be described where it lives.
- Every role under roles/ has its section (the heading naming `roles/<role>/tasks/`), which describes
  the role in a line of prose besides its list of files.
- Every task file of every roles/<role>/tasks/ is named in backticks in its own role's section. No
  pattern stands for several, and a name in another role's section does not count: each file has
  its own concern, in its own role.
- Every file of a role's files/ and templates/ is named in backticks in its role's section, by its
  path from the role (`files/raygate_node_check.py`) or from the repository root.
- Every `*.py`, `*.yml` and `*.j2` the page names in backticks exists. A name with a slash resolves
  from the repository root, plugins/, plugins/module_utils/, plugins/plugin_utils/, or, in a role's
  section, that role's folder (`defaults/main.yml` in `roles/_common/tasks/`'s section); a bare name
  from the section's folder, a task folder of any role, playbooks/ or plugins/filter/ (the filters'
  documentation).

CONTRIBUTING.md exists at the root, and every path it names in backticks (a word with a slash, or
ending in a file suffix) exists in the repository.
"""

import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PLUGINS = os.path.join(ROOT, "plugins")
ROLES = os.path.join(ROOT, "roles")
ARCHITECTURE = os.path.join(ROOT, "docs", "ARCHITECTURE.md")
CONTRIBUTING = os.path.join(ROOT, "CONTRIBUTING.md")
# Where a name with a slash may be rooted, besides the section's own folder (and its role's).
PATH_BASES = ["", "plugins", "plugins/module_utils", "plugins/plugin_utils"]
# Where a bare file name may be, besides the section's own folder and every role's tasks/.
NAME_BASES = ["playbooks", "plugins/filter"]
# A role's folders whose every file its section names, besides tasks/.
ROLE_FILE_FOLDERS = ("files", "templates")
TICKED = re.compile(r"`([^`\n]+)`")
FILE_NAME = re.compile(r"^[A-Za-z0-9_./-]+\.(py|yml|j2)$")
ROLE_SECTION = re.compile(r"^roles/([A-Za-z0-9_]+)/tasks/$")
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


def roles():
    return sorted(name for name in os.listdir(ROLES) if os.path.isdir(os.path.join(ROLES, name)))


def role_section(role):
    return "roles/%s/tasks/" % role


def role_files(role):
    """(how the section may name it, path from the root) for each task file and each file of the
    role's files/ and templates/: a task file by its name, the others by their path from the role
    (or from the root)."""
    tasks = os.path.join(ROLES, role, "tasks")
    for name in sorted(os.listdir(tasks)) if os.path.isdir(tasks) else []:
        if name.endswith(".yml"):
            yield [name], "roles/%s/tasks/%s" % (role, name)
    for folder in ROLE_FILE_FOLDERS:
        top = os.path.join(ROLES, role, folder)
        for base, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                inside = os.path.relpath(os.path.join(base, name), os.path.join(ROLES, role))
                yield [inside, "roles/%s/%s" % (role, inside)], "roles/%s/%s" % (role, inside)


def missing_role_files(text):
    """The roles' files not named in their role's section of ``text``."""
    missing = []
    for role in roles():
        body = section_of(text, role_section(role))
        for names, path in role_files(role):
            if not any("`%s`" % name in body for name in names):
                missing.append(path)
    return missing


def described(body):
    """Whether a section says in prose what its role is: a line besides its heading and tables."""
    lines = [line.strip() for line in body.splitlines()[1:]]
    return any(line and not line.startswith(("|", "#", "```")) for line in lines)


def undescribed_roles(text):
    """The roles with no section in ``text``, or one with no line of prose."""
    return [role for role in roles() if not described(section_of(text, role_section(role)))]


def exists(name, folder):
    role = ROLE_SECTION.match(folder or "")
    own = ([folder] if folder else []) + (["roles/%s" % role.group(1)] if role else [])
    if "/" in name:
        bases = PATH_BASES + own
    else:
        bases = own[:1] + ["roles/%s/tasks" % r for r in roles()] + NAME_BASES
    return any(os.path.isfile(os.path.join(ROOT, base, name)) for base in bases)


def named_files(text):
    """(folder, name) for every `*.py`, `*.yml` or `*.j2` name in backticks, with its section's folder."""
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


def test_every_role_has_its_section_and_is_described(architecture):
    assert "raygate" in roles() and "_common" in roles()
    missing = undescribed_roles(architecture)
    assert not missing, (
        "roles with no section (a heading naming `roles/<role>/tasks/`) or no line saying what they are "
        "in docs/ARCHITECTURE.md: %s" % missing
    )


def test_every_role_file_is_named_in_its_roles_section(architecture):
    missing = missing_role_files(architecture)
    assert not missing, "not named in backticks in their role's section of docs/ARCHITECTURE.md: %s" % missing


def test_a_role_or_a_role_file_left_out_is_found():
    # The rules can fail: a task file named in another role's section only, a script of files/ left
    # out, a role whose section is gone, are each found.
    text = read(ARCHITECTURE)
    body = section_of(text, role_section("ray_node"))
    cut = text.replace(body, body.replace("`head_collect.yml`", "`the collection`"))
    assert "`head_collect.yml`" in cut, "the name must still be on the page, elsewhere"
    assert missing_role_files(cut) == ["roles/ray_node/tasks/head_collect.yml"]
    body = section_of(text, role_section("watcher"))
    cut = text.replace(body, body.replace("`files/raygate_node_watch.py`", "`the watcher script`"))
    assert missing_role_files(cut) == ["roles/watcher/files/raygate_node_watch.py"]
    body = section_of(text, role_section("nccl_env"))
    heading = body.splitlines()[0]
    cut = text.replace(heading, heading.replace("`roles/nccl_env/tasks/`", "the NCCL environment"))
    assert undescribed_roles(cut) == ["nccl_env"]
    assert "roles/nccl_env/tasks/env.yml" in missing_role_files(cut)
    assert not described("### `roles/x/tasks/`\n| file | owns |\n|---|---|\n| `main.yml` | x |\n")


def test_every_file_the_architecture_names_exists(architecture):
    named = named_files(architecture)
    gone = sorted({"%s (section %s)" % (name, folder) for folder, name in named if not exists(name, folder)})
    assert not gone, "docs/ARCHITECTURE.md names files that do not exist: %s" % gone


def test_a_file_that_is_gone_is_found():
    assert exists("node/cluster_lock.py", None)
    assert not exists("node/cluster_lock2.py", None)
    assert exists("cluster_lock.py", "plugins/action/")
    assert not exists("cluster_lock.py", None), "a bare name outside a folder's section must not resolve by luck"
    # A role's own paths resolve in its section only.
    assert exists("defaults/main.yml", "roles/_common/tasks/")
    assert not exists("defaults/main.yml", "roles/ray_node/tasks/")
    assert not exists("defaults/main.yml", None)
    assert exists("roles/_common/defaults/main.yml", None)
    assert not exists("roles/raygate/defaults/main.yml", None)
    assert exists("templates/redis.conf.j2", "roles/gcs_store/tasks/")
    # A task file's bare name resolves from any role's tasks; one that is nowhere does not.
    assert exists("head_collect.yml", None)
    assert not exists("head_collected.yml", None)


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
