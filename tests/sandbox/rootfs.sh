#!/usr/bin/env bash
# A cached Debian root filesystem for sandbox nodes that boot systemd (systemd-nspawn -b): Debian 12
# (bookworm) unless RAYGATE_ROOTFS_SUITE names another (trixie: Debian 13, Python 3.13).
#
#   rootfs.sh build   build it unless already built; print the rootfs path
#   rootfs.sh path    print the rootfs path if built (rc 1 otherwise)
#   rootfs.sh clean   remove every cached rootfs and leftover build
#
# Cache: ${RAYGATE_ROOTFS_DIR:-/srv/raygate/rootfs}/<key>/{rootfs/,stamp}. The key is derived
# from the suite, architecture, package list and ROOTFS_VERSION (bump it when configure_rootfs
# changes). A build goes to a temporary directory next to the cache and is renamed into place
# only after its stamp is written, so a half-built tree is never used. Mirror: the Debian mirror
# configured in /etc/apt for the suite, else the host's own Debian mirror, which serves every
# suite (RAYGATE_ROOTFS_MIRROR overrides). Needs root, debootstrap and
# systemd-container (installed with apt-get when missing). Nodes using the tree must keep it
# read-only (overlay it); the tree has no SSH host keys and an empty machine id.
set -euo pipefail
shopt -s nullglob

ROOTFS_VERSION=2
SUITE=${RAYGATE_ROOTFS_SUITE:-bookworm}
CACHE=${RAYGATE_ROOTFS_DIR:-/srv/raygate/rootfs}
# redis-server: the managed Redis of GCS fault tolerance (tests/integration/gcsft); the nodes
# cannot reach a mirror, so the package must be in the tree. python3-apt: Ansible's package module
# needs it to see that redis-server is installed (else it tries to install python3-apt itself).
# nginx: the head's HTTPS proxy in front of Ray's dashboard (raygate_dashboard_https), run by
# raygate's own unit with its own configuration.
PACKAGES=(systemd systemd-sysv dbus openssh-server python3 python3-apt python3-venv iproute2 procps
    psmisc nftables util-linux rsync ca-certificates curl redis-server nginx)
# Units that cannot work, or have nothing to do, in a container without a console or a network
# manager of its own: the launcher configures the node's network from the host.
MASKED_UNITS=(getty.target console-getty.service container-getty@.service getty@.service
    serial-getty@.service systemd-firstboot.service
    systemd-networkd.service systemd-networkd.socket systemd-networkd-wait-online.service
    systemd-resolved.service systemd-timesyncd.service
    apt-daily.timer apt-daily-upgrade.timer dpkg-db-backup.timer e2scrub_all.timer
    e2scrub_reap.service fstrim.timer
    # The distribution's Redis binds 127.0.0.1:6379, the GCS port; raygate runs its own unit.
    redis-server.service
    # The distribution's nginx serves its default site on port 80; raygate runs its own unit.
    nginx.service)

die() {
    echo "rootfs: $*" >&2
    exit 1
}

log() {
    echo "rootfs: $*" >&2
}

check_cache_dir() {
    [[ ${SUITE} =~ ^[a-z]+$ ]] || die "RAYGATE_ROOTFS_SUITE must be a Debian codename (bookworm, trixie): ${SUITE}"
    [[ ${CACHE} =~ ^/[A-Za-z0-9._/-]+$ ]] || die "cache dir must be an absolute path of [A-Za-z0-9._/-]: ${CACHE}"
    [[ ${CACHE} != / ]] || die "cache dir must not be /"
}

arch() {
    dpkg --print-architecture
}

cache_key() {
    local sum
    sum=$(printf '%s\n' "version=${ROOTFS_VERSION}" "suite=${SUITE}" "arch=$(arch)" \
        "${PACKAGES[@]}" "${MASKED_UNITS[@]}" | sha256sum)
    echo "${SUITE}-$(arch)-${sum:0:16}"
}

built_dir() {
    echo "${CACHE}/$(cache_key)"
}

is_built() {
    local dir
    dir=$(built_dir)
    [[ -f "${dir}/stamp" && -x "${dir}/rootfs/usr/lib/systemd/systemd" ]]
}

# The first enabled "deb" source for SUITE itself (not -updates/-security) in /etc/apt,
# one-line (.list) or deb822 (.sources) format.
mirror_for() {
    local suite=$1 f uri=
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [[ -f ${f} ]] || continue
        uri=$(awk -v suite="${suite}" '
            $1 == "deb" {
                i = 2
                if ($i ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
                if ($(i + 1) == suite) { print $i; exit }
            }' "${f}")
        [[ -n ${uri} ]] && break
    done
    if [[ -z ${uri} ]]; then
        for f in /etc/apt/sources.list.d/*.sources; do
            uri=$(awk -v suite="${suite}" '
                function flush() {
                    if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " suite " ") && enabled != "no" && uri != "") {
                        print uri; found = 1; exit
                    }
                    types = ""; suites = ""; uri = ""; enabled = ""
                }
                /^#/ { next }
                /^[ \t]*$/ { flush(); next }
                tolower($1) == "types:" { $1 = ""; types = $0; sub(/^ +/, "", types) }
                tolower($1) == "suites:" { $1 = ""; suites = $0; sub(/^ +/, "", suites) }
                tolower($1) == "uris:" { uri = $2 }
                tolower($1) == "enabled:" { enabled = tolower($2) }
                END { if (!found) flush() }' "${f}")
            [[ -n ${uri} ]] && break
        done
    fi
    [[ -n ${uri} ]] || return 1
    echo "${uri}"
}

# The mirror for ${SUITE}: its own source in /etc/apt, else the host's (a Debian mirror serves
# every suite: a bookworm host builds a trixie tree from its bookworm source).
find_mirror() {
    local host
    if [[ -n ${RAYGATE_ROOTFS_MIRROR:-} ]]; then
        echo "${RAYGATE_ROOTFS_MIRROR}"
        return 0
    fi
    mirror_for "${SUITE}" && return 0
    host=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    [[ -n ${host} && ${host} != "${SUITE}" ]] && mirror_for "${host}"
}

ensure_tools() {
    local missing=()
    command -v debootstrap >/dev/null || missing+=(debootstrap)
    command -v systemd-nspawn >/dev/null || missing+=(systemd-container)
    ((${#missing[@]} == 0)) && return 0
    log "installing ${missing[*]}"
    # No recommends: systemd-container recommends libnss-mymachines, which edits the host's nsswitch.conf.
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >&2 ||
        die "apt-get install ${missing[*]} failed"
}

# Unmount whatever is mounted at or under DIR (a failed debootstrap can leave proc/sys mounted),
# deepest first, then make sure nothing is left before anything is deleted.
umount_under() {
    local dir=$1 mp
    while read -r mp; do
        umount -l "${mp}" 2>/dev/null || true
    done < <(awk -v d="${dir}" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r)
    if awk -v d="${dir}" '$5 == d || index($5, d "/") == 1 { found = 1 } END { exit !found }' /proc/self/mountinfo; then
        die "still mounted under ${dir}; not deleting it"
    fi
}

remove_tree() {
    local dir=$1
    [[ -e ${dir} ]] || return 0
    umount_under "${dir}"
    rm -rf --one-file-system "${dir}"
}

configure_rootfs() {
    local root=$1
    # Identity comes from each node: no shared machine id, no shared SSH host keys.
    : >"${root}/etc/machine-id"
    rm -f "${root}/var/lib/dbus/machine-id" "${root}"/etc/ssh/ssh_host_*
    echo localhost >"${root}/etc/hostname"
    systemctl --root="${root}" mask "${MASKED_UNITS[@]}" >/dev/null 2>&1
    systemctl --root="${root}" enable ssh.service >/dev/null 2>&1
    # sshd refuses to start without host keys: make any missing ones on each node's first boot.
    mkdir -p "${root}/etc/systemd/system/ssh.service.d"
    cat >"${root}/etc/systemd/system/ssh.service.d/raygate-hostkeys.conf" <<'EOF'
# raygate sandbox: the shared rootfs has no host keys; each node makes its own.
[Service]
ExecStartPre=
ExecStartPre=/usr/bin/ssh-keygen -A
ExecStartPre=/usr/sbin/sshd -t
EOF
    # Debian's own sshd otherwise (PAM included, as on a real node); many parallel sessions for Ansible.
    cat >"${root}/etc/ssh/sshd_config.d/raygate.conf" <<'EOF'
# raygate sandbox node (tests/sandbox/rootfs.sh)
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
PrintMotd no
PrintLastLog no
X11Forwarding no
MaxSessions 100
MaxStartups 200
EOF
    # pam_env reads it on every SSH login (and complains when it is missing).
    echo LANG=C.UTF-8 >"${root}/etc/default/locale"
    # A small journal in /run: a node's logs go with it.
    mkdir -p "${root}/etc/systemd/journald.conf.d"
    printf '[Journal]\nStorage=volatile\nRuntimeMaxUse=32M\n' >"${root}/etc/systemd/journald.conf.d/raygate.conf"
    cp "${root}/usr/share/base-files/dot.bashrc" "${root}/root/.bashrc"
    cp "${root}/usr/share/base-files/dot.profile" "${root}/root/.profile"
    install -d -m 0700 "${root}/root/.ssh"
    rm -rf "${root}"/var/cache/apt/archives/*.deb "${root}"/var/lib/apt/lists/*
    printf 'key=%s\nversion=%s\nsuite=%s\npackages=%s\n' "$(cache_key)" "${ROOTFS_VERSION}" "${SUITE}" \
        "${PACKAGES[*]}" >"${root}/etc/raygate-rootfs"
}

cmd_build() {
    local key dir tmp mirror start=${SECONDS} include
    [[ $(id -u) == 0 ]] || die "must run as root"
    key=$(cache_key)
    dir="${CACHE}/${key}"
    mkdir -p "${CACHE}"
    exec 8>"${CACHE}/.lock"
    flock -w 1800 8 || die "another rootfs build holds ${CACHE}/.lock"
    if is_built; then
        echo "${dir}/rootfs"
        return 0
    fi
    ensure_tools
    mirror=$(find_mirror) || die "no enabled 'deb' source for ${SUITE} in /etc/apt (set RAYGATE_ROOTFS_MIRROR)"
    local old
    for old in "${CACHE}"/.build-*; do
        remove_tree "${old}"
    done
    remove_tree "${dir}"
    tmp="${CACHE}/.build-${key}.$$"
    mkdir -p "${tmp}" "${CACHE}/.debs"
    include=$(
        IFS=,
        echo "${PACKAGES[*]}"
    )
    log "debootstrap ${SUITE} from ${mirror} into ${tmp} (log: ${tmp}/build.log)"
    if ! debootstrap --variant=minbase --components=main --include="${include}" \
        --cache-dir="${CACHE}/.debs" "${SUITE}" "${tmp}/rootfs" "${mirror}" >"${tmp}/build.log" 2>&1; then
        tail -n 20 "${tmp}/build.log" >&2
        [[ -f "${tmp}/rootfs/debootstrap/debootstrap.log" ]] && tail -n 20 "${tmp}/rootfs/debootstrap/debootstrap.log" >&2
        umount_under "${tmp}"
        die "debootstrap failed; build left in ${tmp} for inspection (rootfs.sh clean removes it)"
    fi
    umount_under "${tmp}/rootfs"
    configure_rootfs "${tmp}/rootfs"
    # shellcheck disable=SC2016 # dpkg-query's own format, not shell
    chroot "${tmp}/rootfs" dpkg-query -W -f '${Package} ${Version}\n' >"${tmp}/packages.txt"
    echo "built $(date -u +%FT%TZ) in $((SECONDS - start))s from ${mirror}" >"${tmp}/stamp"
    mv -T "${tmp}" "${dir}"
    log "built ${dir}/rootfs in $((SECONDS - start))s ($(du -sh --one-file-system "${dir}/rootfs" | cut -f1))"
    echo "${dir}/rootfs"
}

cmd_path() {
    is_built || return 1
    echo "$(built_dir)/rootfs"
}

cmd_clean() {
    local d
    [[ $(id -u) == 0 ]] || die "must run as root"
    [[ -d ${CACHE} ]] || return 0
    exec 8>"${CACHE}/.lock"
    flock -w 60 8 || die "a rootfs build holds ${CACHE}/.lock"
    for d in "${CACHE}"/.build-* "${CACHE}"/*/; do
        d=${d%/}
        [[ -f ${d}/stamp || ${d##*/} == .build-* ]] || continue
        remove_tree "${d}"
    done
    rm -rf "${CACHE}/.debs"
}

main() {
    local cmd=${1:-}
    check_cache_dir
    case ${cmd} in
    build) cmd_build ;;
    path) cmd_path ;;
    clean) cmd_clean ;;
    *)
        sed -n '2,6p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
    esac
}

main "$@"
