#!/usr/bin/env bash
# shellcheck disable=SC2317 # the steps and the EXIT trap are called indirectly (step NAME FUNCTION, trap)
# The hardware check (issue 29): run raygate's GPU health gate on the real GPU node this script runs
# on, through Ansible with `ansible_connection: local`, and say what each step judged and how long
# it took. Run it on the node itself, as root. docs/HARDWARE.md says what it needs and shows a run.
#
#   1. gpu_health        ansible -m raygate.cluster.gpu_health (ad hoc, local)
#   2. nccl-tests build  only when all_reduce_perf is missing from the build dir
#   3. nccl_test single  ansible -m raygate.cluster.nccl_test, mode=single, over this node's GPUs
#   4. health.yml        ansible-playbook health.yml over a one-node inventory
#
# On a machine without nvidia-smi it says so and exits 0 without running anything. Not part of
# `make test` (CI has no GPU): `make hardware` runs it.
set -euo pipefail

usage() {  # builtins only: it runs before anything is looked up on PATH
  local text
  IFS= read -r -d '' text <<'EOF' || true
Usage: tests/hardware/run.sh [options]

Options (each also read from the environment variable named in brackets):
  --nccl-tests-src PATH  nccl-tests source tree, a folder or a .tar.gz; needed only when
                         all_reduce_perf is not built yet                  [NCCL_TESTS_SRC]
  --nccl-home DIR        NCCL to build against (include/nccl.h, lib/libnccl.so*); default:
                         the nvidia-nccl-cu13/-cu12 wheel of python3, else
                         /usr/lib/<arch>-linux-gnu, else /usr/local/nccl   [NCCL_HOME]
  --cuda-home DIR        the CUDA toolkit (bin/nvcc); default /usr/local/cuda [CUDA_HOME]
  --build-dir DIR        where nccl-tests are (or get) built; default /opt/nccl-tests/build
                                                                            [NCCL_TESTS_BUILD]
  --out DIR              where the report goes; default ./artifacts/hardware/<UTC timestamp>
                                                                            [HARDWARE_OUT]
  --max-bytes SIZE       nccl-tests' largest message (-e); default 16G      [NCCL_TEST_MAX_BYTES]
  -h, --help             this text

Also read: NVCC_GENCODE (default from nvidia-smi's compute capability, 9.0 ->
-gencode=arch=compute_90,code=sm_90), RAYGATE_NUM_GPUS (default nvidia-smi's GPU count).
Exit status: 0 when no step failed (or no nvidia-smi), 1 when one did, 2 for bad options.
EOF
  printf '%s' "$text"
}

NCCL_TESTS_SRC=${NCCL_TESTS_SRC:-}
NCCL_HOME=${NCCL_HOME:-}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NCCL_TESTS_BUILD=${NCCL_TESTS_BUILD:-/opt/nccl-tests/build}
HARDWARE_OUT=${HARDWARE_OUT:-}
NCCL_TEST_MAX_BYTES=${NCCL_TEST_MAX_BYTES:-16G}

while (($#)); do
  case $1 in
    --nccl-tests-src) NCCL_TESTS_SRC=${2:?--nccl-tests-src needs a path}; shift 2 ;;
    --nccl-home) NCCL_HOME=${2:?--nccl-home needs a folder}; shift 2 ;;
    --cuda-home) CUDA_HOME=${2:?--cuda-home needs a folder}; shift 2 ;;
    --build-dir) NCCL_TESTS_BUILD=${2:?--build-dir needs a folder}; shift 2 ;;
    --out) HARDWARE_OUT=${2:?--out needs a folder}; shift 2 ;;
    --max-bytes) NCCL_TEST_MAX_BYTES=${2:?--max-bytes needs a size}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) echo "run.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
  esac
done

# Before anything else: no GPU node, nothing to check (and nothing written).
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "no nvidia-smi on this machine: nothing to check (run this on a GPU node)"
  exit 0
fi

# ---- where things are ------------------------------------------------------------------------
HERE=$(cd "${BASH_SOURCE[0]%/*}" && pwd -P)
ROOT=$(cd "$HERE/../.." && pwd -P)

# Ansible: the checkout's .venv when there is one (what `make bootstrap` builds), else PATH's.
if [[ -x $ROOT/.venv/bin/ansible ]]; then
  ANSIBLE_BIN=$ROOT/.venv/bin
elif command -v ansible >/dev/null 2>&1; then
  ANSIBLE_BIN=$(dirname "$(command -v ansible)")
else
  echo "run.sh: no ansible: run 'make bootstrap' in the checkout, or install ansible-core" >&2
  exit 2
fi
# The python that runs Ansible runs the modules too (ansible_python_interpreter) and reads the results.
PY=$(head -n1 "$ANSIBLE_BIN/ansible")
PY=${PY#\#!}
PY=${PY%% *}
if [[ $PY == */env || ! -x $PY ]]; then
  PY=$(command -v python3)
fi

# The collection: from a checkout, the checkout itself through .build/collections (as the Makefile
# sets it); from an installed copy (.../ansible_collections/raygate/cluster), the folder above.
if [[ -f $ROOT/galaxy.yml && $ROOT != */ansible_collections/raygate/cluster ]]; then
  link=$ROOT/.build/collections/ansible_collections/raygate/cluster
  if [[ ! -e $link ]]; then
    mkdir -p "${link%/*}"
    ln -sfn ../../../.. "$link"
  fi
  export ANSIBLE_COLLECTIONS_PATH=$ROOT/.build/collections
elif [[ $ROOT == */ansible_collections/raygate/cluster ]]; then
  export ANSIBLE_COLLECTIONS_PATH=${ROOT%/ansible_collections/raygate/cluster}
fi
if [[ -f $ROOT/ansible.cfg ]]; then
  export ANSIBLE_CONFIG=$ROOT/ansible.cfg
fi
export ANSIBLE_NOCOLOR=1 ANSIBLE_DEPRECATION_WARNINGS=0

[[ $NCCL_TESTS_BUILD == /* ]] || NCCL_TESTS_BUILD=$PWD/$NCCL_TESTS_BUILD
ALL_REDUCE=$NCCL_TESTS_BUILD/all_reduce_perf

HARDWARE_OUT=${HARDWARE_OUT:-artifacts/hardware/$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$HARDWARE_OUT"
HARDWARE_OUT=$(cd "$HARDWARE_OUT" && pwd -P)
WORK=$(mktemp -d)

# Everything printed from here on also goes to run.log. The tee is a process substitution: wait on
# its PID at the end (a bare `wait` would wait for the tee itself and never return).
exec 3>&1 4>&2
exec > >(tee -a "$HARDWARE_OUT/run.log") 2>&1
TEE_PID=$!
finish() {
  local rc=$?
  rm -rf "$WORK"
  exec 1>&3 2>&4 3>&- 4>&-
  wait "$TEE_PID" 2>/dev/null || true
  return "$rc"
}
trap finish EXIT

# ---- the node --------------------------------------------------------------------------------
GPU_COUNT=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c '[0-9]' || true)
# At least 1: raygate_num_gpus 0 would mean "not gated"; with a broken driver gpu_health says why.
NUM_GPUS=${RAYGATE_NUM_GPUS:-$((GPU_COUNT > 0 ? GPU_COUNT : 1))}
if [[ -z ${NVCC_GENCODE:-} ]]; then
  NVCC_GENCODE=""
  while read -r cap; do
    cap=${cap//[^0-9.]/}
    [[ $cap == *.* ]] || continue
    arch=${cap%%.*}${cap#*.}
    NVCC_GENCODE+="${NVCC_GENCODE:+ }-gencode=arch=compute_$arch,code=sm_$arch"
  done < <(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | sort -u)
fi

# NCCL, for the build (headers, a libnccl.so to link) and the runs (libnccl.so.2 on the loader's path).
NCCL_LIB="" NCCL_INC=""
nccl_at() {  # nccl_at LIBDIR INCDIR: take them if they hold NCCL
  if [[ -z $NCCL_LIB && -e $1/libnccl.so.2 && -f $2/nccl.h ]]; then
    NCCL_LIB=$1 NCCL_INC=$2
  fi
}
if [[ -n $NCCL_HOME ]]; then
  nccl_at "$NCCL_HOME/lib" "$NCCL_HOME/include"
  nccl_at "$NCCL_HOME/lib64" "$NCCL_HOME/include"
  [[ -n $NCCL_LIB ]] || echo "warning: NCCL_HOME=$NCCL_HOME holds no include/nccl.h and lib/libnccl.so.2"
else
  # The NVIDIA wheel (nvidia-nccl-cu13, nvidia-nccl-cu12) of python3, then the system's.
  declare -A seen=()
  for p in "$(command -v python3 || true)" /usr/bin/python3 /usr/local/bin/python3 "$PY"; do
    [[ -n $p && -x $p && -z ${seen[$p]:-} ]] || continue
    seen[$p]=1
    while read -r sp; do
      [[ -d $sp/nvidia ]] || continue
      lib=$(find "$sp/nvidia" -maxdepth 4 -name libnccl.so.2 -print -quit 2>/dev/null || true)
      if [[ -n $lib ]]; then nccl_at "${lib%/*}" "${lib%/*/*}/include"; fi
    done < <("$p" -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null || true)
  done
  nccl_at "/usr/lib/$(uname -m)-linux-gnu" /usr/include
  nccl_at /usr/local/nccl/lib /usr/local/nccl/include
fi
if [[ -n $NCCL_LIB ]]; then
  export LD_LIBRARY_PATH=$NCCL_LIB:$CUDA_HOME/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi

# The one-node inventory: this node, reached without SSH.
INVENTORY=$HARDWARE_OUT/inventory.yml
cat >"$INVENTORY" <<EOF
---
# Written by tests/hardware/run.sh: this node alone, reached without SSH.
ray_cluster:
  children:
    ray_head:
      hosts:
        ${HOSTNAME%%.*}:
          ansible_host: 127.0.0.1
          ansible_connection: local
          ansible_python_interpreter: $PY
  vars:
    raygate_num_gpus: $NUM_GPUS
    raygate_num_cpus: $(nproc)
    raygate_memory: $(($(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 1024))
    raygate_health_nccl_binary: $ALL_REDUCE
    raygate_health_nccl_max_bytes: "$NCCL_TEST_MAX_BYTES"
    raygate_health_nccl_pairs: false
    raygate_health_report_dir: $HARDWARE_OUT/health
    raygate_run_summary_dir: $HARDWARE_OUT/runs
    # A check, not a gate run: no node_exporter textfile, no fabric counter snapshot left behind.
    raygate_health_textfile: ""
    raygate_health_fabric_state_file: ""
EOF

echo "== raygate hardware check on ${HOSTNAME%%.*}: $GPU_COUNT GPU(s), report in $HARDWARE_OUT"
echo "   ansible: $ANSIBLE_BIN (python $PY)"
echo "   nccl-tests: $ALL_REDUCE; NCCL: ${NCCL_LIB:-not found}; CUDA: $CUDA_HOME; gencode: ${NVCC_GENCODE:-none}"

# ---- the steps -------------------------------------------------------------------------------
STEPS=() VERDICTS=() SECONDS_TAKEN=()
VERDICT=""
now_us() { echo "${EPOCHREALTIME/./}"; }
step() {  # step NAME FUNCTION: run it, time it; the function sets VERDICT (pass, warn, fail, skip)
  local name=$1 start end
  echo
  echo "== $name"
  VERDICT=fail
  start=$(now_us)
  "$2" || VERDICT=fail
  end=$(now_us)
  STEPS+=("$name") VERDICTS+=("$VERDICT")
  SECONDS_TAKEN+=("$(printf '%d.%02d' $(((end - start) / 1000000)) $(((end - start) % 1000000 / 10000)))")
  echo "-> $name: $VERDICT"
}

# Reads an ad hoc module result (minimal callback: "host | SUCCESS => {json}"), keeps it as JSON,
# prints each check and the node's versions, and prints the verdict last.
judge_result() {  # judge_result OUTPUT JSON
  "$PY" - "$1" "$2" <<'EOF'
import json, sys
text = open(sys.argv[1], encoding="utf-8", errors="replace").read()
start = text.find("=> {")
if start < 0:
    print(text[-2000:])
    print("fail")
    sys.exit(0)
result = json.JSONDecoder().raw_decode(text[start + 3:])[0]
json.dump(result, open(sys.argv[2], "w"), indent=2)
if result.get("msg") and not result.get("checks"):
    print("  " + str(result["msg"]))
for check in result.get("checks", []):
    print("  %-4s  %-28s %s" % (check["status"], check["name"], check.get("detail", "")))
for key in ("driver_version", "cuda_version", "busbw", "transports"):
    if result.get(key) is not None:
        print("  %s: %s" % (key, result[key]))
if result.get("gpus"):
    print("  gpus: %s" % ", ".join(g.get("name", "?") for g in result["gpus"]))
fp = result.get("fingerprint") or {}
if fp:
    show = {k: ", ".join(map(str, v)) if isinstance(v, list) else v for k, v in fp.items()}
    print("  fingerprint: %s" % "; ".join("%s %s" % (k, v) for k, v in sorted(show.items()) if v))
print(result.get("verdict") or "fail")
EOF
}

GPU_HEALTH_FABRIC=auto
# One module run ad hoc on this node: its lines printed, its verdict in VERDICT, its result in
# $HARDWARE_OUT/<module>.json (JSON output whatever ansible.cfg's result format says).
adhoc_step() {
  local module=$1 args=$2 out=$HARDWARE_OUT/$1.out rc=0 lines
  ANSIBLE_CALLBACK_RESULT_FORMAT=json "$ANSIBLE_BIN/ansible" all -i "$INVENTORY" -m "raygate.cluster.$module" \
    -a "$args" >"$out" 2>&1 || rc=$?
  lines=$(judge_result "$out" "$HARDWARE_OUT/$module.json")
  echo "${lines%$'\n'*}"
  VERDICT=${lines##*$'\n'}
  if ((rc != 0)); then
    echo "  ansible exited $rc (see $out)"
    VERDICT=fail
  fi
}

step_gpu_health() {
  adhoc_step gpu_health "{\"expected_gpus\": $NUM_GPUS}"
  GPU_HEALTH_FABRIC=$("$PY" -c 'import json, sys
f = (json.load(open(sys.argv[1])).get("fabric") or {}).get("fabric")
print(f if f in ("efa", "ib", "roce", "none") else "auto")' "$HARDWARE_OUT/gpu_health.json" 2>/dev/null || echo auto)
}

step_build() {
  local src=$NCCL_TESTS_SRC log=$HARDWARE_OUT/nccl-tests-build.log shadow
  if [[ -x $ALL_REDUCE ]]; then
    echo "  $ALL_REDUCE is there: not built again"
    VERDICT=skip
    return 0
  fi
  if [[ -z $src ]]; then
    echo "  $ALL_REDUCE is missing and no source was given: --nccl-tests-src (or NCCL_TESTS_SRC)"
    return 1
  fi
  if [[ -f $src && $src == *.tar.gz ]]; then
    tar -xzf "$src" -C "$WORK"
    src=$(find "$WORK" -maxdepth 3 -path '*/src/Makefile' -print -quit)
    src=${src%/src/Makefile}
  fi
  if [[ ! -f $src/src/Makefile ]]; then
    echo "  $NCCL_TESTS_SRC is not an nccl-tests source tree (no src/Makefile)"
    return 1
  fi
  if [[ ! -x $CUDA_HOME/bin/nvcc ]]; then
    echo "  no $CUDA_HOME/bin/nvcc: install the CUDA toolkit or point --cuda-home at it"
    return 1
  fi
  if [[ -z $NCCL_LIB ]]; then
    echo "  NCCL not found (no nvidia-nccl wheel, /usr/lib/$(uname -m)-linux-gnu or /usr/local/nccl): set --nccl-home"
    return 1
  fi
  # nccl-tests link -lnccl from NCCL_HOME/lib, and the wheel ships libnccl.so.2 alone: link against
  # a folder of links beside the build, so nothing is added to the NCCL install itself.
  shadow=$NCCL_TESTS_BUILD/nccl-home
  mkdir -p "$NCCL_TESTS_BUILD" "$shadow/lib"
  ln -sfn "$NCCL_INC" "$shadow/include"
  ln -sfn "$NCCL_LIB/libnccl.so.2" "$shadow/lib/libnccl.so"
  echo "  make -C $src/src NCCL_HOME=$shadow CUDA_HOME=$CUDA_HOME BUILDDIR=$NCCL_TESTS_BUILD NVCC_GENCODE=\"$NVCC_GENCODE\" $ALL_REDUCE"
  if ! make -C "$src/src" -j"$(nproc)" NCCL_HOME="$shadow" CUDA_HOME="$CUDA_HOME" BUILDDIR="$NCCL_TESTS_BUILD" \
    ${NVCC_GENCODE:+NVCC_GENCODE="$NVCC_GENCODE"} "$ALL_REDUCE" >"$log" 2>&1; then
    tail -n 20 "$log"
    echo "  the build failed (all of it in $log)"
    return 1
  fi
  [[ -x $ALL_REDUCE ]] && VERDICT=pass
}

step_nccl_test() {
  local args
  args="{\"mode\": \"single\", \"binary\": \"$ALL_REDUCE\", \"gpus\": $NUM_GPUS,"
  args+=" \"max_bytes\": \"$NCCL_TEST_MAX_BYTES\", \"fabric\": \"$GPU_HEALTH_FABRIC\"}"
  adhoc_step nccl_test "$args"
}

step_health_yml() {
  local log=$HARDWARE_OUT/health.yml.log rc=0 report lines
  "$ANSIBLE_BIN/ansible-playbook" -i "$INVENTORY" "$ROOT/health.yml" >"$log" 2>&1 || rc=$?
  sed -n '/^PLAY RECAP/,$p' "$log"
  report=$(find "$HARDWARE_OUT/health" -name report.json 2>/dev/null | sort | tail -n 1)
  if [[ -z $report ]]; then
    tail -n 30 "$log"
    echo "  no report written (ansible-playbook exited $rc; all of it in $log)"
    return 1
  fi
  lines=$("$PY" -c 'import json, sys
r = json.load(open(sys.argv[1]))
print("  " + str(r.get("message", "")))
print((r.get("nodes") or [{}])[0].get("verdict") or "fail")' "$report")
  echo "${lines%$'\n'*}"
  echo "  report: ${report%/report.json} (ansible-playbook exited $rc; its output in $log)"
  VERDICT=${lines##*$'\n'}
  if ((rc != 0)); then
    VERDICT=fail
  fi
}

step "gpu_health" step_gpu_health
step "nccl-tests build" step_build
step "nccl_test single" step_nccl_test
step "health.yml" step_health_yml

# ---- summary ---------------------------------------------------------------------------------
echo
printf '%-18s %-8s %8s\n' step verdict seconds
failed=0
for i in "${!STEPS[@]}"; do
  printf '%-18s %-8s %8s\n' "${STEPS[$i]}" "${VERDICTS[$i]}" "${SECONDS_TAKEN[$i]}"
  [[ ${VERDICTS[$i]} != fail ]] || failed=1
done
"$PY" - "$HARDWARE_OUT" "${#STEPS[@]}" "${STEPS[@]}" "${VERDICTS[@]}" "${SECONDS_TAKEN[@]}" <<'EOF'
import json, os, sys
out, n = sys.argv[1], int(sys.argv[2])
names, verdicts, seconds = sys.argv[3:3 + n], sys.argv[3 + n:3 + 2 * n], sys.argv[3 + 2 * n:3 + 3 * n]
gpu = {}
try:
    g = json.load(open(os.path.join(out, "gpu_health.json")))
    gpu = {"gpus": [x.get("name") for x in g.get("gpus", [])], "driver": g.get("driver_version"),
           "cuda": g.get("cuda_version"), "fingerprint": g.get("fingerprint")}
except (OSError, ValueError):
    pass
summary = dict(gpu, steps=[{"step": a, "verdict": b, "seconds": float(c)} for a, b, c in zip(names, verdicts, seconds)])
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=2)
EOF
echo "report: $HARDWARE_OUT (summary.json, run.log, gpu_health.json, nccl_test.json, health/)"
exit "$failed"
