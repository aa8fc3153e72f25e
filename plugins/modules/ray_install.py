#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: ray_install
short_description: Install an exact Ray version in a versioned virtualenv
version_added: 0.1.0
description:
  - Installs one exact Ray version (with extras) into its own virtualenv
    C(<base_dir>/ray-<version>-py<major.minor>), side by side with other versions, and
    points C(<base_dir>/current) at it.
  - Installs from a package index, or offline from a wheelhouse (C(--no-index --find-links)),
    with pip or with uv (uv itself then comes from the same wheelhouse or index).
  - An install is recorded in a marker file inside the virtualenv only after C(ray --version)
    answered the expected version; a virtualenv without the marker is a half-done install
    and is rebuilt.
  - Returns the versions Ray compares when a node joins a cluster (Ray, and Python down to
    the patch level), so a play can refuse mixed clusters before starting anything.
  - Before it creates or removes anything, checks that the filesystem holding O(base_dir) has
    room for the install (see O(min_free_mb)), and fails naming the host, the path, the free
    space and the space needed. An install that fails anyway (a full disk included) removes its
    half-built virtualenv before failing, so C(current) never points at one.
requirements:
  - a Python 3 on the node (O(python)) with the C(venv) module and C(ensurepip) (Debian and Ubuntu package
    C(python3-venv))
  - pip, which C(venv) puts into the virtualenv, or uv with O(installer=uv), which the module installs into
    the virtualenv first
  - Ray's wheels in O(wheelhouse) on the node, or a package index the node can reach
  - without O(wheelhouse), pip for O(python) itself too (C(pip index versions) checks the version first)
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
attributes:
  check_mode:
    support: full
    details: In check mode the module reports what it would change and still verifies
      that the requested version is available (wheelhouse or index) and that there is room for it.
  diff_mode:
    support: none
options:
  version:
    description:
      - The exact Ray version, for example V(2.60.0). Required when O(state=present).
    type: str
  extras:
    description:
      - Ray extras to install. The cluster tooling of this collection needs V(default)
        (it provides the dashboard that serves the state API).
    type: list
    elements: str
    default: [default]
  python:
    description:
      - The Python interpreter on the node that creates the virtualenv.
    type: path
    default: /usr/bin/python3
  base_dir:
    description:
      - Directory holding the versioned virtualenvs and the C(current) link.
    type: path
    default: /opt/raygate
  wheelhouse:
    description:
      - Directory of wheels on the node. When set, the install is offline
        (C(--no-index --find-links)).
    type: path
  index_url:
    description:
      - Package index to install from when O(wheelhouse) is not set.
    type: str
  requirements:
    description:
      - A hash-pinned requirements file on the node, installed with C(--require-hashes)
        in addition to Ray. Its checksum is part of the install marker.
    type: path
  installer:
    description:
      - V(uv) is much faster; uv is then installed into the virtualenv first.
    type: str
    choices: [pip, uv]
    default: pip
  set_current:
    description:
      - Point C(<base_dir>/current) at this version's virtualenv.
    type: bool
    default: true
  state:
    description:
      - V(present) installs. V(absent) removes the virtualenv of O(version), or every
        raygate virtualenv and the C(current) link when O(version) is not given.
    type: str
    choices: [present, absent]
    default: present
  timeout:
    description:
      - Seconds an install command may run.
    type: int
    default: 1200
  min_free_mb:
    description:
      - Free space, in MiB, the filesystem holding O(base_dir) must have before an install starts.
        The space a stale or half-built virtualenv of the same version frees when it is rebuilt
        counts as free.
      - V(0) estimates it. With O(wheelhouse), three times the size of all C(*.whl) files there
        (wheels unpack bigger), at least 512 MiB; the estimate counts every wheel, so a wheelhouse
        holding many versions or large packages the install does not use overestimates. From an
        index, 1536 MiB.
      - A positive number replaces the estimate.
      - Only O(base_dir)'s filesystem is checked, not pip's cache or temporary directory.
    type: int
    default: 0
    version_added: 0.4.0
  service_user:
    description:
      - The unprivileged account Ray is to run as
        (M(raygate.cluster.ray_node)'s O(raygate.cluster.ray_node#module:user)).
      - With O(state=present), created when it does not exist - a system account with its own group,
        no login shell, its home in C(/var/lib/raygate/home), and C(raygate service user) as its
        comment - and left as it is when it does.
      - With O(state=absent) and no O(version) (every virtualenv removed), the account and its home are
        removed too, but only one that raygate made (its comment) and as which nothing runs.
      - Omitted or V(root), no account is created or removed.
    type: str
    version_added: 0.5.0
  service_user_groups:
    description:
      - Supplementary groups O(service_user) is put in (created with them, or added to an existing
        account with C(usermod --append)); never taken out of one. For device files the driver makes
        0660 for a group, for example V(video).
      - Each group must exist on the node; one that does not fails before anything changes.
      - The account's groups are part of M(raygate.cluster.ray_node)'s configuration. A running node
        whose account gained one differs from it, and is restarted as any such node is
        (O(raygate.cluster.ray_node#module:restart_on_change)), so that its processes carry it.
    type: list
    elements: str
    default: []
    version_added: 0.5.0
notes:
  - A virtualenv is not relocatable (its scripts hard-code its path), which is why each
    version gets its own directory and upgrades switch the C(current) link.
"""

EXAMPLES = r"""
- name: Install Ray 2.60.0 from the public index
  raygate.cluster.ray_install:
    version: 2.60.0

- name: Install offline from a wheelhouse with uv
  raygate.cluster.ray_install:
    version: 2.60.0
    extras: [default]
    wheelhouse: /srv/raygate/wheelhouse
    installer: uv

- name: Install side by side without switching (for an upgrade)
  raygate.cluster.ray_install:
    version: 2.61.0
    set_current: false

- name: Install Ray and create the account it runs as
  raygate.cluster.ray_install:
    version: 2.60.0
    service_user: ray

- name: Remove every raygate virtualenv
  raygate.cluster.ray_install:
    state: absent
"""

RETURN = r"""
venv:
  description: Path of the virtualenv of this version.
  returned: when state is present
  type: str
  sample: /opt/raygate/ray-2.60.0-py3.11
current:
  description: Where the C(current) link points after the run.
  returned: always
  type: str
  sample: /opt/raygate/ray-2.60.0-py3.11
version_info:
  description: The versions Ray compares when a node joins (Ray and full Python version).
  returned: when state is present
  type: dict
  sample: {ray: 2.60.0, python: 3.11.2}
installed:
  description: Whether this run installed (or, in check mode, would install) the virtualenv.
  returned: when state is present
  type: bool
  sample: false
free_mb:
  description:
    - MiB free for the install on the filesystem holding O(base_dir), counting the virtualenv of
      this version that the install would replace. Measured before the install.
  returned: when state is present
  type: int
  sample: 40960
needed_mb:
  description:
    - MiB the install needed (O(min_free_mb), or its estimate); V(0) when the virtualenv was
      already installed.
  returned: when state is present
  type: int
  sample: 1536
removed:
  description: Paths removed by O(state=absent).
  returned: when state is absent
  type: list
  elements: str
  sample: [/opt/raygate/ray-2.60.0-py3.11, /opt/raygate/current]
service_user:
  description:
    - The account of O(service_user), when one is given and not V(root); C(created) or C(removed) says
      what this run did (or would do, in check mode), C(kept) why a purge left it, C(groups) every
      group it is in (its own and O(service_user_groups)).
  returned: when O(service_user) is given and not V(root)
  type: dict
  sample: {name: ray, uid: 999, gid: 995, home: /var/lib/raygate/home, created: true, groups: [ray, video]}
  version_added: 0.5.0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils.node import install as install_step


def main():
    module = AnsibleModule(
        argument_spec=install_step.ARGUMENT_SPEC,
        mutually_exclusive=install_step.MUTUALLY_EXCLUSIVE,
        supports_check_mode=True,
    )
    install_step.run(module)


if __name__ == "__main__":
    main()
