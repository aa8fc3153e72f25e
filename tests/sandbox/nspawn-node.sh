#!/usr/bin/env bash
# Launcher of one systemd sandbox node (sandbox.sh up N --systemd), run detached by sandbox.sh
# on the host. The node boots systemd as PID 1 with systemd-nspawn, inside the node's network
# namespace, on a copy-on-write overlay of the cached rootfs (rootfs.sh).
#
# Usage (internal): nspawn-node.sh launch INDEX STATE_DIR ROOTFS SHM_SIZE SIM_SRC SIM_DIR WHEELHOUSE
#
# - The host has no systemd as PID 1 to make a scope for nspawn (hence --register=no
#   --keep-unit): the launcher joins a cgroup of its own first (cgroup_dirs), or the container's
#   systemd would take the host's root cgroup as its own.
# - The overlay is mounted only inside the launcher's private mount namespace: the host never
#   sees it, and it cannot outlive the launcher. It survives the node's reboots because the
#   launcher, not nspawn, holds it.
# - nspawn exits 133 when the node reboots (systemd-nspawn@.service restarts on it): we loop.
#   Any other exit (a poweroff, a SIGKILL of PID 1) ends the launcher.
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")

# The cgroup directories of node NAME, one per hierarchy that systemd uses (under the roots that
# sandbox.sh lists in NODE_CGROUP_ROOTS, whose down removes them).
cgroup_dirs() {
    local name=$1
    if [[ $(stat -fc %T /sys/fs/cgroup) == cgroup2fs ]]; then
        echo "/sys/fs/cgroup/raygate/${name}"
        return 0
    fi
    [[ -d /sys/fs/cgroup/systemd ]] && echo "/sys/fs/cgroup/systemd/raygate/${name}"
    if [[ $(stat -fc %T /sys/fs/cgroup/unified 2>/dev/null) == cgroup2fs ]]; then
        echo "/sys/fs/cgroup/unified/raygate/${name}"
    fi
    return 0
}

cmd_launch() {
    local index=$1 d
    # Keep only stdio: an inherited descriptor (a caller's pipe, the sandbox lock) would live
    # as long as the node.
    for d in /proc/self/fd/*; do
        d=${d##*/}
        if ((d > 2)); then
            eval "exec ${d}>&-"
        fi
    done
    for d in $(cgroup_dirs "node${index}"); do
        mkdir -p "${d}"
        echo "${BASHPID}" >"${d}/cgroup.procs"
    done
    exec unshare --mount --propagation private -- /bin/bash "${SELF}" run "$@"
}

cmd_run() {
    local index=$1 state=$2 rootfs=$3 shm_size=$4 sim_src=$5 sim_dir=$6 wheelhouse=$7
    local name="node${index}" dir="${state}/node${index}" ns="rg-node${index}" mp rc args
    # The copied mount table holds a bind (nsfs) of every netns that exists now: left there, they
    # would keep the other nodes' netns alive after `down`. Keep only this node's.
    while read -r mp; do
        [[ ${mp} == "/run/netns/${ns}" ]] || umount -l "${mp}" 2>/dev/null || true
    done < <(awk '{ for (i = 7; i < NF; i++) if ($i == "-") { if ($(i + 1) == "nsfs") print $5; break } }' /proc/self/mountinfo)
    mount -t overlay "rg-${name}-root" \
        -o "lowerdir=${rootfs},upperdir=${dir}/upper,workdir=${dir}/work" "${dir}/root"
    args=(
        --directory="${dir}/root" --boot --machine="${name}" --hostname="${name}"
        --register=no --keep-unit
        # Both: the joined netns alone gives neither CAP_NET_ADMIN (nft fails) nor a /sys that
        # shows the node's own interfaces.
        --network-namespace-path="/run/netns/${ns}" --private-network
        --console=read-only --resolv-conf=off --timezone=off --link-journal=no
        --bind-ro="${state}/id_ed25519.pub:/root/.ssh/authorized_keys"
        --bind-ro="${sim_src}:${sim_dir}"
        --tmpfs="/dev/shm:mode=1777,size=${shm_size}"
    )
    if [[ -n ${wheelhouse} && -d ${wheelhouse} ]]; then
        args+=(--bind-ro="${wheelhouse}")
    fi
    while true; do
        echo "launcher: $(date -u +%T.%3N) booting ${name}"
        rc=0
        systemd-nspawn "${args[@]}" </dev/null || rc=$?
        echo "launcher: $(date -u +%T.%3N) systemd-nspawn exited ${rc}"
        ((rc == 133)) || exit "${rc}"
    done
}

case ${1:-} in
launch)
    shift
    cmd_launch "$@"
    ;;
run)
    shift
    cmd_run "$@"
    ;;
*)
    sed -n '2,8p' "${SELF}" | sed 's/^# \{0,1\}//' >&2
    exit 2
    ;;
esac
