# raygate.cluster: one Makefile for the demo, the fast inner loop and the full test suite.
# Everything bootstraps itself on a fresh Debian/Ubuntu machine as root.
SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= /usr/bin/python3
VENV := .venv
BIN := $(VENV)/bin
RAY_VERSION ?= 2.60.0
# The version the upgrade tests start from (tests/day2 installs it, then upgrades to RAY_VERSION).
RAY_PREV_VERSION ?= 2.59.0
UV_VERSION ?= 0.13.9
WHEELHOUSE ?= /srv/raygate/wheelhouse
SANDBOX := tests/sandbox/sandbox.sh
SANDBOX_NODES ?= 3
COLLECTIONS := .build/collections
COLLECTION_LINK := $(COLLECTIONS)/ansible_collections/raygate/cluster
MODULES := ray_install ray_node ray_cluster_info validate_inventory cluster_tls nccl_env ray_firewall gpu_health nccl_test health_report node_steps gate_node_checks node_watch run_summary slurm_gate gcs_redis cluster_lock
# The roles with an argument spec (every role but _common): ansible-doc renders each.
ROLES := raygate ray_install ray_node nccl_env firewall health_gate watcher dashboard_proxy gcs_store
FILTERS := port_plan plan_ports version_mismatch_table version_mismatch_hosts gate_pairs gate_decision health_labels step_result ray_member prometheus_file_sd
APT_PACKAGES := python3-venv openssh-server openssh-client tini nftables iproute2 util-linux procps psmisc rsync curl systemd ufw tcpdump \
  slurmctld slurmd slurm-client munge redis-server nginx prometheus prometheus-node-exporter
# The systemd sandbox (sandbox.sh up N --systemd). No recommends: systemd-container's
# libnss-mymachines would edit the host's /etc/nsswitch.conf.
APT_PACKAGES_NO_RECOMMENDS := debootstrap systemd-container
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/$(COLLECTIONS)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: help
help:  ## List the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

# ---- bootstrap ---------------------------------------------------------------------------
# $(call apt_install,PACKAGES,APT-GET FLAGS): a shell command installing those of PACKAGES not installed yet.
apt_install = missing=$$(for p in $(1); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages: $$missing"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $(2) $$missing >/dev/null; \
	fi

.build/apt.stamp:
	@$(call apt_install,$(APT_PACKAGES))
	@$(call apt_install,$(APT_PACKAGES_NO_RECOMMENDS),--no-install-recommends)
	@mkdir -p .build && touch $@

$(BIN)/.stamp: requirements-dev.txt .build/apt.stamp
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check --upgrade pip
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-dev.txt
	touch $@

$(COLLECTION_LINK):
	mkdir -p $(dir $@) && ln -sfn ../../../.. $@

.PHONY: bootstrap
bootstrap: $(BIN)/.stamp $(COLLECTION_LINK)  ## Debian packages, .venv with the tools, collection link

$(WHEELHOUSE)/.ray-$(RAY_VERSION).stamp: .build/apt.stamp
	mkdir -p $(WHEELHOUSE)
	$(PYTHON) -m pip download -q --disable-pip-version-check --only-binary=:all: -d $(WHEELHOUSE) \
	  "ray[default]==$(RAY_VERSION)" "uv==$(UV_VERSION)"
	touch $@

# Debian 13 nodes run Python 3.13 (the systemd suite's trixie scenario): the same Ray, as cp313 wheels,
# for the glibc manylinux tags trixie accepts. Pure wheels are shared with the host's set.
NODE_PY313_TAGS := --python-version 3.13 --implementation cp --abi cp313 --abi abi3 --abi none \
  $(foreach t,manylinux2014 manylinux_2_17 manylinux_2_28 manylinux_2_34 manylinux_2_39 linux,--platform $(t)_$(shell uname -m))
$(WHEELHOUSE)/.ray-$(RAY_VERSION)-cp313.stamp: .build/apt.stamp
	mkdir -p $(WHEELHOUSE)
	$(PYTHON) -m pip download -q --disable-pip-version-check --only-binary=:all: $(NODE_PY313_TAGS) -d $(WHEELHOUSE) \
	  "ray[default]==$(RAY_VERSION)" "uv==$(UV_VERSION)"
	touch $@

$(WHEELHOUSE)/.ray-$(RAY_PREV_VERSION).stamp: .build/apt.stamp
	mkdir -p $(WHEELHOUSE)
	$(PYTHON) -m pip download -q --disable-pip-version-check --only-binary=:all: -d $(WHEELHOUSE) \
	  "ray[default]==$(RAY_PREV_VERSION)"
	touch $@

.PHONY: wheelhouse
wheelhouse: $(WHEELHOUSE)/.ray-$(RAY_VERSION).stamp  ## Ray wheels for offline installs (built once, cached)

# ---- the demo ----------------------------------------------------------------------------
.PHONY: demo
demo: bootstrap wheelhouse  ## 3 sandbox nodes + site.yml: a real Ray cluster on this machine
	$(SANDBOX) up $(SANDBOX_NODES)
	$(BIN)/ansible-playbook -i inventories/sandbox site.yml

.PHONY: demo-down
demo-down: bootstrap  ## teardown.yml on the sandbox, then remove the sandbox nodes
	if $(SANDBOX) status >/dev/null 2>&1; then $(BIN)/ansible-playbook -i inventories/sandbox teardown.yml; fi
	$(SANDBOX) down

# ---- benchmark ---------------------------------------------------------------------------
BENCH_VENV := .build/bench-venv
BENCH_ARGS ?=

$(BENCH_VENV)/.stamp: requirements-bench.txt $(WHEELHOUSE)/.ray-$(RAY_VERSION).stamp
	$(PYTHON) -m venv --clear $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install -q --disable-pip-version-check --no-index --find-links $(WHEELHOUSE) \
	  "ray[default]==$(RAY_VERSION)"
	$(BENCH_VENV)/bin/pip install -q --disable-pip-version-check -r requirements-bench.txt
	touch $@

.PHONY: bench
bench: bootstrap wheelhouse $(BENCH_VENV)/.stamp  ## bench/bringup.py: raygate vs plain ssh vs `ray up` (root, ~20 min)
	$(BENCH_VENV)/bin/python bench/bringup.py $(BENCH_ARGS)

# A quick one: make bench-scale BENCH_SCALE_ARGS="--site 1,3 --health 10"
BENCH_SCALE_ARGS ?=

.PHONY: bench-scale
bench-scale: bootstrap wheelhouse $(BENCH_VENV)/.stamp  ## bench/scale.py: site.yml 1-6 nodes x3, health.yml 100-1,000 light nodes and the fault mix, model to 1,000 (root)
	$(BENCH_VENV)/bin/python bench/scale.py $(BENCH_SCALE_ARGS)

.PHONY: bench-tls
bench-tls: bootstrap wheelhouse  ## bench/tls.py: bring-up and a 1 GiB object between 2 of 3 nodes, TLS off and on (root, ~10 min)
	$(BIN)/python bench/tls.py $(BENCH_ARGS)

.PHONY: bench-container
bench-container: bootstrap wheelhouse image $(BENCH_VENV)/.stamp  ## bench/container.py: site.yml container (cold, warm) against venv at N=3, 6 (root, ~30 min)
	$(BENCH_VENV)/bin/python bench/container.py $(BENCH_ARGS)

# ---- tests -------------------------------------------------------------------------------
.PHONY: lint
lint: bootstrap  ## ruff, yamllint, ansible-lint (production profile), changelog lint
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/yamllint -s .
	$(BIN)/ansible-lint
	$(BIN)/antsibull-changelog lint
	for m in $(MODULES); do $(BIN)/ansible-doc raygate.cluster.$$m >/dev/null; done
	for f in $(FILTERS); do $(BIN)/ansible-doc -t filter raygate.cluster.$$f >/dev/null; done
	$(BIN)/ansible-doc -t inventory raygate.cluster.slurm >/dev/null
	$(BIN)/ansible-doc -t lookup raygate.cluster.step_args >/dev/null
	for r in $(ROLES); do $(BIN)/ansible-doc -t role raygate.cluster.$$r >/dev/null; done

.PHONY: sanity
sanity: bootstrap  ## ansible-test sanity on a copy laid out as ansible_collections/raygate/cluster
	tests/sanity/run.sh

.PHONY: artifact
artifact: bootstrap  ## build the tarball, check its contents, install it and test the installed copy, galaxy-importer
	tests/artifact/check.sh

.PHONY: units
units: bootstrap  ## unit tests: pytest -m unit (tests/unit, the GPU simulators; no root, no network)
	$(BIN)/pytest -q -m unit tests

.PHONY: fast
fast: lint units sanity  ## the inner loop: lint, units, sanity

# meta/runtime.yml claims ansible-core 2.16+: the units run on each older minor too, one venv each
# (2.19 is .venv itself). ansible-test sanity runs on the oldest (2.19's is in `fast`): the minors
# between add no check the two ends lack, and each costs CI about a minute.
COMPAT_VERSIONS ?= 2.16 2.17 2.18
COMPAT_SANITY_VERSIONS ?= 2.16
.build/compat-%/.stamp: requirements-dev.txt .build/apt.stamp
	rm -rf $(dir $@)
	$(PYTHON) -m venv $(dir $@)
	$(dir $@)bin/pip install -q --disable-pip-version-check "ansible-core==$*.*" \
	  $$(grep -E '^(pytest|hypothesis|pyyaml)==' requirements-dev.txt)
	touch $@

.PHONY: compat
compat: bootstrap $(foreach v,$(COMPAT_VERSIONS),.build/compat-$(v)/.stamp)  ## units on ansible-core 2.16, 2.17, 2.18; sanity on 2.16
	for v in $(COMPAT_VERSIONS); do \
	  echo "== ansible-core $$v"; \
	  .build/compat-$$v/bin/pytest -q -p no:cacheprovider -m unit tests; \
	  case " $(COMPAT_SANITY_VERSIONS) " in *" $$v "*) VENV=$(CURDIR)/.build/compat-$$v tests/sanity/run.sh;; esac; \
	done

# The newer minors need Python >= 3.12, newer than this Debian 12's: their units, and ansible-test
# sanity on the newest, run in a Debian 13 (Python 3.13) chroot that tests/controller/trixie.sh
# builds once into .build/trixie-controller (root; part of `make checks`, so of `make test`).
NEXT_CORE_VERSIONS ?= 2.20 2.21
NEXT_SANITY_VERSIONS ?= 2.21
.PHONY: compat-next
compat-next: .build/apt.stamp  ## units on ansible-core 2.20, 2.21 in a Debian 13 chroot; sanity on 2.21 (root)
	CORE_VERSIONS="$(NEXT_CORE_VERSIONS)" SANITY_VERSIONS="$(NEXT_SANITY_VERSIONS)" tests/controller/trixie.sh

# First the sandbox tests (-m sandbox: tests/sandbox's and tests/integration's top-level files, each
# module with its own sandbox), then molecule, then each scenario suite (marker suite) by its folder
# of tests/integration: each owns the sandbox while it runs, so one after the other. Each prints its
# slowest tests (--durations), where CI's time goes. The markers are set by path in tests/conftest.py.
SUITE_PYTEST = $(BIN)/pytest -q --durations=8
.PHONY: integration
integration: bootstrap wheelhouse image $(WHEELHOUSE)/.ray-$(RAY_PREV_VERSION).stamp $(WHEELHOUSE)/.ray-$(RAY_VERSION)-cp313.stamp  ## sandbox tests, bad input, molecule, day-2, systemd, fault, Slurm, health-gate, GCS fault tolerance, node watcher and container scenarios (root)
	$(SUITE_PYTEST) -m sandbox tests
	cd $(CURDIR) && $(BIN)/molecule test --all
	$(SUITE_PYTEST) tests/integration/day2
	$(SUITE_PYTEST) tests/integration/systemd
	$(SUITE_PYTEST) tests/integration/faults
	$(SUITE_PYTEST) tests/integration/slurm
	$(SUITE_PYTEST) tests/integration/health
	$(SUITE_PYTEST) tests/integration/gcsft -k 'not TestSystemd'
	$(SUITE_PYTEST) tests/integration/watch
	$(SUITE_PYTEST) tests/integration/container

.PHONY: container
container: bootstrap image  ## Ray from the container image on 3 nodes with Podman: registry and archive, bad input, re-run, restart, teardown (root)
	$(BIN)/pytest -q tests/integration/container

.PHONY: watch
watch: bootstrap wheelhouse  ## node watcher on 3 nodes with real Slurm and Prometheus: Xid out within an interval, breaker, back through site.yml (root)
	$(BIN)/pytest -q tests/integration/watch

.PHONY: health
health: bootstrap wheelhouse  ## health-gate faults on a 7-node sandbox: no-Xid GPU loss, SXid, counter growth, drift, breaker, labels (root)
	$(BIN)/pytest -q tests/integration/health

.PHONY: day2
day2: bootstrap wheelhouse $(WHEELHOUSE)/.ray-$(RAY_PREV_VERSION).stamp  ## day-2 scenarios on a 4-node sandbox: upgrade, scale, remove_node, re-check (root, ~4 min)
	$(BIN)/pytest -q tests/integration/day2

.PHONY: systemd
systemd: bootstrap wheelhouse $(WHEELHOUSE)/.ray-$(RAY_PREV_VERSION).stamp $(WHEELHOUSE)/.ray-$(RAY_VERSION)-cp313.stamp  ## scenario systemd: nodes with systemd as PID 1, Debian 12 and 13 (root; first run builds the rootfs, ~1.5 min)
	$(BIN)/pytest -q tests/integration/systemd

.PHONY: slurm
slurm: bootstrap wheelhouse  ## Slurm suite on a 3-node sandbox with a real Slurm: drain, resume, allocation inventory (root, ~4 min)
	$(BIN)/pytest -q tests/integration/slurm

# GCS fault tolerance (issue 18). `make integration` (so CI) runs its process-supervised half only:
# the systemd half (TestSystemd: a second, systemd sandbox, about 6 minutes on a slow 2-core
# machine) runs here: the clean-clone CI of 2026-11-27 on such a machine (yardstick 0.13 s) took
# 5543 s (92 minutes) with it, past CI's 90-minute cut-off. The systemd suite keeps a killed
# head's recovery under systemd, and TestProcess the Redis-backed GCS's.
.PHONY: gcsft
gcsft: bootstrap wheelhouse $(WHEELHOUSE)/.ray-$(RAY_PREV_VERSION).stamp  ## GCS fault tolerance: kill -9 of gcs_server and a head reboot lose no actor, job or worker (root)
	$(BIN)/pytest -q tests/integration/gcsft

# The flake hunt of issue 44: TestProcess GCSFT_RUNS times in a row, each run's result on a line
# of artifacts/gcsft-loop.log, a failed run's output and Ray logs kept (docs/RELIABILITY.md).
GCSFT_RUNS ?= 20
.PHONY: gcsft-loop
gcsft-loop: bootstrap wheelhouse $(WHEELHOUSE)/.ray-$(RAY_PREV_VERSION).stamp  ## GCS FT process scenarios GCSFT_RUNS times in a row (root; not in make test)
	tests/integration/gcsft/loop.sh $(GCSFT_RUNS)

# The node watcher's soak (issue 44): SOAK_MINUTES of cycling faults on 3 sandbox nodes, the latencies,
# false take-outs and growth in artifacts/soak.{json,md} (docs/RELIABILITY.md "The soak"). Not in make
# test. The sandbox is shared on this machine: flock /tmp/raygate-sandbox.lock make soak.
SOAK_MINUTES ?= 60
.PHONY: soak
soak: bootstrap wheelhouse  ## node watcher soak: Xid, raylet and GCS kills for SOAK_MINUTES (60); bounds, latencies (root; not in make test)
	$(BIN)/python bench/soak.py --minutes $(SOAK_MINUTES)

.PHONY: faults
faults: bootstrap wheelhouse  ## fault suite on a 3-node sandbox: dead, dark and crashed nodes, full disk, token drift, security (root)
	$(BIN)/pytest -q tests/integration/faults

# The fault suite's security tests alone (the bring-up they start from included). `make test` runs
# them inside `make faults`, on the same cluster, rather than bringing up a second one.
.PHONY: security
security: bootstrap wheelhouse  ## security tests on the fault suite's sandbox: service user, job powers, TLS capture, foreign CA, renewal (root, ~3 min)
	$(BIN)/pytest -q -m security tests/integration/faults

# On a real GPU node, as root (docs/HARDWARE.md); not part of `make test`. Without nvidia-smi it
# says so and does nothing. E.g. make hardware HARDWARE_ARGS="--nccl-tests-src nccl-tests.tar.gz"
HARDWARE_ARGS ?=
.PHONY: hardware
hardware: bootstrap  ## on a GPU node: gpu_health, nccl-tests, health.yml over this node alone, timed (docs/HARDWARE.md)
	tests/hardware/run.sh $(HARDWARE_ARGS)

# The checks without a sandbox run side by side (-j2: CI has 2 cores, and each is one process's
# CPU work); their outputs stay whole (-O). Then the sandbox suites, one after the other.
# CI's checks take the ends of the claimed range: the units and ansible-test sanity on 2.16 (compat)
# and 2.21 (compat-next). Each minor's units cost about 4 min of one core and each sanity run 2.5;
# the minors between (2.17, 2.18, 2.20, and 2.19's units and sanity, which `make fast` runs and every
# scenario suite's playbooks run on) add no check the ends lack: 2.16 runs every unit test 2.19 does,
# 2.21 all but the 11 it skips. `make compat-all` runs the units on every minor. compat-next first:
# it is the longest (about 10 min), and -j2 then runs the others beside it.
CI_COMPAT := COMPAT_VERSIONS=2.16 NEXT_CORE_VERSIONS=2.21
.PHONY: checks
checks:  ## compat-next, compat (units and sanity on 2.21 and 2.16), artifact, lint and the Ray image, two at a time (what make test runs first)
	$(MAKE) -j2 -O compat-next compat artifact lint image $(CI_COMPAT)

.PHONY: compat-all
compat-all: compat compat-next  ## the units on every claimed ansible-core minor: 2.16, 2.17, 2.18 and 2.20, 2.21 (root)

.PHONY: test
test: checks integration  ## everything CI runs

# ---- the Ray node image (issue 43; docs/CONTAINERS.md) ------------------------------------
# Not part of bootstrap: its packages are installed by this stamp alone, for `make image`. `make test` builds
# it in `checks`, beside the units (it waits on I/O more than on a core), for the container suite.
IMAGE_APT_PACKAGES := podman buildah skopeo runc docker-registry
IMAGE_OUT := .build/image

# Installing docker-registry on a systemd host starts Debian's registry on :5000 on every address;
# raygate runs its own on 127.0.0.1, so one this stamp installed is stopped and disabled.
.build/image-apt.stamp: .build/apt.stamp
	@fresh=$$(dpkg-query -W -f='$${Status}' docker-registry 2>/dev/null | grep -q 'ok installed' || echo yes); \
	$(call apt_install,$(IMAGE_APT_PACKAGES)); \
	if [ -n "$$fresh" ] && [ -d /run/systemd/system ]; then \
	  echo "disabling Debian's docker-registry service (:5000, every address)"; \
	  systemctl disable --now docker-registry >/dev/null 2>&1 || true; \
	fi
	@touch $@

.PHONY: image
image: .build/image-apt.stamp $(WHEELHOUSE)/.ray-$(RAY_VERSION).stamp  ## the Ray node image, offline: OCI archive, push to the registry on 127.0.0.1:5050, digest in .build/image (root)
	RAY_VERSION=$(RAY_VERSION) WHEELHOUSE=$(WHEELHOUSE) RAYGATE_IMAGE_OUT=$(CURDIR)/$(IMAGE_OUT) tools/image/build.sh build

# tests/image: skipped, loudly, when `make image` has not run. Not in `make test`.
.PHONY: image-check
image-check: bootstrap  ## the built image: registry digest, archive checksum, Ray's version as a non-root user (root)
	if [ -f $(IMAGE_OUT)/ray-$(RAY_VERSION).digest ]; then tools/image/build.sh registry start; fi
	RAYGATE_RAY_VERSION=$(RAY_VERSION) RAYGATE_IMAGE_OUT=$(CURDIR)/$(IMAGE_OUT) $(BIN)/pytest -q -p no:cacheprovider tests/image

.PHONY: clean
clean:  ## remove build outputs (not the venv or the wheelhouse)
	rm -rf .build tests/output
