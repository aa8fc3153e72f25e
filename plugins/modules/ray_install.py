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
  - With O(runtime=container), Ray comes from a container image pinned by digest (O(image)) instead;
    installing means having the image in the local storage of the container engine (O(engine)), pulled
    from its registry by digest or loaded from an OCI archive on the node (O(image_archive)), and the
    Ray inside it is O(version). The answer has the same shape (RV(version_info) with the image's Ray
    and Python, read by running the image's C(python) once and then kept in a marker file per image
    under C(<base_dir>/images), reused while the engine's image ID is the same). No virtualenv is made
    and RV(venv) and RV(current) are V(null).
requirements:
  - a Python 3 on the node (O(python)) with the C(venv) module and C(ensurepip) (Debian and Ubuntu package
    C(python3-venv))
  - pip, which C(venv) puts into the virtualenv, or uv with O(installer=uv), which the module installs into
    the virtualenv first
  - Ray's wheels in O(wheelhouse) on the node, or a package index the node can reach
  - without O(wheelhouse), pip for O(python) itself too (C(pip index versions) checks the version first)
  - with O(runtime=container), the container engine O(engine) on the node (Podman 4.3 or later, or Docker 20.10
    or later), and the image in a registry the node can reach or as an OCI archive on the node
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
attributes:
  check_mode:
    support: full
    details: In check mode the module reports what it would change and still verifies
      that the requested version is available (wheelhouse or index) and that there is room for it.
      With O(runtime=container) it pulls, loads and runs nothing; it still checks the archive
      (O(image_archive)) and reads the versions from the image's marker when there is one.
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
  runtime:
    description:
      - Where Ray comes from on the node. V(venv) installs it in a virtualenv. V(container) takes it from the
        container image O(image) in the local storage of O(engine).
      - The options O(extras), O(python), O(wheelhouse), O(index_url), O(requirements), O(installer),
        O(set_current) and O(min_free_mb) are for V(venv); the options O(engine) to O(run_args) for V(container).
    type: str
    choices: [venv, container]
    default: venv
    version_added: 0.5.0
  engine:
    description:
      - The container engine's command on the node. Both take the subcommands used here (C(image inspect),
        C(pull), C(load), C(run), C(rmi); Podman's C(image exists) too).
      - A missing engine fails with O(state=present), before anything changes; with O(state=absent) there is
        then nothing to remove.
    type: str
    choices: [podman, docker]
    default: podman
    version_added: 0.5.0
  image:
    description:
      - The image's reference, C(registry/name@sha256:<64 hex digits>), its registry always named. Required with
        O(runtime=container) and O(state=present).
      - A tag without a digest is refused, naming the value and how to find the digest, unless
        O(image_allow_tag=true); a tag can move, and nodes pulling it at different times would run different
        images. A reference with a tag and a digest runs the digest.
      - A digest matches the image whatever name it is stored under (an archive loaded as C(localhost/...)).
      - With O(state=absent), the image removed (C(rmi)) when the engine holds it.
    type: str
    version_added: 0.5.0
  image_allow_tag:
    description:
      - Accept an O(image) that names a tag and no digest. The C(image) of RV(version_info) is then the image ID.
    type: bool
    default: false
    version_added: 0.5.0
  image_archive:
    description:
      - An OCI archive of the image on the node (C(skopeo copy docker://REPO@DIGEST oci-archive:FILE) makes one
        that keeps the digest), loaded (C(load -i)) when the engine does not hold the image yet, instead of a pull.
      - Before the load, the module checks that the file exists, that its sha256 is O(image_archive_sha256) when
        given, that its C(index.json) names the digest of O(image), and that every blob in it hashes to its name
        and every blob the manifest names is there. After it, that the engine holds O(image).
      - A docker-archive (C(podman save)'s default) keeps no registry digest and is refused.
    type: path
    version_added: 0.5.0
  image_archive_sha256:
    description:
      - The sha256 checksum of the O(image_archive) file, C(sha256:<hex>) or the 64 hex digits alone.
    type: str
    version_added: 0.5.0
  registry_username:
    description:
      - The account to pull O(image) with, from its registry. Given to the engine in a file only root can read,
        in a private temporary directory removed after the pull (Podman's C(--authfile), Docker's
        E(DOCKER_CONFIG)), never on a command line.
    type: str
    version_added: 0.5.0
  registry_password:
    description:
      - The password (or token) of O(registry_username).
    type: str
    version_added: 0.5.0
  registry_tls_verify:
    description:
      - V(false) pulls from a registry without TLS or with a certificate the node does not trust (Podman's
        C(--tls-verify=false)). Docker has no such switch per pull (list the registry in its
        C(insecure-registries)); the module then warns and pulls as usual.
    type: bool
    default: true
    version_added: 0.5.0
  run_args:
    description:
      - Extra arguments for each C(run) of the engine this module does (reading the image's versions), placed
        before the image, for example V([--ulimit, nofile=20000:20000]) where the engine's default limits
        cannot be set (a root without CAP_SYS_RESOURCE fails with C(error setting rlimit)).
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

- name: Ray 2.60.0 from an image pinned by digest, pulled with Podman from a registry without TLS
  raygate.cluster.ray_install:
    version: 2.60.0
    runtime: container
    image: 127.0.0.1:5050/raygate/ray@sha256:821568441caa5102ba513cbdd27c9e0e2484e7693307c9f39e42fe96408f3f3d
    registry_tls_verify: false
    run_args: [--ulimit, "nofile=20000:20000"]

- name: The same image from an OCI archive copied to the node, checked against its checksum
  raygate.cluster.ray_install:
    version: 2.60.0
    runtime: container
    image: 127.0.0.1:5050/raygate/ray@sha256:821568441caa5102ba513cbdd27c9e0e2484e7693307c9f39e42fe96408f3f3d
    image_archive: /srv/raygate/ray-2.60.0.oci.tar
    image_archive_sha256: 9b2a4c0d6f1e8a7b3c5d2e4f6a8b0c1d3e5f7a9b2c4d6e8f0a1b3c5d7e9f1a2b

- name: Pull from a private registry
  raygate.cluster.ray_install:
    version: 2.60.0
    runtime: container
    image: registry.example.com/ml/ray@sha256:821568441caa5102ba513cbdd27c9e0e2484e7693307c9f39e42fe96408f3f3d
    registry_username: puller
    registry_password: "{{ vault_registry_password }}"

- name: Remove the image and its markers
  raygate.cluster.ray_install:
    state: absent
    runtime: container
    image: 127.0.0.1:5050/raygate/ray@sha256:821568441caa5102ba513cbdd27c9e0e2484e7693307c9f39e42fe96408f3f3d
"""

RETURN = r"""
venv:
  description: Path of the virtualenv of this version; V(null) with O(runtime=container).
  returned: when state is present
  type: str
  sample: /opt/raygate/ray-2.60.0-py3.11
current:
  description:
    - Where the C(current) link points after the run; V(null) with O(runtime=container) and O(state=present).
  returned: always
  type: str
  sample: /opt/raygate/ray-2.60.0-py3.11
version_info:
  description:
    - The versions Ray compares when a node joins (Ray and full Python version).
    - With O(runtime=container), those inside the image, and C(image), the image's digest (its ID when
      O(image_allow_tag) let a tag through), which nodes compare too. In check mode, before the image is there,
      C(python) is V(null).
  returned: when state is present
  type: dict
  sample: {ray: 2.60.0, python: 3.11.2}
installed:
  description:
    - Whether this run installed (or, in check mode, would install) the virtualenv; with O(runtime=container),
      pulled or loaded the image.
  returned: when state is present
  type: bool
  sample: false
image:
  description:
    - With O(runtime=container), the image. O(state=present) - C(reference) (what the engine was given),
      C(digest), C(id) (the engine's image ID, V(null) in check mode before the image is there) and C(source)
      (V(present), V(pulled) or V(loaded)). O(state=absent) - C(reference), C(digest) and C(removed); V(null)
      without O(image).
  returned: when O(runtime=container)
  type: dict
  sample:
    reference: 127.0.0.1:5050/raygate/ray@sha256:821568441caa5102ba513cbdd27c9e0e2484e7693307c9f39e42fe96408f3f3d
    digest: sha256:821568441caa5102ba513cbdd27c9e0e2484e7693307c9f39e42fe96408f3f3d
    id: sha256:58b8aca5d6a1c0b3f6a2d4e8c9b7a5f3e1d2c4b6a8f0e2d4c6b8a0f2e4d6c8b0
    source: pulled
  version_added: 0.5.0
free_mb:
  description:
    - MiB free for the install on the filesystem holding O(base_dir), counting the virtualenv of
      this version that the install would replace. Measured before the install.
  returned: when state is present and O(runtime=venv)
  type: int
  sample: 40960
needed_mb:
  description:
    - MiB the install needed (O(min_free_mb), or its estimate); V(0) when the virtualenv was
      already installed.
  returned: when state is present and O(runtime=venv)
  type: int
  sample: 1536
removed:
  description: Paths removed by O(state=absent) (with O(runtime=container), the markers directory).
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
        required_together=install_step.REQUIRED_TOGETHER,
        supports_check_mode=True,
    )
    install_step.run(module)


if __name__ == "__main__":
    main()
