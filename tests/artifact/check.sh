#!/usr/bin/env bash
# Test the built artifact, not the checkout: build the collection tarball, refuse generated or
# secret files in it, install it like any Galaxy collection into a clean collections path, use it
# from there only (ansible-doc, syntax checks of the FQCN playbooks, one ad-hoc module run), then
# run Galaxy's own importer on it and fail on any error or lint warning that is not allowed.
# Between the two, ansible-builder reads the installed copy's execution-environment metadata.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
venv=${VENV:-$root/.venv}
here=$root/tests/artifact
dist=$root/.build/dist
installed=$root/.build/installed
importer_venv=$root/.build/importer-venv
builder_venv=$root/.build/builder-venv
# Pinned, so the lint rules (its own ansible-lint) change only when this line does.
GALAXY_IMPORTER_VERSION=${GALAXY_IMPORTER_VERSION:-0.4.44}
# Pinned, so what "introspected" means (its introspect.py) changes only when this line does.
ANSIBLE_BUILDER_VERSION=${ANSIBLE_BUILDER_VERSION:-3.2.0}
# The Makefile's lists (lint's ansible-doc runs over them too), and every playbook the tarball ships:
# one source, so a new module, filter or playbook is checked from the tarball without an edit here.
read -r -a MODULES <<<"$(sed -n 's/^MODULES := //p' Makefile)"
read -r -a FILTERS <<<"$(sed -n 's/^FILTERS := //p' Makefile)"
PLAYBOOKS=()
for p in playbooks/*.yml; do PLAYBOOKS+=("$(basename "$p" .yml)"); done
[ "${#MODULES[@]}" -gt 0 ] && [ "${#FILTERS[@]}" -gt 0 ] || { echo "check.sh: no MODULES or FILTERS in the Makefile" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# An empty configuration: the checkout's ansible.cfg points at the checkout. (ansible-core 2.19
# refuses ANSIBLE_CONFIG=/dev/null for its missing extension.)
: >"$tmp/ansible.cfg"
step() { printf '\n== %s\n' "$*"; }
die() {
  printf 'FAIL: %s\n' "$*" >&2
  exit 1
}
# A tool in a venv of its own (it pins its own dependencies), made again only when its version changes.
tool_venv() {
  local venv=$1 package=$2 version=$3 have
  have=$("$venv/bin/python" -c "import importlib.metadata as m; print(m.version('$package'))" 2>/dev/null || true)
  if [ "$have" != "$version" ]; then
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "$package==$version"
  fi
  echo "$package $version"
}

# ---- (a) build ----------------------------------------------------------------------------
step "build"
version=$("$venv/bin/python" -c 'import yaml; print(yaml.safe_load(open("galaxy.yml"))["version"])')
tarball=$dist/raygate-cluster-$version.tar.gz
rm -f "$dist"/raygate-cluster-*.tar.gz
"$venv/bin/ansible-galaxy" collection build --force --output-path "$dist" . >/dev/null
[ -f "$tarball" ] || die "ansible-galaxy did not build $tarball"
echo "$tarball ($(du -k "$tarball" | cut -f1) KiB)"

# ---- (b) nothing generated or secret in it ------------------------------------------------
step "contents"
tar -tzf "$tarball" | sed -e 's|^\./||' -e 's|/$||' | sort -u >"$tmp/files"
echo "$(wc -l <"$tmp/files") entries"
# Paths are relative to the collection root; a name is the last path component.
bad=$(awk -F/ '
  $0 ~ /^(artifacts|\.build|\.venv|bench|tests\/output)(\/|$)/ { print; next }
  $0 ~ /^molecule\/[^\/]+\/artifacts(\/|$)/ { print; next }
  $0 ~ /(^|\/)(__pycache__|\.pytest_cache|\.ruff_cache)(\/|$)/ { print; next }
  $0 ~ /(^|\/)\.raygate_tls(\/|$)/ || $NF ~ /\.key$/ { print; next }
  $NF ~ /\.pyc$/ || $NF == ".raygate_auth_token" || tolower($NF) ~ /token/ { print }
' "$tmp/files")
# Anything git ignores is generated or local by definition (.hypothesis, .ansible, ...).
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  ignored=$(grep -v -x -e MANIFEST.json -e FILES.json "$tmp/files" | git check-ignore --stdin || true)
  bad=$(printf '%s\n%s\n' "$bad" "$ignored" | sed '/^$/d' | sort -u)
fi
if [ -n "$bad" ]; then
  printf '%s\n' "$bad" | sed 's/^/  /' >&2
  die "the tarball holds generated or secret files (above); add them to build_ignore in galaxy.yml"
fi
echo "no generated or secret files"

# ---- (c) install it into a clean collections path -----------------------------------------
step "install into ${installed#"$root"/}"
rm -rf "$installed"
ANSIBLE_CONFIG=$tmp/ansible.cfg ANSIBLE_COLLECTIONS_PATH=$installed \
  "$venv/bin/ansible-galaxy" collection install --force -p "$installed" "$tarball" >/dev/null
coll=$installed/ansible_collections/raygate/cluster
[ -f "$coll/MANIFEST.json" ] || die "no MANIFEST.json in $coll"
[ ! -L "$coll" ] || die "$coll is a link, not an installed copy"

# ---- (d) use the installed copy only ------------------------------------------------------
step "use the installed copy (ansible-doc, syntax checks, an ad-hoc module run)"
(
  export ANSIBLE_COLLECTIONS_PATH=$installed ANSIBLE_CONFIG=$tmp/ansible.cfg
  export ANSIBLE_LOCAL_TEMP=$tmp/ansible-local ANSIBLE_HOME=$tmp/ansible-home
  unset ANSIBLE_COLLECTIONS_PATHS ANSIBLE_ROLES_PATH ANSIBLE_LIBRARY ANSIBLE_FILTER_PLUGINS ANSIBLE_ACTION_PLUGINS
  cd "$tmp" # no ./collections or ./ansible.cfg of the checkout in reach
  # Where the plugins come from: the installed tree, never the checkout.
  found=$("$venv/bin/ansible-doc" --json raygate.cluster.nccl_test |
    "$venv/bin/python" -c 'import json, sys; print(json.load(sys.stdin)["raygate.cluster.nccl_test"]["doc"]["filename"])')
  case $found in
    "$coll"/*) ;;
    *) die "ansible-doc read nccl_test from $found, not from $coll" ;;
  esac
  for m in "${MODULES[@]}"; do
    "$venv/bin/ansible-doc" "raygate.cluster.$m" >/dev/null || die "ansible-doc raygate.cluster.$m"
  done
  for f in "${FILTERS[@]}"; do
    "$venv/bin/ansible-doc" -t filter "raygate.cluster.$f" >/dev/null || die "ansible-doc -t filter raygate.cluster.$f"
  done
  "$venv/bin/ansible-doc" -t inventory raygate.cluster.slurm >/dev/null || die "ansible-doc -t inventory raygate.cluster.slurm"
  "$venv/bin/ansible-doc" -t role raygate.cluster.raygate >/dev/null || die "ansible-doc -t role raygate.cluster.raygate"
  echo "ansible-doc: ${#MODULES[@]} modules, ${#FILTERS[@]} filters, the inventory plugin, the role"
  for p in "${PLAYBOOKS[@]}"; do
    "$venv/bin/ansible-playbook" -i localhost, --syntax-check "raygate.cluster.$p" >/dev/null ||
      die "ansible-playbook --syntax-check raygate.cluster.$p"
  done
  echo "syntax-check: ${PLAYBOOKS[*]/#/raygate.cluster.}"
  # A small healthy single-node all_reduce_perf log (8 x H100, sizes up to 16G) for nccl_test to judge.
  cat >"$tmp/all_reduce_perf.log" <<'EOF'
# nThread 1 nGpus 8 minBytes 4294967296 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0
#
# Using devices
#  Rank  0 Group  0 Pid  20001 on      node1 device  0 [0x18] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid  20001 on      node1 device  1 [0x2a] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid  20001 on      node1 device  2 [0x3a] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid  20001 on      node1 device  3 [0x5d] NVIDIA H100 80GB HBM3
#  Rank  4 Group  0 Pid  20001 on      node1 device  4 [0x9a] NVIDIA H100 80GB HBM3
#  Rank  5 Group  0 Pid  20001 on      node1 device  5 [0xab] NVIDIA H100 80GB HBM3
#  Rank  6 Group  0 Pid  20001 on      node1 device  6 [0xba] NVIDIA H100 80GB HBM3
#  Rank  7 Group  0 Pid  20001 on      node1 device  7 [0xdb] NVIDIA H100 80GB HBM3
node1:20001:20040 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
node1:20001:20040 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
node1:20001:20047 [7] NCCL INFO Channel 00/0 : 7[7] -> 0[0] via P2P/CUMEM/read
node1:20001:20040 [0] NCCL INFO comm 0x5600 rank 0 nranks 8 cudaDev 0 busId 18000 - Init COMPLETE
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
  4294967296    1073741824     float     sum      -1   15800.3  271.83  475.70      0   15799.1  271.85  475.74      0
  8589934592    2147483648     float     sum      -1   31297.9  274.46  480.30      0   31301.0  274.43  480.25      0
 17179869184    4294967296     float     sum      -1   62388.0  275.37  481.90      0   62391.2  275.35  481.86      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 479.27
#
EOF
  # Ad-hoc output (the minimal callback): 'localhost | SUCCESS => {' and the result as JSON.
  ANSIBLE_NOCOLOR=1 "$venv/bin/ansible" localhost -i localhost, -c local \
    -e "ansible_python_interpreter=$venv/bin/python" \
    -m raygate.cluster.nccl_test -a "log_path=$tmp/all_reduce_perf.log" >"$tmp/adhoc.out" ||
    { cat "$tmp/adhoc.out" >&2; die "ansible localhost -m raygate.cluster.nccl_test failed"; }
  "$venv/bin/python" - "$tmp/adhoc.out" <<'EOF'
import json, sys

text = open(sys.argv[1]).read()
head, sep, body = text.partition(" => ")
if not sep or not head.startswith("localhost | "):
    sys.exit("unexpected ad-hoc output:\n" + text)
state = head[len("localhost | ") :].strip()
res = json.loads(body)
problems = []
if state != "SUCCESS" or res.get("failed"):
    problems.append("the task is %s: %s" % (state, res.get("msg")))
if res.get("changed"):
    problems.append("judging a log reported a change")
if res.get("verdict") != "pass" or res.get("healthy") is not True:
    problems.append("verdict %r, healthy %r" % (res.get("verdict"), res.get("healthy")))
if not res.get("checks"):
    problems.append("no checks returned")
# A log alone cannot show the port counters before and after the run: that check skips, and says so.
UNREAD = {"nccl_fabric_errors": "skip"}
for c in res.get("checks") or []:
    if c.get("status") != UNREAD.get(c.get("name"), "pass"):
        problems.append("check %s is %s: %s" % (c.get("name"), c.get("status"), c.get("detail")))
if problems:
    sys.exit("nccl_test from the installed copy: " + "; ".join(problems))
print("ad-hoc nccl_test: ok, verdict pass, busbw %s GB/s" % res.get("busbw"))
EOF
)

# ---- (e) execution environment: what ansible-builder finds in the installed copy ----------
# meta/execution-environment.yml names requirements.txt and bindep.txt (issue 29). AWX and AAP
# build execution environments with ansible-builder, which installs a collection, then runs its
# introspect.py over the collections path to collect their Python and system requirements. Run
# that here on the installed tarball: raygate's bindep entries and Python requirements must come
# out, each exactly once. No container is built (ansible-builder create only writes the context);
# nothing but PyPI is reached.
step "ansible-builder (execution environment)"
for f in meta/execution-environment.yml requirements.txt bindep.txt; do
  grep -qx "$f" "$tmp/files" || die "$f is not in the tarball: ansible-builder cannot see the collection's requirements (build_ignore in galaxy.yml?)"
done
tool_venv "$builder_venv" ansible-builder "$ANSIBLE_BUILDER_VERSION"
# The introspection on its own: ansible-builder introspect <collections path>.
"$builder_venv/bin/ansible-builder" introspect "$installed" >"$tmp/introspect.out" 2>&1 ||
  { cat "$tmp/introspect.out" >&2; die "ansible-builder introspect ${installed#"$root"/} failed"; }
sed 's/^/  /' "$tmp/introspect.out"
# A tiny version 3 definition naming the built tarball, as a user's EE would.
ee=$tmp/ee
mkdir -p "$ee"
cat >"$ee/execution-environment.yml" <<EOF
---
version: 3
images:
  base_image:
    name: quay.io/centos/centos:stream9
dependencies:
  python_interpreter:
    package_system: python3.11
    python_path: /usr/bin/python3.11
  ansible_core:
    package_pip: ansible-core>=2.16.0
  ansible_runner:
    package_pip: ansible-runner
  galaxy:
    collections:
      - name: /build/collections/${tarball##*/}
        type: file
additional_build_files:
  - src: $tarball
    dest: collections
EOF
"$builder_venv/bin/ansible-builder" create -f "$ee/execution-environment.yml" -c "$ee/context" \
  --output-filename Containerfile >"$tmp/create.out" 2>&1 ||
  { cat "$tmp/create.out" >&2; die "ansible-builder create failed on a definition naming the tarball"; }
[ -f "$ee/context/_build/collections/${tarball##*/}" ] || die "ansible-builder create left the tarball out of the context"
grep -q 'introspect.py introspect' "$ee/context/Containerfile" ||
  die "the Containerfile ansible-builder wrote runs no introspect.py: the check below no longer mirrors the build"
# What the Containerfile's builder stage runs, from the generated context, on the installed copy.
"$builder_venv/bin/python" "$ee/context/_build/scripts/introspect.py" introspect "$installed" \
  --write-bindep="$ee/bindep.txt" --write-pip="$ee/requirements.txt" >"$tmp/introspect-context.out" 2>&1 ||
  { cat "$tmp/introspect-context.out" >&2; die "the context's introspect.py failed"; }
"$builder_venv/bin/python" - "$root" "$coll" "$tmp/introspect.out" "$ee" <<'EOF'
import os, sys, yaml

root, coll, out, ee = sys.argv[1:]
TAG = "  # from collection raygate.cluster"


def entries(path):
    """The requirement lines of a pip or bindep file, as ansible-builder reads them."""
    return [line.strip() for line in open(path) if line.strip() and not line.lstrip().startswith("#")]


def written(path):
    return [line for line in open(path).read().splitlines() if line] if os.path.exists(path) else []


def differ(what, got, want):
    missing = [w[: -len(TAG)] for w in want if w not in got]
    extra = [g[: -len(TAG)] for g in got if g not in want]
    return "%s: missing %s, unexpected %s%s" % (
        what, missing, extra, "" if missing or extra else ", or listed twice or out of order"
    )


meta = yaml.safe_load(open(os.path.join(coll, "meta", "execution-environment.yml")))
deps = meta.get("dependencies") or {}
if meta.get("version") != 1 or sorted(deps) != ["python", "system"]:
    sys.exit("FAIL: meta/execution-environment.yml must be version 1 with dependencies python and system: %r" % meta)
problems = []
text = open(out).read()
data = yaml.safe_load(text[text.index("---") :]) if "---" in text else None
if not isinstance(data, dict):
    sys.exit("FAIL: ansible-builder introspect printed no requirements:\n" + text)
for kind, name in (("system", deps["system"]), ("python", deps["python"])):
    want = [e + TAG for e in entries(os.path.join(root, name))]
    got = [e for e in data.get(kind) or [] if e.endswith(TAG)]
    if got != want:
        problems.append(differ("ansible-builder introspect, raygate.cluster's %s requirements against %s" % (kind, name), got, want))
    context = [e for e in written(os.path.join(ee, os.path.basename(name))) if e.endswith(TAG)]
    if context != want:
        problems.append(differ("the EE context's introspect.py, what it wrote for %s" % name, context, want))
if not entries(os.path.join(root, deps["system"])):
    problems.append("%s lists nothing (the Slurm inventory needs scontrol and sinfo)" % deps["system"])
if problems:
    sys.exit("FAIL: " + "\nFAIL: ".join(problems))
print(
    "introspected from the installed copy: %d bindep entries, %d Python requirements, as %s and %s list them"
    % (len(data.get("system") or []), len(data.get("python") or []), deps["system"], deps["python"])
)
EOF

# ---- (f) Galaxy's importer ----------------------------------------------------------------
step "galaxy-importer"
# Its own venv: it pins its own ansible-core and ansible-lint.
tool_venv "$importer_venv" galaxy-importer "$GALAXY_IMPORTER_VERSION"
cat >"$tmp/galaxy-importer.cfg" <<'EOF'
[galaxy-importer]
# What runs without containers or network: ansible-doc and an offline ansible-lint.
run_ansible_doc = True
run_ansible_lint = True
offline_ansible_lint = True
run_ansible_test = False
ansible_test_local_image = False
local_image_docker = False
run_flake8 = False
check_changelog = True
EOF
mkdir -p "$tmp/importer-tmp"
echo "tmp_root_dir = $tmp/importer-tmp" >>"$tmp/galaxy-importer.cfg"
status=0
(
  cd "$tmp"
  env -u ANSIBLE_COLLECTIONS_PATH -u ANSIBLE_CONFIG -u ANSIBLE_COLLECTIONS_PATHS \
    PATH="$importer_venv/bin:$PATH" GALAXY_IMPORTER_CONFIG="$tmp/galaxy-importer.cfg" \
    HOME="$tmp/importer-home" ANSIBLE_HOME="$tmp/importer-home/.ansible" \
    "$importer_venv/bin/python" -m galaxy_importer.main "$tarball"
) >"$tmp/importer.log" 2>&1 || status=$?
# The allowlist: one fixed string per line (the rest of the line after ' # ' is the reason).
allow=$here/importer-allow.txt
sed -e 's/[[:space:]]\+#[[:space:]].*$//' -e '/^[[:space:]]*#/d' -e '/^[[:space:]]*$/d' "$allow" 2>/dev/null >"$tmp/allow" || true
grep -E '(^|[^A-Za-z])ERROR|WARNING:' "$tmp/importer.log" >"$tmp/problems" || true
if [ -s "$tmp/allow" ]; then
  grep -v -F -f "$tmp/allow" "$tmp/problems" >"$tmp/left" || true
else
  cp "$tmp/problems" "$tmp/left"
fi
if [ "$(wc -l <"$tmp/problems")" != "$(wc -l <"$tmp/left")" ]; then
  echo "allowed (tests/artifact/importer-allow.txt):"
  grep -F -f "$tmp/allow" "$tmp/problems" | sed 's/^/  /'
fi
if [ "$status" -ne 0 ] || [ -s "$tmp/left" ] || ! grep -q 'Importer processing completed successfully' "$tmp/importer.log"; then
  if [ -s "$tmp/left" ]; then
    echo "not allowed:" >&2
    sed 's/^/  /' "$tmp/left" >&2
  else
    tail -n 30 "$tmp/importer.log" >&2
  fi
  die "galaxy-importer: exit status $status, $(wc -l <"$tmp/left") error or warning line(s) (above)"
fi
echo "galaxy-importer: imported; no error or warning outside the allowlist"
step "artifact ok: $tarball"
