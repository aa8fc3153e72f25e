#!/usr/bin/env bash
# Simulated bare-metal nodes made of Linux namespaces on this machine.
#
#   sandbox.sh up N [--systemd|--light]
#                            create N nodes (1..20), tearing down any previous sandbox first;
#                            --systemd: nodes boot systemd as PID 1 (systemd-nspawn, rootfs.sh),
#                            Debian 12 unless RAYGATE_ROOTFS_SUITE=trixie (Debian 13);
#                            --light: up to 240 tini nodes for health.yml only (no Ray on them)
#   sandbox.sh down          remove every trace of the sandbox (idempotent)
#   sandbox.sh reboot I      reboot node I (systemd nodes: `systemctl reboot`), wait until it answers SSH
#   sandbox.sh status        one line per node: name ip pid sshd(yes|no)
#   sandbox.sh exec I CMD..  run CMD inside node I (all its namespaces)
#   sandbox.sh ssh I [CMD]   ssh into node I as root with the sandbox key
#   sandbox.sh inventory     YAML inventory fragment for the running nodes
#   sandbox.sh slurm up|down|status|env
#                            a real Slurm over the nodes (slurm.sh): slurmctld on this host, slurmd in each
#   sandbox.sh scenario I F  install JSON file F as node I's hardware scenario (keys fabric, gpu),
#                            rebuild its simulated sysfs tree, GPU files and kernel log, and publish
#                            F for the other nodes' mpirun as $STATE/sim/scenarios/{<ip>,node<I>}.json
#                            (tools: fi_info ibstat ibv_devinfo nvidia-smi dcgmi all_reduce_perf mpirun)
#
# Each node: own netns (veth on bridge rgbr0, 198.18.0.<10+i>/24; past 245 nodes, light ones
# only, the plan goes on into 198.18.1.0 and on, all in 198.18.0.0/22), own PID namespace
# (tini PID 1, sshd its child), own UTS/IPC namespaces, own mount namespace with tmpfs
# /tmp /run /dev/shm and overlayfs copy-on-write /etc /opt /usr /var /root. See README.md.
# With --systemd, each node is a systemd-nspawn container joined to the same netns instead:
# systemd as PID 1, a Debian rootfs built once by rootfs.sh (Debian 12, or the suite that
# RAYGATE_ROOTFS_SUITE names), copy-on-write over all of it.
set -euo pipefail
shopt -s nullglob

STATE=${RAYGATE_SANDBOX_DIR:-/srv/raygate/sandbox}
TIMEOUT=${RAYGATE_SANDBOX_TIMEOUT:-60}
SHM_SIZE=${RAYGATE_SANDBOX_SHM_SIZE:-2g}
MAX_NODES=20
# Light nodes run sshd and the simulators only (health.yml), so many more fit: up to 1,000 (about
# 2.5 MiB of host memory each, docs/SCALE.md). The address plan 198.18.0.<10+i>/24 ends at 240
# nodes; a sandbox of more is a /22 (198.18.0.0 to 198.18.3.255, node i at the (10+i)th address),
# and one bridge takes at most 1,024 ports. Nodes start BATCH at a time, each batch waited for
# before the next.
MAX_LIGHT_NODES=1000
# The prefix of the bridge and of every node's address: 24 unless `up` needs more (NET_PREFIX_WIDE).
NET_PREFIX=24
NET_PREFIX_WIDE=22
NET_PREFIX_MAX_NODES=240
LIGHT_SHM_SIZE=64m
BATCH=${RAYGATE_SANDBOX_BATCH:-20}
BRIDGE=rgbr0
BRIDGE_IP=198.18.0.1
NODE_PATH=/usr/bin:/usr/sbin:/bin:/sbin:/usr/local/bin:/usr/local/sbin
# Where each node sees a copy of tests/sandbox/sim (read-only); its bin/ tools are linked into /usr/local/bin.
SIM_DIR=/usr/local/lib/raygate-sim
# Where systemd nodes' launchers make their cgroups, one root per hierarchy (nspawn-node.sh
# cgroup_dirs picks those of this host): raygate/node<i> under each.
NODE_CGROUP_ROOTS=(/sys/fs/cgroup/raygate /sys/fs/cgroup/systemd/raygate /sys/fs/cgroup/unified/raygate)
# Bound read-only into systemd nodes (tini nodes see the host's /srv as it is).
WHEELHOUSE=${RAYGATE_SANDBOX_WHEELHOUSE:-/srv/raygate/wheelhouse}
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd)
KEY="${STATE}/id_ed25519"
LOCK=/run/lock/raygate-sandbox.lock
SSH_OPTS=(-i "${KEY}" -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
    -o LogLevel=ERROR -o BatchMode=yes -o IdentitiesOnly=yes)

die() {
    echo "sandbox: $*" >&2
    exit 1
}

log() {
    echo "sandbox: $*" >&2
}

check_state_dir() {
    [[ ${STATE} =~ ^/[A-Za-z0-9._/-]+$ ]] || die "state dir must be an absolute path of [A-Za-z0-9._/-]: ${STATE}"
    local d
    # Those are overlaid or tmpfs'd inside the nodes: the state (overlay upper dirs) must not be.
    for d in /etc /opt /usr /var /root /tmp /run /proc /sys /dev; do
        if [[ ${STATE} == "${d}" || ${STATE} == "${d}"/* ]]; then
            die "state dir ${STATE} must not be under ${d}"
        fi
    done
    [[ ${STATE} != / ]] || die "state dir must not be /"
}

node_ip() {
    local k=$((10 + $1))
    echo "198.18.$((k / 256)).$((k % 256))"
}

# tini (the default), light (tini nodes meant for health.yml) or systemd, as `up` recorded it.
sandbox_mode() {
    if [[ -f "${STATE}/mode" ]]; then
        cat "${STATE}/mode"
    else
        echo tini
    fi
}

node_count() {
    [[ -f "${STATE}/nodes" ]] || return 1
    cat "${STATE}/nodes"
}

# True when the process is gone for our purposes (no such PID, or a zombie: zombies hold
# no namespaces, and who reaps them is not ours to decide).
pid_gone() {
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
    stat=${stat##*) }
    [[ ${stat:0:1} == Z ]]
}

# PID 1 of node I as recorded in its pid file, if that process is still alive and still the
# init of a child PID namespace (NSpid ends in 1): guards against PID reuse.
node_init_pid() {
    local file="${STATE}/node$1/pid" pid
    if [[ $(sandbox_mode) == systemd ]]; then
        systemd_pid1 "$1"
        return
    fi
    [[ -s ${file} ]] || return 1
    pid=$(<"${file}")
    [[ ${pid} =~ ^[0-9]+$ ]] || return 1
    grep -qE '^NSpid:\s+[0-9]+\s+1$' "/proc/${pid}/status" 2>/dev/null || return 1
    pid_gone "${pid}" && return 1
    echo "${pid}"
}

# A systemd node's PID 1 changes with every reboot: the process in the node's netns that is
# PID 1 of a child PID namespace and runs systemd.
systemd_pid1() {
    local pid
    for pid in $(ip netns pids "rg-node$1" 2>/dev/null); do
        if grep -qE '^NSpid:\s+[0-9]+\s+1$' "/proc/${pid}/status" 2>/dev/null &&
            [[ $(cat "/proc/${pid}/comm" 2>/dev/null) == systemd ]] && ! pid_gone "${pid}"; then
            echo "${pid}"
            return 0
        fi
    done
    return 1
}

# Every systemd node's cgroup directories (there may be some left without a state dir).
node_cgroups() {
    local root
    for root in "${NODE_CGROUP_ROOTS[@]}"; do
        [[ -d ${root} ]] || continue
        find "${root}" -mindepth 1 -maxdepth 1 -type d -name 'node*'
    done
}

sandbox_exists() {
    [[ -e ${STATE} ]] && return 0
    [[ -n $(node_cgroups) ]] && return 0
    [[ -e /sys/class/net/${BRIDGE} ]] && return 0
    local leftovers=(/run/netns/rg-node* /sys/class/net/rgv*)
    ((${#leftovers[@]} > 0))
}

# ---------------------------------------------------------------------------- down

# systemd nodes: a clean poweroff of all at once (SIGRTMIN+4 to PID 1), bounded; cmd_down
# kills whatever is left after it.
poweroff_systemd_nodes() {
    local f i pid launchers=() deadline
    for f in "${STATE}"/node*/launcher.pid; do
        i=${f%/launcher.pid}
        i=${i##*/node}
        if pid=$(systemd_pid1 "${i}"); then
            kill -s RTMIN+4 "${pid}" 2>/dev/null || true
            launchers+=("$(<"${f}")")
        fi
    done
    deadline=$((SECONDS + 20))
    for pid in "${launchers[@]}"; do
        while [[ ${pid} =~ ^[0-9]+$ ]] && ! pid_gone "${pid}" && ((SECONDS < deadline)); do
            sleep 0.05
        done
    done
}

cmd_down() {
    local pids=() pid f ns link deadline cg sub
    # Slurm's daemons on this host (slurm.sh) would outlive the nodes: stop them first.
    if [[ -d "${STATE}/slurm" || -d /run/raygate-slurm ]]; then
        "${HERE}/slurm.sh" down
    fi
    if [[ $(sandbox_mode) == systemd ]]; then
        poweroff_systemd_nodes
    fi
    # 1. Kill processes first: they hold sockets and namespaces alive.
    # SIGKILL of a PID namespace's init kills everything in that namespace.
    for f in "${STATE}"/node*/pid; do
        f=${f%/pid}
        if pid=$(node_init_pid "${f##*/node}"); then
            kill -KILL "${pid}" 2>/dev/null || true
            pids+=("${pid}")
        fi
    done
    for f in "${STATE}"/node*/launcher.pid; do
        pid=$(<"${f}") || continue
        [[ ${pid} =~ ^[0-9]+$ ]] || continue
        # The launcher leads its own session (setsid): nspawn and the overlay's holders are in it.
        for pid in $(pgrep -s "${pid}" 2>/dev/null || true); do
            kill -KILL "${pid}" 2>/dev/null || true
            pids+=("${pid}")
        done
    done
    # Anything left in a systemd node's cgroup.
    for cg in $(node_cgroups); do
        while read -r pid; do
            [[ ${pid} == "$$" || ${pid} == "${BASHPID}" ]] && continue
            kill -KILL "${pid}" 2>/dev/null || true
            pids+=("${pid}")
        done < <(find "${cg}" -name cgroup.procs -exec cat {} + 2>/dev/null)
    done
    # Anything else still inside a node netns (e.g. started with `ip netns exec`).
    for ns in /run/netns/rg-node*; do
        for pid in $(ip netns pids "${ns##*/}" 2>/dev/null); do
            [[ ${pid} == "$$" || ${pid} == "${BASHPID}" ]] && continue
            kill -KILL "${pid}" 2>/dev/null || true
            pids+=("${pid}")
        done
    done
    deadline=$((SECONDS + 30))
    for pid in "${pids[@]}"; do
        while ! pid_gone "${pid}"; do
            ((SECONDS < deadline)) || die "process ${pid} did not die"
            sleep 0.02
        done
    done
    # 2. Network: deleting a veth end deletes its peer synchronously; netns cleanup is async.
    for link in /sys/class/net/rgv*; do
        ip link del "${link##*/}" 2>/dev/null || true
    done
    for ns in /run/netns/rg-node*; do
        ip netns del "${ns##*/}" 2>/dev/null || true
    done
    if [[ -e /sys/class/net/${BRIDGE} ]]; then
        ip link del "${BRIDGE}"
    fi
    # The container's systemd leaves its own cgroup tree below the node's: deepest first.
    for cg in $(node_cgroups); do
        while read -r sub; do
            rmdir "${sub}" 2>/dev/null || true
        done < <(find "${cg}" -depth -type d)
    done
    for cg in "${NODE_CGROUP_ROOTS[@]}"; do
        [[ ! -d ${cg} ]] || rmdir "${cg}" 2>/dev/null || true
    done
    [[ -z $(node_cgroups) ]] || die "cgroups still hold processes: $(node_cgroups | tr '\n' ' ')"
    # 3. Mounts (none expected in the root mount namespace) and the state dir.
    if [[ -d ${STATE} ]]; then
        local mp
        while read -r mp; do
            umount -l "${mp}" 2>/dev/null || true
        done < <(awk -v s="${STATE}" '$5 == s || index($5, s "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r)
        rm -rf "${STATE}"
    fi
    return 0
}

# ------------------------------------------------------------------------------ up

write_sshd_config() {
    local i=$1
    cat >"${STATE}/node${i}/sshd_config" <<EOF
# sshd of sandbox node${i} (generated by sandbox.sh)
ListenAddress $(node_ip "${i}"):22
HostKey /etc/ssh/ssh_host_ed25519_key
PidFile /run/sshd.pid
PermitRootLogin prohibit-password
PubkeyAuthentication yes
AuthorizedKeysFile ${KEY}.pub
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
MaxSessions 100
MaxStartups 200
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
AcceptEnv LANG LC_*
SetEnv PATH=${NODE_PATH}
Subsystem sftp /usr/lib/openssh/sftp-server
EOF
}

# Disable IPv6 on an interface before it goes up: no link-local chatter on the bridge.
no_ipv6() {
    local conf="/proc/sys/net/ipv6/conf/$1/disable_ipv6"
    if [[ -w ${conf} ]]; then
        echo 1 >"${conf}"
    fi
}

# The host talks to every node over the bridge: past 1,024 neighbours (the kernel's default
# gc_thresh3) it drops entries ("neighbour table overflow") and connections stall. Raised, never
# lowered, for a sandbox of more than NET_PREFIX_MAX_NODES nodes; it stays raised after `down`.
wide_neighbour_table() {
    local key want
    for key in 1:1024 2:4096 3:8192; do
        want=${key#*:}
        key="/proc/sys/net/ipv4/neigh/default/gc_thresh${key%%:*}"
        if [[ -w ${key} ]] && (($(<"${key}") < want)); then
            echo "${want}" >"${key}"
        fi
    done
}

setup_bridge() {
    ip link add "${BRIDGE}" type bridge stp_state 0 forward_delay 0
    no_ipv6 "${BRIDGE}"
    ip addr add "${BRIDGE_IP}/${NET_PREFIX}" dev "${BRIDGE}"
    ip link set "${BRIDGE}" up
}

setup_node_net() {
    local i=$1 ns="rg-node$1" veth="rgv$1"
    ip netns add "${ns}"
    # In the node: IPv6 only on lo (new interfaces, i.e. eth0, get it disabled).
    nsenter --net="/run/netns/${ns}" sh -c 'echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6' 2>/dev/null || true
    ip link add "${veth}" type veth peer name eth0 netns "${ns}"
    no_ipv6 "${veth}"
    ip link set "${veth}" master "${BRIDGE}" up
    ip -n "${ns}" link set lo up
    ip -n "${ns}" addr add "$(node_ip "${i}")/${NET_PREFIX}" dev eth0
    ip -n "${ns}" link set eth0 up
    ip -n "${ns}" route add default via "${BRIDGE_IP}"
}

start_tini_node() {
    local i=$1 dir="${STATE}/node$1" d
    for d in etc opt usr var root; do
        mkdir -p "${dir}/upper/${d}" "${dir}/work/${d}"
    done
    write_sshd_config "${i}"
    setup_node_net "${i}"
    # Detached (own session, stdio to init.log) so the node outlives the calling shell.
    setsid nsenter --net="/run/netns/rg-node${i}" -- \
        unshare --pid --mount --uts --ipc --fork --kill-child --propagation private -- \
        /bin/bash "${HERE}/node-init.sh" "${i}" "${STATE}" "$2" "${SHM_SIZE}" "${NODE_PATH}" "${STATE}/sim" "${SIM_DIR}" \
        </dev/null >"${dir}/init.log" 2>&1 9>&- &
    echo "$!" >"${dir}/launcher.pid"
}

# The node's own files, written into its overlay's upper layer before the first boot: identity,
# the simulators' tools on PATH, and a oneshot that builds the simulated hardware before sshd.
write_systemd_node_files() {
    local i=$1 n=$2 up="${STATE}/node$1/upper" tool j
    mkdir -p "${up}/etc/systemd/system/multi-user.target.wants" "${up}/usr/local/bin"
    tr -d '-' </proc/sys/kernel/random/uuid >"${up}/etc/machine-id"
    echo "node${i}" >"${up}/etc/hostname"
    {
        echo "127.0.0.1 localhost"
        echo "::1 localhost ip6-localhost ip6-loopback"
        echo "${BRIDGE_IP} rg-host"
        for ((j = 1; j <= n; j++)); do
            echo "$(node_ip "${j}") node${j}"
        done
    } >"${up}/etc/hosts"
    for tool in "${STATE}"/sim/bin/*; do
        ln -sfn "${SIM_DIR}/bin/${tool##*/}" "${up}/usr/local/bin/${tool##*/}"
    done
    cat >"${up}/etc/systemd/system/raygate-sim.service" <<EOF
# raygate sandbox: the node's simulated GPUs and RDMA fabric (tests/sandbox/sim), built at boot.
[Unit]
Description=raygate sandbox simulated hardware
Before=ssh.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/bin/python3 ${SIM_DIR}/raygate_sim.py build --init

[Install]
WantedBy=multi-user.target
EOF
    ln -sfn /etc/systemd/system/raygate-sim.service \
        "${up}/etc/systemd/system/multi-user.target.wants/raygate-sim.service"
}

start_systemd_node() {
    local i=$1 dir="${STATE}/node$1"
    mkdir -p "${dir}/upper" "${dir}/work" "${dir}/root"
    write_systemd_node_files "${i}" "$2"
    setup_node_net "${i}"
    setsid /bin/bash "${HERE}/nspawn-node.sh" launch "${i}" "${STATE}" "${ROOTFS}" "${SHM_SIZE}" \
        "${STATE}/sim" "${SIM_DIR}" "${WHEELHOUSE}" </dev/null >"${dir}/init.log" 2>&1 9>&- &
    echo "$!" >"${dir}/launcher.pid"
}

start_node() {
    if [[ ${MODE} == systemd ]]; then
        start_systemd_node "$@"
    else
        start_tini_node "$@"
    fi
}

# A systemd node has booted when its systemd says running (or degraded: a unit failed, which
# the tests see for themselves).
systemd_booted() {
    local state
    state=$(cmd_exec_quiet "$1" systemctl is-system-running 2>/dev/null) || true
    [[ ${state} == running || ${state} == degraded ]]
}

# Poll until node I accepts an SSH login, its launcher dies, or the deadline passes.
wait_node() {
    local i=$1 deadline=$2 ip launcher
    ip=$(node_ip "${i}")
    launcher=$(<"${STATE}/node${i}/launcher.pid")
    while ((SECONDS < deadline)); do
        if pid_gone "${launcher}"; then
            log "node${i} died during start; ${STATE}/node${i}/init.log:"
            sed 's/^/  /' "${STATE}/node${i}/init.log" >&2 || true
            return 1
        fi
        if ssh "${SSH_OPTS[@]}" -o ConnectTimeout=2 "root@${ip}" true </dev/null 2>/dev/null; then
            [[ $(sandbox_mode) == systemd ]] || return 0
            systemd_booted "${i}" && return 0
        fi
        sleep 0.05
    done
    log "node${i} (${ip}) did not accept SSH within ${TIMEOUT}s; ${STATE}/node${i}/init.log:"
    sed 's/^/  /' "${STATE}/node${i}/init.log" >&2 || true
    return 1
}

# True while a tini node's sshd is not yet listening and its launcher is alive: port 22 in state
# LISTEN (0A) in the node's own TCP table, read through the launcher (it sits in the node's netns).
# No process is started, so many nodes can be polled often.
sshd_pending() {
    local table="/proc/$1/net/tcp" _sl addr _rem st _rest
    [[ -r ${table} ]] || return 1
    while read -r _sl addr _rem st _rest; do
        [[ ${addr} == *:0016 && ${st} == 0A ]] && return 1
    done 2>/dev/null <"${table}"
    return 0
}

# Wait for nodes FIRST..LAST until DEADLINE. tini and light nodes: one loop polls every node's
# TCP table until its sshd listens (or its launcher died); then, for every mode, one SSH login per
# node, all at once, proves that each answers (wait_node, which also reports a dead or late node).
wait_nodes() {
    local first=$1 last=$2 deadline=$3 i launcher pending=() next=() waiters=() w failed=0
    if [[ ${MODE} != systemd ]]; then
        for ((i = first; i <= last; i++)); do
            pending+=("${i}")
        done
        while ((${#pending[@]} > 0 && SECONDS < deadline)); do
            next=()
            for i in "${pending[@]}"; do
                read -r launcher <"${STATE}/node${i}/launcher.pid"
                if sshd_pending "${launcher}"; then
                    next+=("${i}")
                fi
            done
            pending=("${next[@]}")
            ((${#pending[@]} == 0)) || sleep 0.05
        done
    fi
    for ((i = first; i <= last; i++)); do
        wait_node "${i}" "${deadline}" &
        waiters+=("$!")
    done
    for w in "${waiters[@]}"; do
        wait "${w}" || failed=1
    done
    ((failed == 0))
}

cmd_up() {
    local n=${1:-} max=${MAX_NODES} i first last w
    [[ ${MODE} != light ]] || max=${MAX_LIGHT_NODES}
    if ! [[ ${n} =~ ^[0-9]+$ ]] || ((n < 1 || n > max)); then
        die "usage: up N (1..${MAX_NODES}; with --light 1..${MAX_LIGHT_NODES})"
    fi
    [[ ${BATCH} =~ ^[0-9]+$ ]] && ((BATCH >= 1)) || die "RAYGATE_SANDBOX_BATCH must be a number >= 1: ${BATCH}"
    local tools=(ip nsenter unshare setsid ssh-keygen ssh)
    if [[ ${MODE} == systemd ]]; then
        tools+=(systemd-nspawn)
    else
        tools+=(tini sshd)
    fi
    for w in "${tools[@]}"; do
        command -v "${w}" >/dev/null || [[ -x /usr/sbin/${w} ]] || die "missing command: ${w}"
    done
    if sandbox_exists; then
        cmd_down
    fi
    mkdir -p "${STATE}"
    echo "${MODE}" >"${STATE}/mode"
    ssh-keygen -q -t ed25519 -N '' -C raygate-sandbox -f "${KEY}"
    chmod 0600 "${KEY}"
    echo "${n}" >"${STATE}/nodes"
    # The nodes see the simulators from the state dir: the checkout may sit under /tmp,
    # which every node hides behind its own tmpfs.
    mkdir -p "${STATE}/sim"
    cp -a "${HERE}/sim/." "${STATE}/sim/"
    if ((n > NET_PREFIX_MAX_NODES)); then
        NET_PREFIX=${NET_PREFIX_WIDE}
        wide_neighbour_table
    fi
    setup_bridge
    # In batches: a hundred nodes generating host keys and building their simulated hardware at
    # once would starve each other past the timeout. Each batch gets the whole timeout.
    for ((first = 1; first <= n; first += BATCH)); do
        last=$((first + BATCH - 1))
        ((last <= n)) || last=${n}
        for ((i = first; i <= last; i++)); do
            start_node "${i}" "${n}"
        done
        wait_nodes "${first}" "${last}" $((SECONDS + TIMEOUT)) ||
            die "up failed; sandbox left in place for inspection (run: $0 down)"
    done
    log "${n} ${MODE} node(s) up in ${SECONDS}s; key ${KEY}"
}

# -------------------------------------------------------------------- the others

require_node() {
    local i=${1:-} n
    n=$(node_count) || die "no sandbox (run: $0 up N)"
    if ! [[ ${i} =~ ^[0-9]+$ ]] || ((i < 1 || i > n)); then
        die "no such node: '${i}' (nodes 1..${n})"
    fi
}

cmd_status() {
    local n i pid reach tmp running=0
    n=$(node_count) || die "no sandbox"
    tmp=$(mktemp -d)
    # At most BATCH logins at a time: a hundred at once would outlast ConnectTimeout on 2 cores.
    for ((i = 1; i <= n; i++)); do
        if ((running >= BATCH)); then
            wait -n || true
            running=$((running - 1))
        fi
        (ssh "${SSH_OPTS[@]}" -o ConnectTimeout=2 "root@$(node_ip "${i}")" true </dev/null 2>/dev/null &&
            touch "${tmp}/${i}") &
        running=$((running + 1))
    done
    wait || true
    local bad=0
    for ((i = 1; i <= n; i++)); do
        pid=$(node_init_pid "${i}") || pid=-
        reach=no
        [[ -e "${tmp}/${i}" ]] && reach=yes
        [[ ${pid} != - && ${reach} == yes ]] || bad=1
        printf '%s %s %s %s\n' "node${i}" "$(node_ip "${i}")" "${pid}" "${reach}"
    done
    rm -rf "${tmp}"
    ((bad == 0)) || exit 2
}

cmd_exec() {
    local i=${1:-}
    require_node "${i}"
    shift
    (($# > 0)) || die "usage: exec I CMD..."
    node_init_pid "${i}" >/dev/null || die "node${i} is not running"
    cmd_exec_quiet "${i}" "$@"
}

# Run CMD in node I's namespaces; rc 1 (no message) when the node has no PID 1.
cmd_exec_quiet() {
    local i=$1 pid
    shift
    pid=$(node_init_pid "${i}") || return 1
    if [[ $(sandbox_mode) == systemd ]]; then
        # --root/--wd without a value: the node's own (a path given to them would be opened on
        # the host, before entering); its cgroup namespace too, as its systemd sees it.
        nsenter --target "${pid}" --mount --uts --ipc --net --pid --cgroup --root --wd -- \
            env -i -C /root PATH="${NODE_PATH}" HOME=/root USER=root LOGNAME=root LANG=C.UTF-8 \
            TERM="${TERM:-dumb}" "$@"
    else
        nsenter --target "${pid}" --mount --uts --ipc --net --pid --wd=/root -- \
            env -i PATH="${NODE_PATH}" HOME=/root USER=root LOGNAME=root LANG=C.UTF-8 \
            TERM="${TERM:-dumb}" "$@"
    fi
}

# Reboot systemd node I (`systemctl reboot` inside) and wait until it has booted and answers SSH.
cmd_reboot() {
    local i=${1:-} old deadline
    require_node "${i}"
    [[ $(sandbox_mode) == systemd ]] || die "reboot needs systemd nodes (up N --systemd)"
    old=$(node_init_pid "${i}") || die "node${i} is not running"
    cmd_exec_quiet "${i}" systemctl reboot || die "systemctl reboot failed in node${i}"
    deadline=$((SECONDS + TIMEOUT))
    while ! pid_gone "${old}"; do
        ((SECONDS < deadline)) || die "node${i}: PID 1 (${old}) still runs ${TIMEOUT}s after reboot"
        sleep 0.05
    done
    wait_node "${i}" $((SECONDS + TIMEOUT)) || die "node${i} did not come back after reboot"
    log "node${i} rebooted: PID 1 ${old} -> $(node_init_pid "${i}")"
}

# Validate, build the node's tree, then save the file as its scenario: a bad file changes nothing.
# Then publish it where every node sees it read-only (${SIM_DIR}/scenarios, the bind of ${STATE}/sim):
# a node's simulated mpirun reads its peers' hardware there, by address or by name.
cmd_scenario() {
    local i=${1:-} file=${2:-} pid dest name
    require_node "${i}"
    [[ -n ${file} && $# -eq 2 ]] || die "usage: scenario I FILE"
    [[ -f ${file} && -r ${file} ]] || die "cannot read scenario file: ${file}"
    node_init_pid "${i}" >/dev/null || die "node${i} is not running"
    cmd_exec_quiet "${i}" /usr/bin/python3 "${SIM_DIR}/raygate_sim.py" set-scenario <"${file}"
    dest="${STATE}/sim/scenarios"
    mkdir -p "${dest}"
    chmod 0755 "${dest}"
    for name in "$(node_ip "${i}")" "node${i}"; do
        install -m 0644 "${file}" "${dest}/${name}.json.tmp"
        mv -f "${dest}/${name}.json.tmp" "${dest}/${name}.json"
    done
}

cmd_ssh() {
    local i=${1:-}
    require_node "${i}"
    shift
    exec ssh "${SSH_OPTS[@]}" "root@$(node_ip "${i}")" "$@"
}

# Same groups as the committed inventories/sandbox/hosts.yml: node1 heads, the rest work.
cmd_inventory() {
    local n i
    n=$(node_count) || die "no sandbox"
    cat <<EOF
# Generated by tests/sandbox/sandbox.sh inventory (${n} nodes)
ray_cluster:
  vars:
    ansible_user: root
    ansible_python_interpreter: /usr/bin/python3
    ansible_ssh_private_key_file: ${KEY}
    ansible_ssh_common_args: -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null
  children:
    ray_head:
      hosts:
        node1:
          ansible_host: $(node_ip 1)
EOF
    ((n > 1)) || return 0
    printf '    ray_workers:\n      hosts:\n'
    for ((i = 2; i <= n; i++)); do
        printf '        node%d:\n          ansible_host: %s\n' "${i}" "$(node_ip "${i}")"
    done
}

usage() {
    sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

# up and down change machine-wide names (bridge, netns, IPs): one at a time. The fd is
# closed for the nodes, or a running node would hold the lock forever.
lock() {
    [[ $(id -u) == 0 ]] || die "must run as root"
    exec 9>"${LOCK}"
    flock -w 120 9 || die "another sandbox.sh up/down holds ${LOCK}"
}

main() {
    local cmd=${1:-}
    (($# > 0)) && shift
    check_state_dir
    case ${cmd} in
    up)
        MODE=tini
        if [[ ${2:-} == --systemd ]]; then
            MODE=systemd
            # Before the lock: the first build takes minutes; later ones find it cached.
            ROOTFS=$("${HERE}/rootfs.sh" build) || die "no rootfs for systemd nodes"
        elif [[ ${2:-} == --light ]]; then
            MODE=light
            SHM_SIZE=${RAYGATE_SANDBOX_SHM_SIZE:-${LIGHT_SHM_SIZE}}
        fi
        (($# <= 2)) && [[ -z ${2:-} || ${MODE} != tini ]] || die "usage: up N [--systemd|--light]"
        lock
        cmd_up "${1:-}"
        ;;
    reboot) cmd_reboot "$@" ;;
    down) lock; cmd_down ;;
    status) cmd_status ;;
    exec) cmd_exec "$@" ;;
    ssh) cmd_ssh "$@" ;;
    inventory) cmd_inventory ;;
    scenario) cmd_scenario "$@" ;;
    slurm) exec "${HERE}/slurm.sh" "$@" ;;
    *) usage ;;
    esac
}

main "$@"
