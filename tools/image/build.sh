#!/usr/bin/env bash
# The Ray node image (issue 43), built offline from raygate's cached Debian tree and the wheelhouse,
# archived, and pushed to a local registry on 127.0.0.1 (make image; docs/CONTAINERS.md).
#
#   build.sh build [--force]   build, archive and push unless up to date; print the reference to pin
#   build.sh registry start    start the local registry (docker-registry) unless it runs
#   build.sh registry stop     stop it (its data stays)
#   build.sh registry status   rc 0 when it runs and answers
#
# Inputs: RAY_VERSION (required), WHEELHOUSE (/srv/raygate/wheelhouse), the bookworm tree of
# tests/sandbox/rootfs.sh (built from the Debian mirror once, when missing: the only step that needs
# the network), tools/image/Containerfile and containers.conf. The build itself runs with
# --network none; pip installs from the wheelhouse alone (--no-index).
#
# Outputs in ${RAYGATE_IMAGE_OUT:-.build/image}, for Ray <v>:
#   ray-<v>.digest         the registry's manifest digest (sha256:...): the value to pin
#   ray-<v>.ref            127.0.0.1:<port>/raygate/ray@sha256:...
#   ray-<v>.oci.tar        the image as an OCI archive, copied from the registry by digest (skopeo)
#   ray-<v>.oci.tar.sha256 its checksum (sha256sum format)
#   ray-<v>.inputs         what it was built from; a build with the same inputs does nothing
# State in ${RAYGATE_IMAGE_DIR:-/srv/raygate/image}: podman's storage for the build (storage/, not
# the host's /var/lib/containers), the registry (registry/: config.yml, data/, pid, log) and a lock.
# The registry listens on 127.0.0.1:${RAYGATE_REGISTRY_PORT:-5050} only, without TLS or auth.
#
# Reproducible: --timestamp 0 and SOURCE_DATE_EPOCH=0 (Containerfile) make the same inputs give the
# same image and the same digest; `build --force` rebuilds without cache and says whether the digest
# stayed. Needs root, podman, skopeo, runc and docker-registry (make image installs them).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "${HERE}/../.." && pwd)
RAY_VERSION=${RAY_VERSION:-}
WHEELHOUSE=${WHEELHOUSE:-/srv/raygate/wheelhouse}
OUT=${RAYGATE_IMAGE_OUT:-${ROOT}/.build/image}
STATE=${RAYGATE_IMAGE_DIR:-/srv/raygate/image}
PORT=${RAYGATE_REGISTRY_PORT:-5050}
REGISTRY=127.0.0.1:${PORT}
REPO=raygate/ray
# Only this host's root lacks CAP_SYS_RESOURCE, so podman's default limits (nofile 1048576, nproc
# 4194304) cannot be set: ask for what the host allows (docs/CONTAINERS.md).
ULIMITS=${RAYGATE_IMAGE_ULIMITS:-nofile=$(ulimit -Hn):$(ulimit -Hn) nproc=32768:32768}
export CONTAINERS_CONF=${HERE}/containers.conf
# skopeo and podman unpack big files in TMPDIR: keep them with the state, off the host's /var/tmp.
export TMPDIR=${STATE}/tmp

die() {
    echo "image: $*" >&2
    exit 1
}

log() {
    echo "image: $*" >&2
}

# podman on the build's own storage, run state and events.
pm() {
    podman --root "${STATE}/storage" --runroot "${STATE}/run/storage" --tmpdir "${STATE}/run/libpod" \
        --storage-driver overlay "$@"
}

check_settings() {
    [[ ${PORT} =~ ^[0-9]+$ ]] && ((PORT >= 1024 && PORT <= 65535)) || die "RAYGATE_REGISTRY_PORT must be 1024-65535: ${PORT}"
    [[ ${STATE} =~ ^/[A-Za-z0-9._/-]+$ && ${STATE} != / ]] || die "RAYGATE_IMAGE_DIR must be an absolute path of [A-Za-z0-9._/-]: ${STATE}"
}

need_tools() {
    local tool missing=()
    [[ $(id -u) == 0 ]] || die "must run as root (rootful podman; see docs/CONTAINERS.md)"
    for tool in "$@"; do
        command -v "${tool}" >/dev/null || missing+=("${tool}")
    done
    ((${#missing[@]} == 0)) || die "missing ${missing[*]}: make image installs podman, buildah, skopeo, runc, docker-registry"
}

# ---- the registry ------------------------------------------------------------------------------
registry_pid() {
    local pid
    pid=$(cat "${STATE}/registry/pid" 2>/dev/null) || return 1
    [[ ${pid} =~ ^[0-9]+$ ]] || return 1
    # Ours only: the pid of a registry serving our config, not a recycled one.
    tr '\0' ' ' <"/proc/${pid}/cmdline" 2>/dev/null | grep -qF "serve ${STATE}/registry/config.yml" || return 1
    echo "${pid}"
}

registry_answers() {
    curl -fsS -o /dev/null --noproxy "*" --max-time 2 "http://${REGISTRY}/v2/" 2>/dev/null
}

registry_status() {
    registry_pid >/dev/null && registry_answers
}

write_registry_config() {
    mkdir -p "${STATE}/registry/data"
    cat >"${STATE}/registry/config.yml.tmp" <<EOF
# raygate's local registry (tools/image/build.sh): loopback only, no TLS, no auth.
version: 0.1
log:
  level: warn
  fields:
    service: registry
storage:
  filesystem:
    rootdirectory: ${STATE}/registry/data
  delete:
    enabled: true
http:
  addr: ${REGISTRY}
  headers:
    X-Content-Type-Options: [nosniff]
EOF
    mv -f "${STATE}/registry/config.yml.tmp" "${STATE}/registry/config.yml"
}

registry_start() {
    local pid i
    registry_status && return 0
    need_tools docker-registry curl
    if pid=$(registry_pid); then
        die "the registry (pid ${pid}) runs but does not answer on http://${REGISTRY}/v2/ (log: ${STATE}/registry/log)"
    fi
    if ss -Hltn "sport = :${PORT}" | grep -q .; then
        die "port ${PORT} is taken: $(ss -Hltnp "sport = :${PORT}" | head -n1) (set RAYGATE_REGISTRY_PORT)"
    fi
    write_registry_config
    # Its own session, and none of our descriptors: neither the lock (fd 9), which must not outlive this
    # script, nor a pipe of whoever runs us, who would wait for its end.
    (
        for fd in /proc/self/fd/*; do
            fd=${fd##*/}
            ((fd > 2)) && eval "exec ${fd}>&-"
        done
        exec setsid docker-registry serve "${STATE}/registry/config.yml"
    ) </dev/null >>"${STATE}/registry/log" 2>&1 &
    echo $! >"${STATE}/registry/pid"
    for ((i = 0; i < 50; i++)); do
        registry_answers && {
            log "registry on http://${REGISTRY} (pid $!, data ${STATE}/registry/data)"
            return 0
        }
        kill -0 $! 2>/dev/null || break
        sleep 0.2
    done
    tail -n 5 "${STATE}/registry/log" >&2 || true
    die "the registry did not come up on ${REGISTRY} (log: ${STATE}/registry/log)"
}

registry_stop() {
    local pid i
    pid=$(registry_pid) || return 0
    kill "${pid}"
    for ((i = 0; i < 50; i++)); do
        kill -0 "${pid}" 2>/dev/null || break
        sleep 0.2
    done
    rm -f "${STATE}/registry/pid"
    log "registry stopped (pid ${pid})"
}

# ---- the image ---------------------------------------------------------------------------------
# Everything the image is made of, as text: a build with the same text does nothing. The wheelhouse's
# whole listing, since pip picks from all it holds.
inputs() {
    local rootfs=$1
    echo "ray=${RAY_VERSION}"
    echo "registry=${REGISTRY}/${REPO}"
    echo "rootfs=${rootfs}"
    sed 's/^/rootfs-stamp: /' "$(dirname "${rootfs}")/stamp"
    (cd "${HERE}" && sha256sum Containerfile containers.conf build.sh)
    echo "podman=$(podman --version) skopeo=$(skopeo --version)"
    (cd "${WHEELHOUSE}" && find . -maxdepth 1 -name '*.whl' -printf 'wheel %f %s\n' | LC_ALL=C sort)
}

# The registry serves the manifest of digest $1 (its bytes hash to it).
registry_has() {
    local got
    got=$(skopeo inspect --tls-verify=false --raw "docker://${REGISTRY}/${REPO}@$1" 2>/dev/null | sha256sum) || return 1
    [[ "sha256:${got%% *}" == "$1" ]]
}

up_to_date() {
    local name=$1 want=$2 digest
    [[ -f ${OUT}/${name}.inputs ]] && cmp -s "${OUT}/${name}.inputs" "${want}" || return 1
    digest=$(cat "${OUT}/${name}.digest" 2>/dev/null) || return 1
    (cd "${OUT}" && sha256sum --status -c "${name}.oci.tar.sha256") || return 1
    registry_has "${digest}"
}

# The rootfs as a tar with owners, modes, links and extended attributes, in name order.
rootfs_tar() {
    local rootfs=$1 tar=$2
    tar --numeric-owner --xattrs --xattrs-include='*' --sort=name --format=posix \
        --pax-option='exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime' \
        -C "${rootfs}" -cf "${tar}" .
}

build_image() {
    local rootfs=$1 tag=$2 ctx=${STATE}/ctx.$$ u ulimit_args=()
    for u in ${ULIMITS}; do
        ulimit_args+=(--ulimit "${u}")
    done
    rm -rf "${ctx}" && mkdir -p "${ctx}"
    # shellcheck disable=SC2064 # the path now
    trap "rm -rf '${ctx}'" EXIT
    rootfs_tar "${rootfs}" "${ctx}/rootfs.tar"
    # --no-cache: a RUN step's cache key ignores the wheelhouse mounted into it.
    pm build --no-cache --pull=never --network none --timestamp 0 "${ulimit_args[@]}" \
        --build-arg "RAY_VERSION=${RAY_VERSION}" -v "${WHEELHOUSE}:/wheels:ro" \
        -f "${HERE}/Containerfile" -t "localhost/${REPO}:${tag}" "${ctx}" >"${STATE}/build.log" 2>&1 || {
        tail -n 20 "${STATE}/build.log" >&2
        die "podman build failed (log: ${STATE}/build.log)"
    }
    rm -rf "${ctx}"
    trap - EXIT
    # The image this replaced, if any.
    pm image prune -f >/dev/null
}

cmd_build() {
    local force=0 rootfs name tag start=${SECONDS} t digest old archive
    [[ ${1:-} == --force ]] && force=1
    [[ ${RAY_VERSION} =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] || die "RAY_VERSION must be X.Y.Z: '${RAY_VERSION}'"
    need_tools podman skopeo runc docker-registry curl tar sha256sum
    [[ -f ${WHEELHOUSE}/.ray-${RAY_VERSION}.stamp ]] || die "no Ray ${RAY_VERSION} in ${WHEELHOUSE} (make wheelhouse)"
    mkdir -p "${STATE}/tmp" "${STATE}/run" "${OUT}"
    exec 9>"${STATE}/.lock"
    flock -w 1800 9 || die "another image build holds ${STATE}/.lock"
    rootfs=$(RAYGATE_ROOTFS_SUITE=bookworm "${ROOT}/tests/sandbox/rootfs.sh" path) ||
        rootfs=$(RAYGATE_ROOTFS_SUITE=bookworm "${ROOT}/tests/sandbox/rootfs.sh" build)
    name=ray-${RAY_VERSION}
    tag=${RAY_VERSION}-bookworm
    archive=${OUT}/${name}.oci.tar
    inputs "${rootfs}" >"${OUT}/${name}.inputs.new"
    registry_start
    if [[ ${force} == 0 ]] && up_to_date "${name}" "${OUT}/${name}.inputs.new"; then
        rm -f "${OUT}/${name}.inputs.new"
        log "up to date: $(cat "${OUT}/${name}.ref")"
        cat "${OUT}/${name}.ref"
        return 0
    fi
    old=$(cat "${OUT}/${name}.digest" 2>/dev/null || true)
    if [[ ${force} == 1 ]]; then
        log "rebuilding (--force)"
    elif [[ -f ${OUT}/${name}.inputs ]] && ! cmp -s "${OUT}/${name}.inputs" "${OUT}/${name}.inputs.new"; then
        log "rebuilding: the inputs changed: $(diff "${OUT}/${name}.inputs" "${OUT}/${name}.inputs.new" | grep '^[<>]' | head -n 4 | tr '\n' ';')"
    elif [[ -f ${OUT}/${name}.inputs ]]; then
        log "rebuilding: the archive, its checksum or the registry's copy is missing or wrong"
    fi
    rm -f "${OUT}/${name}.inputs"
    t=${SECONDS}
    build_image "${rootfs}" "${tag}"
    log "built localhost/${REPO}:${tag} in $((SECONDS - t))s"
    t=${SECONDS}
    pm push --tls-verify=false --digestfile "${STATE}/push.digest" "localhost/${REPO}:${tag}" \
        "docker://${REGISTRY}/${REPO}:${tag}" >/dev/null 2>"${STATE}/push.log" || {
        cat "${STATE}/push.log" >&2
        die "push to ${REGISTRY} failed"
    }
    digest=$(cat "${STATE}/push.digest")
    [[ ${digest} =~ ^sha256:[0-9a-f]{64}$ ]] || die "podman push wrote no digest: '${digest}'"
    registry_has "${digest}" || die "the registry does not serve ${REPO}@${digest} after the push"
    log "pushed ${REGISTRY}/${REPO}:${tag} in $((SECONDS - t))s: ${digest}"
    # The archive from the registry by digest: skopeo copies the pushed blobs as they are, so the
    # archive's index.json names the very digest (podman save would recompress).
    t=${SECONDS}
    rm -f "${archive}.tmp"
    skopeo copy -q --src-tls-verify=false "docker://${REGISTRY}/${REPO}@${digest}" \
        "oci-archive:${archive}.tmp:${REPO}:${tag}" >/dev/null
    [[ $(skopeo inspect --format '{{.Digest}}' "oci-archive:${archive}.tmp") == "${digest}" ]] ||
        die "the archive does not name ${digest}"
    mv -f "${archive}.tmp" "${archive}"
    (cd "${OUT}" && sha256sum "${name}.oci.tar" >"${name}.oci.tar.sha256.tmp" && mv -f "${name}.oci.tar.sha256.tmp" "${name}.oci.tar.sha256")
    log "archived ${archive} ($(du -h "${archive}" | cut -f1)) in $((SECONDS - t))s"
    echo "${REGISTRY}/${REPO}@${digest}" >"${OUT}/${name}.ref"
    echo "${digest}" >"${OUT}/${name}.digest"
    mv -f "${OUT}/${name}.inputs.new" "${OUT}/${name}.inputs"
    if [[ -n ${old} && ${old} != "${digest}" ]]; then
        log "the digest changed: was ${old}"
    elif [[ -n ${old} ]]; then
        log "the same digest as before: reproduced"
    fi
    log "done in $((SECONDS - start))s; pin ${REGISTRY}/${REPO}@${digest}"
    cat "${OUT}/${name}.ref"
}

main() {
    local cmd=${1:-}
    shift || true
    case ${cmd} in
    build)
        check_settings
        cmd_build "$@"
        ;;
    registry)
        check_settings
        mkdir -p "${STATE}/registry"
        exec 9>"${STATE}/.lock"
        flock -w 1800 9 || die "an image build holds ${STATE}/.lock"
        case ${1:-} in
        start) registry_start ;;
        stop) registry_stop ;;
        status) registry_status ;;
        *) die "registry start|stop|status" ;;
        esac
        ;;
    *)
        sed -n '5,8p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
        exit 2
        ;;
    esac
}

main "$@"
