#!/usr/bin/python
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

from __future__ import annotations

DOCUMENTATION = r"""
module: ray_node
short_description: Start or stop a Ray head or worker node with a pinned port plan
version_added: 0.1.0
description:
  - Starts a Ray head or worker with every port taken from the port plan, an explicit
    C(--node-ip-address), explicit CPU, GPU and memory amounts, resources and labels.
  - A node that already runs with the same configuration is left alone, so a second run
    restarts nothing. A node running with a different configuration is restarted only with
    O(restart_on_change=true); otherwise the module warns and leaves it.
  - Before starting, the port plan is validated against this node's ephemeral port range
    and every plan port is checked to be free; a taken port fails the task naming the
    process that holds it. Nothing is changed on failure.
  - Stopping is graceful first (SIGTERM to the node's Ray processes, as C(ray stop) does, with a grace period), then any
    Ray process still found by binary, script or session directory is killed. The module
    then verifies that no Ray process, no plan port and no GPU compute process remain.
  - Supervisor V(process) lets C(ray start) daemonize (used in the sandbox). Supervisor
    V(systemd) renders a unit running C(ray start --block) and manages it with systemctl.
  - One call at a time changes a node. A call holds the lock file O(state_dir) plus C(.lock) (removed
    when it ends; a call that dies releases it). A second call, for example that of a run started
    again after one killed during a head start launched with C(async), waits for the first, at most
    O(start_timeout) plus O(drain_timeout) seconds, then judges the node as the first left it. Check
    mode takes no lock. The node watcher (module M(raygate.cluster.node_watch)) holds the same lock
    at the default O(state_dir) while it takes the node out, and leaves the node for its next run
    when a call holds it.
requirements:
  - Ray installed in O(venv), normally by M(raygate.cluster.ray_install); Ray 2.52 or newer for O(auth)
  - systemd (C(systemctl)) for O(supervisor=systemd)
  - Linux (C(/proc) is read to find Ray's processes and who holds a port)
  - C(nvidia-smi), when installed, to find GPU compute processes left after a stop
author:
  - raygate maintainers (@raygate)
extends_documentation_fragment:
  - raygate.cluster.attributes
  - raygate.cluster.port_plan
attributes:
  check_mode:
    support: full
    details: Validation and the port checks run in check mode too.
  diff_mode:
    support: partial
    details: Shows the diff of the environment file and, with systemd, of the unit.
options:
  role:
    description: Whether this node is the head or a worker.
    type: str
    choices: [head, worker]
    required: true
  state:
    description:
      - V(started) starts the node if needed. V(stopped) stops every Ray process.
        V(absent) also removes the unit, the environment, labels and token files, the run
        state, and the configuration and state directories when nothing else is in them.
    type: str
    choices: [started, stopped, absent]
    default: started
  node_ip:
    description: The address Ray advertises for this node (C(--node-ip-address)).
    type: str
  head_ip:
    description: Address of the head node. Required for workers that are started.
    type: str
  venv:
    description: The Ray virtualenv (normally the C(current) link of M(raygate.cluster.ray_install)).
    type: path
    default: /opt/raygate/current
  num_cpus:
    description: CPUs this node offers to Ray (C(--num-cpus)). Always pass it; Ray otherwise reports the whole host.
    type: int
  num_gpus:
    description: GPUs this node offers to Ray (C(--num-gpus)).
    type: int
  memory:
    description: Bytes of memory for Ray workers (C(--memory)).
    type: int
  object_store_memory:
    description: Bytes of object store memory (C(--object-store-memory)).
    type: int
  resources:
    description: Custom resources, name to quantity.
    type: dict
    default: {}
  labels:
    description:
      - Node labels, name to value (written to a labels file, C(--labels-file)). Part of the node's
        configuration, so a change restarts the node with O(restart_on_change=true).
      - Checked before anything changes with the syntax Ray checks (Kubernetes' label syntax). A key is
        an optional DNS-style prefix and C(/), then a name; a name and a non-empty value are at most 63
        letters, digits, C(-), C(_) or C(.), beginning and ending with a letter or digit. Integer values
        are written as text.
    type: dict
    default: {}
  status_labels:
    description:
      - Node labels that describe the node's state rather than its configuration, for example that it
        passed the health gate and when (the raygate role gives C(raygate.io/health),
        C(raygate.io/checked-at), C(raygate.io/checked-date) and C(raygate.io/fingerprint)).
      - Merged with O(labels) into the labels file when Ray starts, and never a reason to restart. Ray
        cannot change the labels of a running node, so a node that is left alone keeps the status labels
        it was started with; RV(status_labels) says which.
      - Unset, the node starts with the status labels of its last start, kept in the labels file, when it
        is restarted (a changed configuration, a dead session, O(member=false), a rotated token) or started
        again after a stop (an upgrade). V({}) starts it without any.
      - With O(state=stopped), V({}) forgets them, so that a later start without O(status_labels) starts
        without any (the raygate role does this when the health gate evicts a node). Other values are
        ignored when stopping.
      - The same syntax as O(labels). Keys under Ray's own prefix C(ray.io/) and keys that are also in
        O(labels) are refused before anything changes.
    type: dict
    version_added: 0.5.0
  temp_dir:
    description: Ray's temporary directory; passed on the head only (workers follow the head).
    type: path
  dashboard_host:
    description:
      - Address the dashboard binds to on the head. Defaults to O(node_ip), and to C(127.0.0.1) with
        O(dashboard_proxy) (any other value is refused then).
    type: str
  dashboard_proxy:
    description:
      - On the head, serve Ray's dashboard and jobs API over HTTPS only (Ray's own dashboard speaks plain
        HTTP). The dashboard then listens on C(127.0.0.1) and nginx, from the distribution's packages,
        listens on O(node_ip) and the plan's dashboard port with TLS, in front of it (the same port on
        another address, so the firewall and the port plan are unchanged).
      - nginx runs as O(user) with its own configuration (C(dashboard-proxy.conf) in O(config_dir)), pid
        file and temporary directories in O(dashboard_proxy_run_dir); a site's own nginx is left alone.
        Under O(supervisor=systemd) it is the unit O(dashboard_proxy_unit), sandboxed as the node's.
      - It serves the node's certificate (O(tls)) or O(dashboard_proxy_cert). It starts with the head,
        is reloaded (after C(nginx -t)) when its configuration or certificate changed, and stops with
        the head; O(state=absent) removes its configuration and unit.
      - Ignored on workers.
    type: bool
    default: false
    version_added: 0.5.0
  dashboard_proxy_cert:
    description:
      - A certificate file on the head for the proxy to serve instead of the node's (a site's own PKI,
        a name its users know), with O(dashboard_proxy_key). O(user) must be able to read both.
    type: path
    version_added: 0.5.0
  dashboard_proxy_key:
    description: The private key file of O(dashboard_proxy_cert), on the head.
    type: path
    version_added: 0.5.0
  dashboard_proxy_binary:
    description: The nginx binary.
    type: path
    default: /usr/sbin/nginx
    version_added: 0.5.0
  dashboard_proxy_unit:
    description: The proxy's systemd unit (O(supervisor=systemd)).
    type: str
    default: raygate-dashboard-proxy
    version_added: 0.5.0
  dashboard_proxy_run_dir:
    description: The proxy's pid file, error log and temporary files.
    type: path
    default: /run/raygate-dashboard-proxy
    version_added: 0.5.0
  auth:
    description: Token authentication (C(RAY_AUTH_MODE=token)); needs Ray 2.52 or newer.
    type: bool
    default: true
  auth_token_file:
    description:
      - File on the node holding the token, passed as C(RAY_AUTH_TOKEN_PATH).
      - Mode 0600, owned by root; with an unprivileged O(user), mode 0640 in that account's group, so
        Ray reads it and the account cannot change it.
    type: path
    default: /etc/raygate/auth_token
  env_files:
    description:
      - Environment files read into the Ray node's environment (missing ones are skipped),
        so raylet and every Ray worker inherit them, for example the NCCL environment.
    type: list
    elements: path
    default: [/etc/raygate/nccl.env]
  env:
    description: Extra environment variables for the Ray node.
    type: dict
    default: {}
  config_dir:
    description: Where the node's environment file C(ray.env) and labels file live.
    type: path
    default: /etc/raygate
  state_dir:
    description: Run state (what was started, with which configuration), on a tmpfs.
    type: path
    default: /run/raygate
  extra_files:
    description:
      - Other files written for this node (the raygate role's node_exporter health textfile),
        removed with O(state=absent) in the same step, so a teardown needs no extra round trip.
    type: list
    elements: path
    default: []
  supervisor:
    description: V(process) lets C(ray start) daemonize; V(systemd) runs it as a unit.
    type: str
    choices: [process, systemd]
    default: process
  user:
    description:
      - The account every Ray process of the node runs as, under either supervisor - the raylet, the
        GCS, the dashboard and every job's and actor's workers - so a job is never root on the node.
      - It must exist (M(raygate.cluster.ray_install) creates it with its
        O(raygate.cluster.ray_install#module:service_user) option); in check mode a missing account is
        only predicted.
      - Before a start, the session directories (C(/tmp/ray), O(temp_dir)) and the head's RocksDB
        store are given to it; the token file becomes readable by its group (O(auth_token_file)).
      - With O(supervisor=systemd) the unit gets C(User=) and a sandbox (C(NoNewPrivileges), no
        capabilities, C(ProtectSystem=full), C(ProtectHome=read-only), kernel and clock protections,
        a system-call filter); docs/SECURITY.md lists what is left out and why.
      - V(root) runs Ray as root, as before, with no sandbox. Changing it restarts a running node
        only with O(restart_on_change) (it is part of the configuration).
    type: str
    default: root
    version_added: 0.5.0
  tls:
    description:
      - Mutual TLS on all of Ray's gRPC channels (C(RAY_USE_TLS)); every Ray process of the node serves
        and connects with the node's certificate and accepts only peers whose certificate the cluster's
        CA signed. Every node of a cluster must agree.
      - Ray's dashboard and jobs API (HTTP) are not covered (Ray does not support it).
      - A running node whose given CA or certificate differs from the files it started with (a
        renewal) is restarted, whatever O(restart_on_change) says, with a warning.
    type: bool
    default: false
    version_added: 0.5.0
  tls_dir:
    description:
      - The node's directory for C(ca.crt), C(node.crt) and C(node.key) (mode 0600, or 0640 in the group of
        an unprivileged O(user)). Removed with O(state=absent).
    type: path
    default: /etc/raygate/tls
    version_added: 0.5.0
  tls_ca_cert:
    description:
      - The cluster CA's certificate (PEM text). With O(tls_cert) and O(tls_key), written to O(tls_dir);
        all three omitted, the files already there are used.
      - M(raygate.cluster.cluster_tls) makes them on the controller.
    type: str
    version_added: 0.5.0
  tls_cert:
    description: The node's certificate (PEM text), signed by the CA, with the node's address in its SAN.
    type: str
    version_added: 0.5.0
  tls_key:
    description: The node's private key (PEM text); never logged, returned or diffed.
    type: str
    version_added: 0.5.0
  unit_name:
    description: Name of the systemd unit (without C(.service)).
    type: str
    default: raygate-ray
  unit_dir:
    description: Directory of the systemd unit file.
    type: path
    default: /etc/systemd/system
  restart_on_change:
    description: Restart a node that runs with a configuration different from the desired one.
    type: bool
    default: false
  python_version_match_level:
    description: Exported as C(RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL) when V(minor).
    type: str
    choices: [patch, minor]
    default: patch
  stop_grace:
    description:
      - Seconds to wait for a graceful exit after SIGTERM (what C(ray stop --grace-period) sends)
        before what is left is killed.
    type: int
    default: 10
  start_timeout:
    description: Seconds to wait for the head's GCS and dashboard to answer after a start.
    type: int
    default: 180
  head_wait:
    description:
      - What a head start waits for before it returns. V(dashboard) waits until the dashboard
        answers C(/api/gcs_healthz). V(gcs) returns as soon as the GCS port accepts
        connections, which is all the workers need; the dashboard keeps starting meanwhile
        (several seconds on a small machine), so a caller that waits for the cluster
        afterwards (M(raygate.cluster.ray_cluster_info)) saves that time.
    type: str
    choices: [gcs, dashboard]
    default: dashboard
  auth_token:
    description:
      - The cluster's auth token. When set (and O(auth) is on), the module writes it to
        O(auth_token_file) with mode 0600 before Ray starts, so no separate copy task is needed.
        Never shown in output or diffs.
    type: str
  drain:
    description:
      - With O(state=stopped) or O(state=absent) on a worker, first ask Ray to drain the node
        (C(ray drain-node), reason preemption, deadline O(drain_timeout)) and wait until its raylet
        exits, which Ray does once the node's tasks are done; then stop what is left.
      - A Ray without C(drain-node) is stopped without draining, with a warning. A drain that Ray
        refuses fails the task before anything stops. Refused for the head.
    type: bool
    default: false
  drain_timeout:
    description: Seconds a draining worker may keep running its tasks; then it is stopped anyway.
    type: int
    default: 600
  member:
    description:
      - For a worker with O(state=started), what the head's GCS says of it, when the caller asked
        (M(raygate.cluster.ray_cluster_info)). V(false) means the GCS does not list this node alive
        with its configuration (for example the head was started again after a crash, so the raylet
        here belongs to a dead session); a running worker is then stopped and started again,
        whatever O(restart_on_change) says. Unset, the module judges by the node's own processes.
      - A head is always judged by its own GCS, which must run and accept connections on its port.
    type: bool
  rotate_token:
    description:
      - What to do when Ray runs on this node with another auth token than O(auth_token) (the token
        file differs). V(false) fails before anything changes, saying how to restore the token or
        rotate it. V(true) restarts the node on the new token; rotate every node of a cluster in
        the same run, head first.
    type: bool
    default: false
  gcs_ft:
    description:
      - GCS fault tolerance. V(none) keeps the GCS tables in memory (a crash of C(gcs_server) loses the cluster).
      - V(redis) backs them by the Redis at O(redis_address); the head gets C(RAY_REDIS_ADDRESS),
        C(RAY_external_storage_namespace) and C(--redis-username)/C(--redis-password).
      - V(rocksdb) keeps them in Ray's embedded RocksDB store (alpha in Ray 2.60) under O(gcs_storage_path)
        on the head (C(RAY_gcs_storage), C(RAY_gcs_storage_path)).
      - Workers get only O(gcs_reconnect_timeout). See C(docs/GCS-FT.md).
    type: str
    choices: [none, redis, rocksdb]
    default: none
    version_added: 0.5.0
  redis_address:
    description: The GCS Redis, C(host:port) (O(gcs_ft=redis), head only).
    type: str
    version_added: 0.5.0
  redis_username:
    description: The Redis ACL user (C(--redis-username)); empty passes none.
    type: str
    default: ""
    version_added: 0.5.0
  redis_tls:
    description:
      - Reach the GCS Redis over TLS (O(gcs_ft=redis), head only) - C(RAY_REDIS_ADDRESS) becomes
        C(rediss://) O(redis_address), and C(RAY_REDIS_CA_CERT), C(RAY_REDIS_CLIENT_CERT) and
        C(RAY_REDIS_CLIENT_KEY) name this node's own TLS files in O(tls_dir), so the head's GCS
        trusts the cluster CA and presents its certificate (a Redis with C(tls-auth-clients yes)).
      - Needs O(tls).
    type: bool
    default: false
    version_added: 0.5.0
  redis_password:
    description:
      - The Redis password (O(gcs_ft=redis), head only; required then). Never returned or logged.
      - Written to C(gcs-secret.env) in O(config_dir) (mode 0600), which the systemd unit reads;
        the unit and the returned RV(command) hold only C(${RAYGATE_REDIS_PASSWORD}).
      - Ray 2.60 itself passes it on C(gcs_server)'s command line, where local users can read it.
    type: str
    version_added: 0.5.0
  storage_namespace:
    description:
      - The cluster's storage namespace prefix (O(gcs_ft=redis), head only; required then). The
        installed Ray's directory name is appended, so each Ray version gets its own tables.
      - Must not contain C(@), which Ray refuses.
    type: str
    version_added: 0.5.0
  gcs_storage_path:
    description: The RocksDB store's parent directory (O(gcs_ft=rocksdb)); one subdirectory per Ray version, mode 0700.
    type: path
    default: /var/lib/raygate/gcs
    version_added: 0.5.0
  gcs_reconnect_timeout:
    description:
      - Seconds a raylet waits for an unavailable GCS before it exits
        (C(RAY_gcs_rpc_server_reconnect_timeout_s), Ray's default 60), on every node, when
        O(gcs_ft) is not V(none). It must cover a head restart (a reboot under systemd).
    type: int
    version_added: 0.5.0
  runtime:
    description:
      - V(venv) runs Ray from the virtualenv O(venv) (M(raygate.cluster.ray_install) made it).
      - V(container) runs C(ray start --block) in a container of O(image), with the same arguments and
        environment, on the host's network (and IPC, see O(container_ipc)), as the uid and gids of
        O(user), which must not be root. The configuration directory is mounted read-only, the session
        directories read-write at the same paths, the GPUs come through CDI (O(gpu_devices)) and
        C(/dev/infiniband) when the node has it. Under O(supervisor=process) the engine restarts the
        container (C(--restart always)); under V(systemd) a unit runs it in the foreground.
      - The image must already be in the engine's storage (M(raygate.cluster.ray_install) with
        O(raygate.cluster.ray_install#module:runtime=container) pulls or loads it).
    type: str
    choices: [venv, container]
    default: venv
    version_added: 0.5.0
  engine:
    description: The container engine's command, for O(runtime=container).
    type: str
    choices: [podman, docker]
    default: podman
    version_added: 0.5.0
  image:
    description:
      - The image to run, for O(runtime=container), pinned by digest (C(registry/name@sha256:...)).
        M(raygate.cluster.ray_install) judges it; this module runs what it is given.
    type: str
    version_added: 0.5.0
  container_name:
    description: The node's container.
    type: str
    default: raygate-ray
    version_added: 0.5.0
  gpu_devices:
    description:
      - The CDI devices the container gets, for O(runtime=container). Each must be named by exactly one
        CDI spec in C(/etc/cdi) or C(/var/run/cdi); where none names it and C(nvidia-ctk) is installed,
        C(nvidia-ctk cdi generate) writes C(/var/run/cdi/raygate-nvidia.yaml) (removed with
        O(state=absent)). With neither, the start is refused before anything changes.
      - Podman before 4.4 ignores specs newer than cdiVersion 0.5.0; such a spec is refused, named.
      - An empty list for a node without GPUs.
    type: list
    elements: str
    default: [nvidia.com/gpu=all]
    version_added: 0.5.0
  container_ulimits:
    description:
      - The container's C(--ulimit) values. RDMA needs memlock unlimited; a host whose root may not
        raise a limit (no CAP_SYS_RESOURCE) needs values within its own.
    type: list
    elements: str
    default: [memlock=-1:-1]
    version_added: 0.5.0
  container_run_args:
    description: More arguments for the engine's C(run), before the image (a site's mounts, its own devices).
    type: list
    elements: str
    default: []
    version_added: 0.5.0
  container_ipc:
    description:
      - V(host) shares the host's IPC namespace and C(/dev/shm) (sized by the host), as Ray on the host has.
      - V(private) gives the container its own, with C(--shm-size) the object store's size and a tenth
        (2 GiB when O(object_store_memory) is unset).
    type: str
    choices: [host, private]
    default: host
    version_added: 0.5.0
  container_mounts:
    description:
      - Host directories the container gets read-only at the same paths, for O(runtime=container) (the
        role gives the node watcher's, whose take-out asks the head from inside the container). Each is
        created when missing.
    type: list
    elements: path
    default: []
    version_added: 0.5.0
"""

EXAMPLES = r"""
- name: Start a worker from an image pinned by digest, as the service account
  raygate.cluster.ray_node:
    role: worker
    node_ip: 10.0.0.2
    head_ip: 10.0.0.1
    runtime: container
    image: registry.example.com/ml/ray@sha256:38e1ce550abfdf1b153f1c534f05f1ef72eff09f77ce8631274df90ca59d96dd
    user: ray
    num_gpus: 8

- name: Start the head
  raygate.cluster.ray_node:
    role: head
    node_ip: 10.0.0.1
    num_cpus: 96
    num_gpus: 8
    memory: 800000000000

- name: Start a worker with a label and a custom resource
  raygate.cluster.ray_node:
    role: worker
    node_ip: 10.0.0.2
    head_ip: 10.0.0.1
    num_cpus: 96
    num_gpus: 8
    resources: {nvlink_domain_a: 1}
    labels: {rack: r12}

- name: Start a worker as the unprivileged account ray, under a sandboxed systemd unit
  raygate.cluster.ray_node:
    role: worker
    node_ip: 10.0.0.4
    head_ip: 10.0.0.1
    num_gpus: 8
    user: ray  # created beforehand by ray_install's service_user
    supervisor: systemd

- name: Start a worker that passed the health gate, with labels a job can select on
  raygate.cluster.ray_node:
    role: worker
    node_ip: 10.0.0.3
    head_ip: 10.0.0.1
    num_cpus: 96
    num_gpus: 8
    labels: {rack: r12}
    # Changed values restart nothing: a running node keeps those it was started with.
    status_labels:
      raygate.io/health: pass
      raygate.io/checked-at: "{{ gpu.checked_at | int }}"
      raygate.io/checked-date: "{{ '%Y-%m-%d' | strftime(gpu.checked_at, utc=true) }}"
      raygate.io/fingerprint: "{{ gpu.fingerprint_hash }}"
  when: gpu.healthy

- name: Stop Ray and remove what raygate wrote
  raygate.cluster.ray_node:
    role: worker
    state: absent
"""

RETURN = r"""
tls:
  description: A hash of the node's CA and certificate when O(tls) is on (null when off).
  returned: when state is started
  type: str
  sample: 5b1a0c9e2f3d4a6b
  version_added: 0.5.0
user:
  description: The account the node's Ray processes run as (O(user)).
  returned: when state is started
  type: str
  sample: ray
  version_added: 0.5.0
pid:
  description: PID of the raylet when the node is running.
  returned: when state is started
  type: int
  sample: 4242
restarted:
  description: Whether a running node was restarted because its configuration changed.
  returned: when state is started
  type: bool
  sample: false
gcs_storage:
  description: Where the head's GCS keeps its tables (O(gcs_ft) not V(none)); the password is never part of it.
  returned: when O(role=head) and O(gcs_ft) is not V(none) and O(state=started)
  type: dict
  sample: {backend: redis, address: "10.0.0.1:6380", namespace: raygate-0a1b2c3d4e5f-ray-2.60.0-py3.11}
  version_added: 0.5.0
new_session:
  description: Whether Ray was started in this call, so the node runs a new session (a new cluster when it is the head).
  returned: when state is started
  type: bool
  sample: true
token_drift:
  description: Set when the module failed because the running node uses another auth token than the given one.
  returned: when it failed for that reason
  type: bool
  sample: true
status_labels:
  description:
    - The status labels the node carries (O(status_labels)); when it was left running, those it was
      started with, which can be older than the ones given. When it was started (or, in check mode, would
      be), those it starts with.
  returned: when state is started
  type: dict
  version_added: 0.5.0
  sample: {raygate.io/health: pass, raygate.io/checked-at: "1785283200", raygate.io/checked-date: "2026-07-29",
           raygate.io/fingerprint: 3f1c0d9e2a1b}
status_labels_forgotten:
  description: Whether the status labels of the last start were forgotten (O(status_labels={}) with O(state=stopped)).
  returned: when state is stopped or absent
  type: bool
  version_added: 0.5.0
  sample: false
config_hash:
  description: Hash of the desired node configuration, recorded at start.
  returned: when state is started
  type: str
  sample: 3f1c0d9e2a1b
command:
  description: The C(ray start) command line (without secrets, the token is passed by file).
  returned: when the node was started
  type: list
  elements: str
  sample: [/opt/raygate/current/bin/ray, start, --head, --port=6379]
dropped_ports:
  description: Plan ports whose flag the installed Ray does not offer (Ray picks those itself).
  returned: when the node was started
  type: list
  elements: str
  sample: []
gcs_address:
  description: Address of the cluster's GCS.
  returned: when state is started
  type: str
  sample: 10.0.0.1:6379
dashboard_url:
  description: URL of the dashboard (head only); C(https://) with O(dashboard_proxy).
  returned: when state is started and role is head
  type: str
  sample: https://10.0.0.1:8265
dashboard_proxy:
  description: What the head's HTTPS proxy needed (O(dashboard_proxy)).
  returned: >-
    when state is started, role is head and O(dashboard_proxy) is on, and Ray runs with the current
    configuration
  type: dict
  contains:
    url:
      description: The proxy's URL.
      type: str
      sample: https://10.0.0.1:8265
    action:
      description: V(none), V(start) or V(reload) (in check mode, what would be done).
      type: str
      sample: start
    changed:
      description: Whether it was started or reloaded.
      type: bool
      sample: true
  version_added: 0.5.0
stopped:
  description: Ray processes that were running before the stop.
  returned: when state is stopped or absent
  type: list
  elements: str
  sample: ["/opt/raygate/ray-2.60.0-py3.11/lib/.../raylet --node-ip-address=10.0.0.2 ... (pid 4242)"]
drained:
  description: Whether the node was drained through Ray before it stopped (in check mode, whether it would be).
  returned: when state is stopped or absent
  type: bool
  sample: true
drain_seconds:
  description: Seconds from the drain request until the raylet had exited.
  returned: when the node was drained
  type: float
  sample: 1.2
drain_timed_out:
  description: Whether the node still ran tasks at O(drain_timeout) and was stopped anyway.
  returned: when the node was drained
  type: bool
  sample: false
removed:
  description: Files removed by O(state=absent).
  returned: when state is absent
  type: list
  elements: str
  sample: [/etc/raygate/ray.env]
leftovers:
  description: What still remained after the stop (empty lists when clean).
  returned: when state is stopped or absent
  type: dict
  sample: {processes: [], ports: [], gpu_processes: []}
  contains:
    containers:
      description: The node's container, when O(runtime=container) and the engine still holds it.
      returned: when runtime is container
      type: list
      elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.raygate.cluster.plugins.module_utils.node import node as node_step


def main():
    module = AnsibleModule(
        argument_spec=node_step.ARGUMENT_SPEC,
        supports_check_mode=True,
    )
    node_step.run(module)


if __name__ == "__main__":
    main()
