#!/usr/bin/env bash
# The unit tests on the newest ansible-core releases, which need a newer Python (>= 3.12) than
# Debian 12's 3.11: in a Debian 13 (trixie, Python 3.13) chroot, built once and cached (issue 29).
#
#   trixie.sh [run]   build the chroot unless cached, then the unit tests on each of CORE_VERSIONS
#                     and ansible-test sanity on each of SANITY_VERSIONS, inside it
#   trixie.sh play TARBALL ARGS...
#                     build the chroot unless cached, install the collection TARBALL (as a user
#                     would, with ansible-galaxy) on the newest of CORE_VERSIONS, then run
#                     `ansible-playbook ARGS...` there: a Debian 13 controller for the sandbox
#                     nodes (the host's network). BINDS: host directories (colon-separated) seen at
#                     the same path inside, e.g. the inventory's and the sandbox's.
#   trixie.sh clean   remove the cached chroot
#
# CORE_VERSIONS (default "2.20 2.21") and SANITY_VERSIONS (default "2.21") are ansible-core minors;
# the Makefile sets them (NEXT_CORE_VERSIONS, NEXT_SANITY_VERSIONS). Needs root and debootstrap.
#
# Cache: .build/trixie-controller/{rootfs/,stamp}, built in a temporary directory beside it and
# renamed into place only once its stamp is written; a failed build is removed. The stamp holds a
# key over the suite, architecture, package list and ROOTFS_VERSION (bump it when the build
# changes): a tree with another key is rebuilt. In the chroot, one venv per minor
# (/opt/ansible-core-X.Y) with its own stamp holding what was asked of pip; the checkout (only
# what git would ship) goes to /work/main and ../shared/samples to /work/shared/samples, the
# layout the parser tests expect. Everything that runs in the chroot runs in a mount namespace
# of its own (unshare), so its /proc and /dev mounts end with it, even when it is killed; an exit
# trap still unmounts anything left under the build tree and removes a half-made one.
set -euo pipefail

ROOTFS_VERSION=2
SUITE=trixie
MIRROR=${RAYGATE_TRIXIE_MIRROR:-http://deb.debian.org/debian}
# python3-venv brings ensurepip (pip for each venv); git and rsync are what tests/sanity/run.sh
# uses; openssh-client is what `play` reaches the nodes with. No ca-certificates: the host's CA
# bundle is copied in (below), as pip must trust what the host trusts (a TLS-inspecting egress
# proxy included).
PACKAGES=(python3 python3-venv git rsync openssh-client)
CORE_VERSIONS=${CORE_VERSIONS:-2.20 2.21}
SANITY_VERSIONS=${SANITY_VERSIONS:-2.21}
HOST_CA=${RAYGATE_HOST_CA:-/etc/ssl/certs/ca-certificates.crt}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cache=${repo}/.build/trixie-controller
root=${cache}/rootfs
building=

die() {
    echo "trixie: $*" >&2
    exit 1
}

log() {
    echo "trixie: $*" >&2
}

cache_key() {
    local sum
    sum=$(printf '%s\n' "version=${ROOTFS_VERSION}" "suite=${SUITE}" "arch=$(dpkg --print-architecture)" \
        "${PACKAGES[@]}" | sha256sum)
    echo "${SUITE}-$(dpkg --print-architecture)-${sum:0:16}"
}

is_built() {
    [[ -f ${cache}/stamp && -x ${root}/usr/bin/python3 ]] &&
        grep -qxF "key=$(cache_key)" "${cache}/stamp"
}

# Mount points at or under DIR, deepest first.
mounts_under() {
    awk -v d="$1" '$5 == d || index($5, d "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

umount_under() {
    local dir=$1 mp
    while read -r mp; do
        umount -l "${mp}" 2>/dev/null || true
    done < <(mounts_under "${dir}")
    [[ -z $(mounts_under "${dir}") ]] || die "still mounted under ${dir}; not deleting it"
}

remove_tree() {
    [[ -e $1 ]] || return 0
    umount_under "$1"
    rm -rf --one-file-system "$1"
}

cleanup() {
    local rc=$?
    umount_under "${cache}" || rc=1
    if [[ -n ${building} ]]; then
        log "removing the unfinished build ${building}"
        remove_tree "${building}" || rc=1
    fi
    exit "${rc}"
}

build() {
    local start=${SECONDS} include
    is_built && return 0
    command -v debootstrap >/dev/null || die "debootstrap is missing (apt-get install debootstrap)"
    remove_tree "${cache}"
    local old
    for old in "${cache}".build.*; do
        [[ -e ${old} ]] && remove_tree "${old}"
    done
    building=${cache}.build.$$
    mkdir -p "${building}"
    include=$(
        IFS=,
        echo "${PACKAGES[*]}"
    )
    log "debootstrap ${SUITE} from ${MIRROR} (log: ${building}/build.log)"
    # In a mount namespace of its own: whatever debootstrap mounts in the tree cannot outlive it.
    if ! unshare --mount --propagation private -- debootstrap --variant=minbase --components=main \
        --include="${include}" "${SUITE}" "${building}/rootfs" "${MIRROR}" >"${building}/build.log" 2>&1; then
        tail -n 20 "${building}/build.log" >&2
        [[ -f ${building}/rootfs/debootstrap/debootstrap.log ]] &&
            tail -n 20 "${building}/rootfs/debootstrap/debootstrap.log" >&2
        die "debootstrap failed"
    fi
    rm -rf "${building}"/rootfs/var/cache/apt/archives/*.deb "${building}"/rootfs/var/lib/apt/lists/*
    printf 'key=%s\nbuilt %s in %ss from %s\n' "$(cache_key)" "$(date -u +%FT%TZ)" \
        "$((SECONDS - start))" "${MIRROR}" >"${building}/stamp"
    mv -T "${building}" "${cache}"
    building=
    log "built ${root} in $((SECONDS - start))s ($(du -sh --one-file-system "${root}" | cut -f1))"
}

# Run a command in the chroot, in a mount namespace of its own, with a clean environment.
in_chroot() {
    local envs=(HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
        LANG=C.UTF-8 LC_ALL=C.UTF-8 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_INPUT=1)
    local v
    if [[ -f ${root}/etc/ssl/certs/ca-certificates.crt ]]; then
        envs+=(PIP_CERT=/etc/ssl/certs/ca-certificates.crt SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
            REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt)
    fi
    for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY PIP_INDEX_URL PIP_DEFAULT_TIMEOUT; do
        [[ -n ${!v:-} ]] && envs+=("${v}=${!v}")
    done
    # shellcheck disable=SC2016 # expanded by the inner shell
    unshare --mount --propagation private -- bash -euo pipefail -c '
        root=$1 binds=$2
        shift 2
        mount -t proc proc "${root}/proc"
        mount --rbind /dev "${root}/dev"
        mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "${root}/dev/shm"
        IFS=: read -ra dirs <<<"${binds}"
        for d in "${dirs[@]}"; do
            [[ -n ${d} ]] || continue
            mkdir -p "${root}${d}"
            mount --bind "${d}" "${root}${d}"
        done
        exec chroot "${root}" /usr/bin/env -i "$@"' in_chroot "${root}" "${BINDS:-}" "${envs[@]}" "$@"
}

venv_spec() {
    local v=$1
    # The test dependencies pinned for the host's venv, as the Makefile's compat target takes them.
    echo "ansible-core==${v}.* $(grep -E '^(pytest|hypothesis|pyyaml)==' "${repo}/requirements-dev.txt" | tr '\n' ' ')"
}

make_venv() {
    local v=$1 spec venv
    spec=$(venv_spec "${v}")
    venv=/opt/ansible-core-${v}
    if [[ -f ${root}${venv}/stamp ]] && [[ $(head -n1 "${root}${venv}/stamp") == "${spec}" ]]; then
        return 0
    fi
    log "venv ${venv}: ${spec}"
    rm -rf "${root:?}${venv}"
    in_chroot python3 -m venv "${venv}"
    # shellcheck disable=SC2086 # the spec is a list of requirements
    in_chroot "${venv}/bin/pip" install -q ${spec}
    {
        echo "${spec}"
        in_chroot "${venv}/bin/pip" freeze --all
    } >"${root}${venv}/stamp.tmp"
    mv -f "${root}${venv}/stamp.tmp" "${root}${venv}/stamp"
}

copy_trust() {
    # The host's trust, as of this run (see PACKAGES).
    # Removed first: a link in the tree would point into the host.
    rm -f "${root}/etc/ssl/certs/ca-certificates.crt" "${root}/etc/resolv.conf"
    if [[ -f ${HOST_CA} ]]; then
        install -D -m 0644 "${HOST_CA}" "${root}/etc/ssl/certs/ca-certificates.crt"
    fi
    cp -L /etc/resolv.conf "${root}/etc/resolv.conf"
}

copy_checkout() {
    local shared=${repo}/../shared/samples
    copy_trust
    rm -rf --one-file-system "${root}/work/main"
    mkdir -p "${root}/work/main"
    # Only what git would ship: tracked files plus untracked ones that are not ignored.
    (cd "${repo}" && git ls-files -co --exclude-standard -z |
        rsync -a --from0 --files-from=- --ignore-missing-args ./ "${root}/work/main/")
    # tests/sanity/run.sh lists the files with git: a repository of its own, nothing committed.
    in_chroot git -C /work/main init -q
    if [[ -d ${shared} ]]; then
        mkdir -p "${root}/work/shared"
        rsync -a --delete "${shared}/" "${root}/work/shared/samples/"
    else
        rm -rf --one-file-system "${root}/work/shared/samples"
    fi
}

cmd_run() {
    local v failed=() debian python installed start
    exec 9>"${repo}/.build/trixie-controller.lock"
    flock -w 1800 9 || die "another run holds ${repo}/.build/trixie-controller.lock"
    build
    copy_checkout
    for v in ${CORE_VERSIONS}; do
        make_venv "${v}"
    done
    debian=$(cut -d. -f1 "${root}/etc/debian_version")
    python=$(in_chroot python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    for v in ${CORE_VERSIONS}; do
        # The stamp: the spec asked of pip, then what pip installed (pip freeze).
        installed=$(tail -n +2 "${root}/opt/ansible-core-${v}/stamp" | grep -m1 -oP '^ansible-core==\K\S+' || echo '?')
        echo "== ansible-core ${v} (Debian ${debian}, Python ${python}): ${installed}"
        start=${SECONDS}
        in_chroot env -C /work/main "/opt/ansible-core-${v}/bin/pytest" -q -p no:cacheprovider -m unit tests ||
            failed+=("units on ${v}")
        echo "-- units on ${v}: $((SECONDS - start))s"
        case " ${SANITY_VERSIONS} " in *" ${v} "*)
            echo "== ansible-test sanity, ansible-core ${v} (Debian ${debian}, Python ${python}): ${installed}"
            start=${SECONDS}
            # run.sh pins --python 3.11 (the host's); the later --python wins.
            in_chroot env VENV="/opt/ansible-core-${v}" /work/main/tests/sanity/run.sh --python "${python}" ||
                failed+=("sanity on ${v}")
            echo "-- sanity on ${v}: $((SECONDS - start))s"
            ;;
        esac
    done
    echo "-- in all: ${SECONDS}s"
    if ((${#failed[@]})); then
        die "FAILED (Debian ${debian}, Python ${python}): $(
            IFS=,
            echo "${failed[*]}"
        )"
    fi
    echo "== all passed on Debian ${debian}, Python ${python}: units on ${CORE_VERSIONS// /, }; sanity on ${SANITY_VERSIONS// /, }"
}

# The collection as a user installs it: from the tarball, into a collections path of its own, made
# again whenever the tarball changes (its checksum is the stamp). A minimal ansible.cfg beside it.
install_collection() {
    local venv=$1 tarball=$2 sum dir=/opt/raygate-controller
    sum=$(sha256sum "${tarball}" | cut -d' ' -f1)
    if [[ $(cat "${root}${dir}/tarball.sha256" 2>/dev/null) == "${sum}" ]]; then
        return 0
    fi
    rm -rf --one-file-system "${root:?}${dir}"
    mkdir -p "${root}${dir}"
    cp "${tarball}" "${root}${dir}/collection.tar.gz"
    in_chroot "${venv}/bin/ansible-galaxy" collection install --offline -p "${dir}/collections" \
        "${dir}/collection.tar.gz" >/dev/null
    cat >"${root}${dir}/ansible.cfg" <<EOF
# The Debian 13 test controller (tests/controller/trixie.sh play): the installed tarball only.
[defaults]
collections_path = ${dir}/collections
interpreter_python = auto_silent
forks = 50
retry_files_enabled = false

[ssh_connection]
pipelining = true
ssh_args = -o ControlMaster=auto -o ControlPersist=120s -o LogLevel=ERROR
EOF
    echo "${sum}" >"${root}${dir}/tarball.sha256"
}

cmd_play() {
    local tarball=${1:-} v venv
    [[ -f ${tarball} ]] || die "play: no collection tarball ${tarball:-(none given)}"
    tarball=$(realpath "${tarball}")
    shift
    exec 9>"${repo}/.build/trixie-controller.lock"
    flock -w 1800 9 || die "another run holds ${repo}/.build/trixie-controller.lock"
    build
    copy_trust
    v=${CORE_VERSIONS##* }
    venv=/opt/ansible-core-${v}
    make_venv "${v}"
    install_collection "${venv}" "${tarball}"
    in_chroot env ANSIBLE_CONFIG=/opt/raygate-controller/ansible.cfg ANSIBLE_FORCE_COLOR=0 \
        "${venv}/bin/ansible-playbook" "$@"
}

cmd_clean() {
    exec 9>"${repo}/.build/trixie-controller.lock"
    flock -w 60 9 || die "a run holds ${repo}/.build/trixie-controller.lock"
    remove_tree "${cache}"
}

main() {
    [[ $(id -u) == 0 ]] || die "must run as root (debootstrap, chroot)"
    mkdir -p "${repo}/.build"
    trap cleanup EXIT
    # Without these, an interrupted run would skip the EXIT trap.
    trap 'exit 130' INT
    trap 'exit 143' TERM
    case ${1:-run} in
    run) cmd_run ;;
    play)
        shift
        cmd_play "$@"
        ;;
    clean) cmd_clean ;;
    *)
        sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
    esac
}

main "$@"
