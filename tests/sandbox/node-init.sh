#!/usr/bin/env bash
# Setup of one sandbox node, run by sandbox.sh as PID 1 of the node's fresh PID, mount,
# UTS and IPC namespaces, already inside the node's network namespace. Builds the node's
# private filesystem view, then execs tini (PID 1) with sshd as its only child.
#
# Usage (internal): node-init.sh INDEX STATE_DIR NODE_COUNT SHM_SIZE NODE_PATH SIM_SRC SIM_DIR
set -euo pipefail

index=$1
state=$2
count=$3
shm_size=$4
node_path=$5
sim_src=$6
sim_dir=$7
name="node${index}"
dir="${state}/${name}"

# Keep only stdio: an inherited descriptor (a caller's pipe) would live as long as the node.
for fd in /proc/self/fd/*; do
    fd=${fd##*/}
    if ((fd > 2)); then
        eval "exec ${fd}>&-"
    fi
done

# Our PID as seen from the root PID namespace. /proc is still the host's here, and a
# redirection on a compound command is opened by this shell itself, so /proc/self is us.
host_pid=
while read -r key value _; do
    if [[ ${key} == NSpid: ]]; then
        host_pid=${value}
        break
    fi
done </proc/self/status
echo "${host_pid}" >"${dir}/pid.tmp"
mv "${dir}/pid.tmp" "${dir}/pid"

# unshare already made every mount private; be explicit so nothing leaks back to the host.
mount --make-rprivate /

# The copied mount table holds the nsfs bind mounts of every netns that existed when this
# node was started. Left there, they would keep other nodes' netns alive after `down`.
umount -l /run/netns 2>/dev/null || true

# Copy-on-write system directories: writes land in ${dir}/upper/<d>.
for d in etc opt usr var root; do
    mount -t overlay "rg-${name}-${d}" \
        -o "lowerdir=/${d},upperdir=${dir}/upper/${d},workdir=${dir}/work/${d}" "/${d}"
done

mount -t tmpfs -o mode=0755,nosuid,nodev "rg-${name}-run" /run
mount -t tmpfs -o mode=1777,nosuid,nodev "rg-${name}-tmp" /tmp
mount -t tmpfs -o "mode=1777,nosuid,nodev,size=${shm_size}" "rg-${name}-shm" /dev/shm
mkdir -m 0755 /run/sshd
mkdir -m 1777 /run/lock

# sysfs must be mounted from inside the netns to show this node's interfaces
# (/sys/class/net). Keep the host's cgroup tree under it: Ray reads memory limits there.
mkdir /run/.rg-cgroup
mount --rbind /sys/fs/cgroup /run/.rg-cgroup
umount -l /sys
mount -t sysfs -o nosuid,nodev,noexec "rg-${name}-sys" /sys
mount --move /run/.rg-cgroup /sys/fs/cgroup
rmdir /run/.rg-cgroup

# A /proc of this PID namespace: `ps -e` shows only this node's processes.
mount -t proc -o nosuid,nodev,noexec "rg-${name}-proc" /proc

# Identity: hostname, /etc/hosts with every node, a machine id, own SSH host key.
hostname "${name}"
echo "${name}" >/etc/hostname
{
    echo "127.0.0.1 localhost"
    echo "::1 localhost ip6-localhost ip6-loopback"
    echo "198.18.0.1 rg-host"
    for ((j = 1; j <= count; j++)); do
        # The address plan of sandbox.sh node_ip: 198.18.0.11 up, past .255 into 198.18.1.0 and on.
        echo "198.18.$(((10 + j) / 256)).$(((10 + j) % 256)) node${j}"
    done
} >/etc/hosts
tr -d '-' </proc/sys/kernel/random/uuid >/etc/machine-id
# A fresh root account: the host's dotfiles (pyenv, cargo) would put their shims ahead of
# /usr/bin in every SSH command and slow each one down.
cp /usr/share/base-files/dot.bashrc /root/.bashrc
cp /usr/share/base-files/dot.profile /root/.profile
rm -f /etc/ssh/ssh_host_*
ssh-keygen -q -t ed25519 -N '' -C "root@${name}" -f /etc/ssh/ssh_host_ed25519_key

# Simulated RDMA hardware (tests/sandbox/sim): the tools on PATH, read-only from the checkout,
# and the default scenario (IB, 8 x 400 Gb/s) built into /opt/raygate-sim/sys.
mkdir -p "${sim_dir}"
mount --bind "${sim_src}" "${sim_dir}"
mount -o remount,bind,ro "${sim_dir}"
for tool in "${sim_dir}"/bin/*; do
    ln -sfn "${tool}" "/usr/local/bin/${tool##*/}"
done
/usr/bin/python3 "${sim_dir}/raygate_sim.py" build --init

cd /
exec env -i PATH="${node_path}" LANG=C.UTF-8 \
    /usr/bin/tini -- /usr/sbin/sshd -D -e -f "${dir}/sshd_config"
