# -*- coding: utf-8 -*-
# Copyright (c) 2026, raygate maintainers
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

"""The one list of NCCL, libfabric and aws-ofi-nccl environment variables raygate knows.

A variable that is spelled wrong or no longer read is ignored without a word by the library
that should have read it, so `nccl_env.validate` treats every NCCL_*, FI_* and OFI_NCCL_* name
that is not listed here (or covered by PASSTHROUGH_PREFIXES) as an error.

Each entry of VARIABLES is a spec: ``type`` (one of TYPES), ``source`` (a key of SOURCES)
and, depending on the type: ``min``/``max`` (int, size); ``choices`` and ``case_sensitive``
(enum, list, coll_list); ``negate`` (list: a leading ``^`` inverts it); ``sep`` (list
separator, default ``,``); ``pattern`` (string: a regular expression the whole value must
match, ignoring case unless ``case_sensitive``) with ``form``, its description for humans;
``allow_empty``. ``removed`` (why, as a clause) marks a name the library no longer reads:
setting it is an error. ``deprecated`` (a sentence) marks a name still read but on its way
out: setting it is a warning.

Types:
  int        integer as NCCL's strtoll reads it (decimal or 0x hex), optional min/max
  bool01     exactly 0 or 1 (NCCL reads an integer and ignores anything unparsable)
  fi_bool    libfabric boolean: 0/1, true/false, yes/no, on/off (any case)
  size       a byte count: a non-negative integer, no unit suffix
  enum       one of ``choices``; case-insensitive unless ``case_sensitive``
  gdr_level  NCCL_NET_GDR_LEVEL: LOC, PIX, PXB, PHB, SYS (case-sensitive) or a legacy integer
  p2p_level  NCCL_P2P_LEVEL: as gdr_level plus NVL
  if_filter  NCCL_SOCKET_IFNAME syntax: [^][=]name[,name...]; prefix match without ``=``
  hca_filter NCCL_IB_HCA syntax: [^][=]dev[:port][,dev[:port]...]
  string     free text (optionally matching ``pattern``)
  path       a file path; NCCL does not expand ``~``
  list       items separated by ``sep``, optional ``choices``, optional leading ``^``
  coll_list  NCCL_ALGO/NCCL_PROTO: [func:][^]item,item[;func:[^]item...] with ``choices``
  cidr       an IPv4/IPv6 network in CIDR notation
"""

from __future__ import annotations

SOURCES = {
    "nccl": "NCCL User Guide, Environment Variables (env.html) for NCCL 2.29, read 2026-02; names"
    " that older pages list but later ones dropped are kept with 'removed'",
    "nccl-src": "NCCL source (NCCL_PARAM declarations and ncclGetEnv calls, 2.23-2.31): read by"
    " NCCL but not on env.html",
    "libfabric": "libfabric fabric(7) (FI_PROVIDER, FI_PROVIDER_PATH, FI_LOG_*), fi_mr/hmem and MR"
    " cache parameters as defined in libfabric 2.x src/hmem*.c and prov/util (fi_param_define)",
    "fi_efa": "libfabric fi_efa(7), 2.x (with the efa-direct fabric), RUNTIME PARAMETERS sections",
    "aws-ofi-nccl": "aws-ofi-nccl include/nccl_ofi_param.h (main, 2025-2026; OFI_NCCL_ + name) and doc/efa-env-var.md",
    "nccl-rdma-sharp-plugins": "NVIDIA HPC-X 2.24-2.26 docs, NCCL-RDMA-SHARP plugins",
    "pytorch": "PyTorch ProcessGroupNCCL: pre-2.2 names of TORCH_NCCL_* variables, still honoured",
    "aws-samples": "AWS EFA NCCL test samples for p5/p5e (NCCL_BUFFSIZE 8388608,"
    " NCCL_P2P_NET_CHUNKSIZE 524288, FI_EFA_FORK_SAFE 1, FI_EFA_USE_DEVICE_RDMA 1)",
}

TYPES = frozenset(
    [
        "int",
        "bool01",
        "fi_bool",
        "size",
        "enum",
        "gdr_level",
        "p2p_level",
        "if_filter",
        "hca_filter",
        "string",
        "path",
        "list",
        "coll_list",
        "cidr",
    ]
)

# Documented path types, in NCCL's order; an integer is the legacy form (0=LOC .. 4=SYS, higher
# is SYS too). NCCL compares the strings with strcmp, so 'phb' is silently ignored.
GDR_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS")
P2P_LEVELS = ("LOC", "NVL", "PIX", "PXB", "PHB", "SYS")

NCCL_DEBUG_SUBSYSTEMS = (
    "INIT COLL P2P SHM NET GRAPH TUNING ENV ALLOC CALL PROXY NVLS BOOTSTRAP REG PROFILE RAS ALL".split()
)
NCCL_ALGOS = ("Ring", "Tree", "Collnet", "CollnetChain", "CollnetDirect", "NVLS", "NVLSTree", "PAT")
NCCL_PROTOS = ("LL", "LL128", "Simple")
FI_LOG_SUBSYSTEMS = ("core", "fabric", "domain", "ep_ctrl", "ep_data", "av", "cq", "eq", "mr")
FI_HMEM_IFACES = ("system", "cuda", "rocr", "ze", "neuron", "synapseai")

# Names under these prefixes belong to plugins and providers whose variables we do not list
# one by one; they pass through as free strings.
PASSTHROUGH_PREFIXES = {
    "NCCL_GPUDIRECTTCPX_": "Google GPUDirect-TCPX NCCL net plugin",
    "NCCL_FASTRAK_": "Google GPUDirect-TCPXO (FasTrak) NCCL net plugin",
    "FI_CXI_": "libfabric cxi provider, fi_cxi(7)",
    "FI_OPX_": "libfabric opx provider, fi_opx(7)",
    "FI_PSM2_": "libfabric psm2 provider, fi_psm2(7)",
    "FI_PSM3_": "libfabric psm3 provider",
    "FI_SHM_": "libfabric shm provider, fi_shm(7)",
    "FI_TCP_": "libfabric tcp provider, fi_tcp(7)",
    "FI_UDP_": "libfabric udp provider, fi_udp(7)",
    "FI_VERBS_": "libfabric verbs provider, fi_verbs(7)",
    "FI_OFI_RXM_": "libfabric rxm utility provider, fi_rxm(7)",
    "FI_OFI_RXD_": "libfabric rxd utility provider, fi_rxd(7)",
    "FI_UCX_": "libfabric ucx provider, fi_ucx(7)",
    "FI_LNX_": "libfabric lnx provider, fi_lnx(7)",
    "FI_SOCKETS_": "libfabric sockets provider, fi_sockets(7)",
    "FI_USNIC_": "libfabric usnic provider, fi_usnic(7)",
}

# Only these prefixes are checked for unknown names; everything else passes through.
CHECKED_PREFIXES = ("NCCL_", "FI_", "OFI_NCCL_")


def _spec(type_, source, **extra):
    spec = {"type": type_, "source": source}
    spec.update(extra)
    return spec


def _int(source="nccl", **extra):
    return _spec("int", source, **extra)


def _b01(source="nccl", **extra):
    return _spec("bool01", source, **extra)


def _fib(source="fi_efa", **extra):
    return _spec("fi_bool", source, **extra)


def _size(source="nccl", **extra):
    extra.setdefault("min", 0)
    return _spec("size", source, **extra)


def _str(source="nccl", **extra):
    return _spec("string", source, **extra)


def _path(source="nccl", **extra):
    return _spec("path", source, **extra)


def _enum(choices, source="nccl", **extra):
    return _spec("enum", source, choices=list(choices), **extra)


def _removed(type_, message, source="nccl"):
    return _spec(type_, source, removed=message)


_NCCL = {
    # System configuration
    "NCCL_SOCKET_IFNAME": _spec("if_filter", "nccl"),
    "NCCL_SOCKET_FAMILY": _enum(["AF_INET", "AF_INET6"]),
    "NCCL_SOCKET_RETRY_CNT": _int(min=0),
    "NCCL_SOCKET_RETRY_SLEEP_MSEC": _int(min=0),
    "NCCL_SOCKET_POLL_TIMEOUT_MSEC": _int(min=0),
    "NCCL_SOCKET_NTHREADS": _int(min=1, max=16),
    "NCCL_NSOCKS_PERTHREAD": _int(min=1, max=64),
    "NCCL_CROSS_NIC": _int(min=0, max=2),
    "NCCL_IB_HCA": _spec("hca_filter", "nccl"),
    "NCCL_IB_TIMEOUT": _int(min=1, max=31),
    "NCCL_IB_RETRY_CNT": _int(min=0, max=7),
    "NCCL_IB_GID_INDEX": _int(min=-1),
    "NCCL_IB_ADDR_FAMILY": _enum(["AF_INET", "AF_INET6"]),
    "NCCL_IB_ADDR_RANGE": _spec("cidr", "nccl"),
    "NCCL_IB_ROCE_VERSION_NUM": _int(min=1, max=2),
    "NCCL_IB_SL": _int(min=0, max=15),
    "NCCL_IB_TC": _int(min=0, max=255),
    "NCCL_IB_FIFO_TC": _int(min=0, max=255),
    "NCCL_IB_RETURN_ASYNC_EVENTS": _b01(),
    "NCCL_OOB_NET_ENABLE": _b01(),
    "NCCL_OOB_NET_IFNAME": _str(),
    "NCCL_UID_STAGGER_THRESHOLD": _int(min=1),
    "NCCL_UID_STAGGER_RATE": _int(min=1),
    "NCCL_NET": _str(),
    "NCCL_NET_PLUGIN": _str(),
    "NCCL_TUNER_PLUGIN": _str(),
    "NCCL_PROFILER_PLUGIN": _str(),
    "NCCL_ENV_PLUGIN": _str(),
    "NCCL_IGNORE_CPU_AFFINITY": _b01(),
    "NCCL_CONF_FILE": _path(),
    "NCCL_DEBUG": _enum(["VERSION", "WARN", "INFO", "ABORT", "TRACE"]),
    "NCCL_DEBUG_FILE": _path(),
    "NCCL_DEBUG_SUBSYS": _spec("list", "nccl", choices=list(NCCL_DEBUG_SUBSYSTEMS), negate=True),
    "NCCL_DEBUG_TIMESTAMP_FORMAT": _str(allow_empty=True),
    "NCCL_DEBUG_TIMESTAMP_LEVELS": _spec(
        "list", "nccl", choices=["VERSION", "WARN", "INFO", "ABORT", "TRACE", "ALL"], negate=True, allow_empty=True
    ),
    "NCCL_COLLNET_ENABLE": _b01(),
    "NCCL_COLLNET_NODE_THRESHOLD": _int(min=0),
    "NCCL_CTA_POLICY": _str(
        pattern=r"(DEFAULT|EFFICIENCY|ZERO)(\|(DEFAULT|EFFICIENCY|ZERO))*|[0-2]",
        form="DEFAULT, EFFICIENCY or ZERO, joined with |, or a legacy 0-2",
    ),
    "NCCL_NETDEVS_POLICY": _str(pattern=r"AUTO|ALL|MAX:[1-9][0-9]*", form="AUTO, ALL or MAX:N"),
    "NCCL_TOPO_FILE": _path(),
    "NCCL_TOPO_DUMP_FILE": _path(),
    "NCCL_SET_THREAD_NAME": _b01(),
    # Debugging
    "NCCL_P2P_DISABLE": _b01(),
    "NCCL_P2P_LEVEL": _spec("p2p_level", "nccl"),
    "NCCL_P2P_DIRECT_DISABLE": _b01(),
    "NCCL_SHM_DISABLE": _b01(),
    "NCCL_BUFFSIZE": _size(min=1),
    "NCCL_NTHREADS": _enum(["64", "128", "256", "512"]),
    "NCCL_MAX_NCHANNELS": _int(min=1),
    "NCCL_MIN_NCHANNELS": _int(min=1),
    "NCCL_MAX_NRINGS": _int(min=1, deprecated="NCCL_MAX_NRINGS is the pre-2.5 name; use NCCL_MAX_NCHANNELS."),
    "NCCL_MIN_NRINGS": _int(min=1, deprecated="NCCL_MIN_NRINGS is the pre-2.5 name; use NCCL_MIN_NCHANNELS."),
    "NCCL_CHECKS_DISABLE": _removed("bool01", "deprecated in NCCL 2.2.12; see NCCL_CHECK_POINTERS"),
    "NCCL_CHECK_POINTERS": _b01(),
    "NCCL_LAUNCH_MODE": _enum(["PARALLEL", "GROUP"]),
    "NCCL_IB_DISABLE": _b01(),
    "NCCL_IB_AR_THRESHOLD": _size(),
    "NCCL_IB_QPS_PER_CONNECTION": _int(min=1, max=128),
    "NCCL_IB_SPLIT_DATA_ON_QPS": _b01(),
    "NCCL_IB_CUDA_SUPPORT": _removed("bool01", "removed in NCCL 2.4.0; NCCL_NET_GDR_LEVEL replaces it"),
    "NCCL_IB_PCI_RELAXED_ORDERING": _int(min=0, max=2),
    "NCCL_IB_ADAPTIVE_ROUTING": _b01(),
    "NCCL_IB_ECE_ENABLE": _b01(),
    "NCCL_MEM_SYNC_DOMAIN": _int(min=0, max=1),
    "NCCL_CUMEM_ENABLE": _b01(),
    "NCCL_CUMEM_HOST_ENABLE": _b01(),
    "NCCL_NET_GDR_LEVEL": _spec("gdr_level", "nccl"),
    "NCCL_IB_GDR_LEVEL": _removed("gdr_level", "renamed NCCL_NET_GDR_LEVEL in NCCL 2.4.0"),
    "NCCL_NET_GDR_C2C": _b01(),
    "NCCL_NET_GDR_READ": _b01(),
    "NCCL_NET_SHARED_BUFFERS": _b01(),
    "NCCL_NET_SHARED_COMMS": _b01(),
    "NCCL_SINGLE_RING_THRESHOLD": _removed("size", "removed in NCCL 2.3"),
    "NCCL_LL_THRESHOLD": _removed("size", "removed in NCCL 2.5; NCCL_PROTO replaces it"),
    "NCCL_TREE_THRESHOLD": _removed("size", "removed in NCCL 2.5; NCCL_ALGO replaces it"),
    "NCCL_ALGO": _spec("coll_list", "nccl", choices=list(NCCL_ALGOS)),
    "NCCL_PROTO": _spec("coll_list", "nccl", choices=list(NCCL_PROTOS)),
    "NCCL_NVB_DISABLE": _b01(),
    "NCCL_PXN_DISABLE": _b01(),
    "NCCL_P2P_PXN_LEVEL": _int(min=0, max=2),
    "NCCL_PXN_C2C": _b01(),
    "NCCL_RUNTIME_CONNECT": _b01(),
    "NCCL_GRAPH_REGISTER": _b01(),
    "NCCL_LOCAL_REGISTER": _b01(),
    "NCCL_LEGACY_CUDA_REGISTER": _b01(),
    "NCCL_WIN_ENABLE": _b01(),
    "NCCL_SET_STACK_SIZE": _b01(),
    "NCCL_GRAPH_MIXING_SUPPORT": _b01(),
    "NCCL_DMABUF_ENABLE": _b01(),
    "NCCL_P2P_NET_CHUNKSIZE": _size(min=1),
    "NCCL_P2P_LL_THRESHOLD": _size(),
    "NCCL_ALLOC_P2P_NET_LL_BUFFERS": _b01(),
    "NCCL_COMM_BLOCKING": _b01(),
    "NCCL_CGA_CLUSTER_SIZE": _int(min=0, max=8),
    "NCCL_MAX_CTAS": _int(min=1, max=64),
    "NCCL_MIN_CTAS": _int(min=1, max=64),
    "NCCL_NVLS_ENABLE": _int(min=0, max=2),
    "NCCL_IB_MERGE_NICS": _b01(),
    "NCCL_MNNVL_ENABLE": _int(min=0, max=2),
    "NCCL_MNNVL_UUID": _int(),
    "NCCL_MNNVL_CLIQUE_ID": _int(),
    "NCCL_RAS_ENABLE": _b01(),
    "NCCL_RAS_ADDR": _str(),
    "NCCL_RAS_TIMEOUT_FACTOR": _int(min=1),
    "NCCL_LAUNCH_ORDER_IMPLICIT": _b01(),
    "NCCL_LAUNCH_RACE_FATAL": _b01(),
    "NCCL_IPC_USE_ABSTRACT_SOCKET": _b01(),
}

# Read by NCCL (NCCL_PARAM or ncclGetEnv) but not described on env.html.
_NCCL_SRC = {
    "NCCL_COMM_ID": _str("nccl-src", pattern=r"\S+:[0-9]+", form="host:port"),
    "NCCL_HOSTID": _str("nccl-src"),
    "NCCL_GRAPH_FILE": _path("nccl-src"),
    "NCCL_GRAPH_DUMP_FILE": _path("nccl-src"),
    "NCCL_GRAPH_DUMP_FILE_RANK": _int("nccl-src", min=0),
    "NCCL_TOPO_DUMP_FILE_RANK": _int("nccl-src", min=0),
    "NCCL_L1_SHARED_MEMORY_CARVEOUT": _int("nccl-src", min=0),
    "NCCL_CHUNK_SIZE": _size("nccl-src"),
    "NCCL_NVLSTREE_MAX_CHUNKSIZE": _size("nccl-src"),
    "NCCL_GROUP_CUDA_STREAM": _b01("nccl-src"),
    "NCCL_GDRCOPY_ENABLE": _b01("nccl-src"),
    "NCCL_GDRCOPY_FIFO_ENABLE": _b01("nccl-src"),
    "NCCL_GDRCOPY_SYNC_ENABLE": _b01("nccl-src"),
    "NCCL_GDRCOPY_FLUSH_ENABLE": _b01("nccl-src"),
    "NCCL_GRAPH_HELPER_DISABLE": _b01("nccl-src"),
    "NCCL_WORK_FIFO_BYTES": _size("nccl-src", min=1),
    "NCCL_WORK_ARGS_BYTES": _size("nccl-src", min=1),
    "NCCL_LL_BUFFSIZE": _size("nccl-src", min=1),
    "NCCL_LL128_BUFFSIZE": _size("nccl-src", min=1),
    "NCCL_P2P_PCI_CHUNKSIZE": _size("nccl-src", min=1),
    "NCCL_P2P_NVL_CHUNKSIZE": _size("nccl-src", min=1),
    "NCCL_NVB_PRECONNECT": _b01("nccl-src"),
    "NCCL_COMM_SPLIT_SHARE_RESOURCES": _b01("nccl-src"),
    "NCCL_PROXY_APPEND_BATCH_SIZE": _int("nccl-src", min=1),
    "NCCL_CREATE_THREAD_CONTEXT": _b01("nccl-src"),
    "NCCL_PROXY_DUMP_SIGNAL": _int("nccl-src", min=-1),
    "NCCL_PROGRESS_APPENDOP_FREQ": _int("nccl-src", min=1),
    "NCCL_CONNECT_ROUND_MAX_PEERS": _int("nccl-src", min=1),
    "NCCL_REPORT_CONNECT_PROGRESS": _b01("nccl-src"),
    "NCCL_UNPACK_DOUBLE_NCHANNELS": _b01("nccl-src"),
    "NCCL_IGNORE_DISABLED_P2P": _b01("nccl-src"),
    "NCCL_NET_FORCE_FLUSH": _b01("nccl-src"),
    "NCCL_NET_DISABLE_INTRA": _b01("nccl-src"),
    "NCCL_NET_OVERHEAD": _int("nccl-src", min=0),
    "NCCL_NET_OPTIONAL_RECV_COMPLETION": _b01("nccl-src"),
    "NCCL_NCHANNELS_PER_NET_PEER": _int("nccl-src", min=1),
    "NCCL_MIN_P2P_NCHANNELS": _int("nccl-src", min=1),
    "NCCL_MAX_P2P_NCHANNELS": _int("nccl-src", min=1),
    "NCCL_LL128_NTHREADS": _int("nccl-src", min=1),
    "NCCL_PAT_ENABLE": _int("nccl-src", min=0, max=2),
    "NCCL_IB_ROUTABLE_FLID_GID_INDEX": _int("nccl-src", min=0),
    "NCCL_IB_PKEY": _int("nccl-src", min=0),
    "NCCL_IB_USE_INLINE": _b01("nccl-src"),
    "NCCL_IB_MERGE_VFS": _b01("nccl-src"),
    "NCCL_IB_DATA_DIRECT": _b01("nccl-src"),
    "NCCL_IB_WARN_RAIL_LOCAL": _b01("nccl-src"),
    "NCCL_IB_MQP_RETRY_ALL": _b01("nccl-src"),
    "NCCL_IB_MQP_RETRY_CNT": _int("nccl-src", min=0),
    "NCCL_IB_MQP_RETRY_SLEEP_MSEC": _int("nccl-src", min=0),
    "NCCL_GDR_FLUSH_DISABLE": _b01("nccl-src"),
    "NCCL_NVLS_NCHANNELS": _int("nccl-src", min=1),
    "NCCL_NVLS_CHUNKSIZE": _size("nccl-src", min=1),
    "NCCL_P2P_USE_CUDA_MEMCPY": _b01("nccl-src"),
    "NCCL_P2P_READ_ENABLE": _b01("nccl-src"),
    "NCCL_SHM_USE_CUDA_MEMCPY": _b01("nccl-src"),
    "NCCL_SHM_MEMCPY_MODE": _int("nccl-src", min=1, max=3),
    "NCCL_SHM_LOCALITY": _int("nccl-src", min=1, max=2),
}

_SHARP_PLUGIN = {
    "NCCL_IBEXT_DISABLE": _b01("nccl-rdma-sharp-plugins"),
    "NCCL_PLUGIN_P2P": _str("nccl-rdma-sharp-plugins"),
}

_PYTORCH = {
    "NCCL_ASYNC_ERROR_HANDLING": _int(
        "pytorch", min=0, max=3, deprecated="PyTorch 2.2+ reads TORCH_NCCL_ASYNC_ERROR_HANDLING instead."
    ),
    "NCCL_BLOCKING_WAIT": _b01("pytorch", deprecated="PyTorch 2.2+ reads TORCH_NCCL_BLOCKING_WAIT instead."),
    "NCCL_DESYNC_DEBUG": _b01("pytorch", deprecated="PyTorch 2.2+ reads TORCH_NCCL_DESYNC_DEBUG instead."),
}

_LIBFABRIC = {
    "FI_PROVIDER": _spec("list", "libfabric", negate=True),
    "FI_PROVIDER_PATH": _str("libfabric", allow_empty=True),
    "FI_LOG_LEVEL": _str("libfabric", pattern=r"warn|trace|info|debug|[0-9]+", form="warn, trace, info or debug"),
    "FI_LOG_PROV": _spec("list", "libfabric", negate=True),
    "FI_LOG_SUBSYS": _spec("list", "libfabric", choices=list(FI_LOG_SUBSYSTEMS), negate=True),
    "FI_HOOK": _str("libfabric"),
    "FI_UNIVERSE_SIZE": _int("libfabric", min=1),
    "FI_FORK_UNSAFE": _fib("libfabric"),
    # libfabric splits FI_HMEM on ';' and warns (then ignores) an unknown entry.
    "FI_HMEM": _spec("list", "libfabric", choices=list(FI_HMEM_IFACES), sep=";"),
    "FI_HMEM_DISABLE_P2P": _fib("libfabric"),
    "FI_HMEM_CUDA_USE_GDRCOPY": _fib("libfabric"),
    "FI_HMEM_CUDA_ENABLE_XFER": _fib("libfabric"),
    "FI_HMEM_CUDA_USE_DMABUF": _fib("libfabric"),
    "FI_MR_CACHE_MAX_SIZE": _size("libfabric"),
    "FI_MR_CACHE_MAX_COUNT": _size("libfabric"),
    # compared with strcmp in the MR cache setup
    "FI_MR_CACHE_MONITOR": _enum(["userfaultfd", "memhooks", "kdreg2", "disabled"], "libfabric", case_sensitive=True),
    "FI_MR_CUDA_CACHE_MONITOR_ENABLED": _fib("libfabric"),
    "FI_MR_ROCR_CACHE_MONITOR_ENABLED": _fib("libfabric"),
    "FI_MR_ZE_CACHE_MONITOR_ENABLED": _fib("libfabric"),
}

_FI_EFA = {
    "FI_EFA_IFACE": _str("fi_efa"),
    "FI_EFA_TX_SIZE": _int("fi_efa", min=1),
    "FI_EFA_RX_SIZE": _int("fi_efa", min=1),
    "FI_EFA_TX_IOV_LIMIT": _int("fi_efa", min=1),
    "FI_EFA_RX_IOV_LIMIT": _int("fi_efa", min=1),
    "FI_EFA_RX_WINDOW_SIZE": _int("fi_efa", min=1),
    "FI_EFA_TX_QUEUE_SIZE": _int("fi_efa", min=1),
    "FI_EFA_RECVWIN_SIZE": _int("fi_efa", min=1),
    "FI_EFA_CQ_SIZE": _int("fi_efa", min=1),
    "FI_EFA_MR_CACHE_ENABLE": _fib(),
    "FI_EFA_MR_MAX_CACHED_COUNT": _size("fi_efa"),
    "FI_EFA_MR_MAX_CACHED_SIZE": _size("fi_efa"),
    "FI_EFA_MAX_MEMCPY_SIZE": _size("fi_efa"),
    "FI_EFA_MTU_SIZE": _size("fi_efa", min=1),
    "FI_EFA_RX_COPY_UNEXP": _fib(),
    "FI_EFA_RX_COPY_OOO": _fib(),
    "FI_EFA_MAX_TIMEOUT": _int("fi_efa", min=0),
    "FI_EFA_TIMEOUT_INTERVAL": _int("fi_efa", min=0),
    "FI_EFA_ENABLE_SHM_TRANSFER": _fib(),
    "FI_EFA_SHM_AV_SIZE": _int("fi_efa", min=1),
    "FI_EFA_SHM_MAX_MEDIUM_SIZE": _size(
        "fi_efa", deprecated="fi_efa(7) marks FI_EFA_SHM_MAX_MEDIUM_SIZE deprecated; remove it."
    ),
    "FI_EFA_INTER_MAX_MEDIUM_MESSAGE_SIZE": _size("fi_efa"),
    "FI_EFA_FORK_SAFE": _fib(),
    "FI_EFA_RUNT_SIZE": _size("fi_efa"),
    "FI_EFA_SET_CUDA_SYNC_MEMOPS": _fib(),
    "FI_EFA_INTER_MIN_READ_MESSAGE_SIZE": _size("fi_efa"),
    "FI_EFA_INTER_MIN_READ_WRITE_SIZE": _size("fi_efa"),
    "FI_EFA_USE_DEVICE_RDMA": _fib(),
    "FI_EFA_USE_HUGE_PAGE": _fib(),
    "FI_EFA_USE_ZCPY_RX": _fib(),
    "FI_EFA_USE_UNSOLICITED_WRITE_RECV": _fib(),
    "FI_EFA_INTERNAL_RX_REFILL_THRESHOLD": _int("fi_efa", min=0),
    "FI_EFA_DIRECT_CQ_OPS": _fib(),
}

_OFI = "aws-ofi-nccl"
_AWS_OFI_NCCL = {
    "OFI_NCCL_USE_IPV6_TCP": _b01(_OFI),
    "OFI_NCCL_EXCLUDE_TCP_IF": _spec("list", _OFI),
    "OFI_NCCL_GDR_FLUSH_DISABLE": _b01(_OFI),
    "OFI_NCCL_NIC_DUP_CONNS": _int(_OFI, min=0),
    "OFI_NCCL_CUDA_FLUSH_ENABLE": _b01(_OFI),
    "OFI_NCCL_MR_KEY_SIZE": _int(_OFI, min=1),
    "OFI_NCCL_MR_CACHE_DISABLE": _b01(_OFI),
    "OFI_NCCL_CQ_READ_COUNT": _int(_OFI, min=1),
    "OFI_NCCL_GIN_CQ_PROCESS_MAX_ITER": _int(_OFI, min=1),
    "OFI_NCCL_CQ_SIZE": _int(_OFI, min=1),
    "OFI_NCCL_PROTOCOL": _enum(["SENDRECV", "RDMA"], _OFI),
    "OFI_NCCL_DISABLE_NATIVE_RDMA_CHECK": _b01(_OFI),
    "OFI_NCCL_DISABLE_GDR_REQUIRED_CHECK": _b01(_OFI),
    "OFI_NCCL_DISABLE_DMABUF": _b01(_OFI),
    "OFI_NCCL_MIN_STRIPE_SIZE": _size(_OFI),
    "OFI_NCCL_SCHED_MAX_SMALL_RR_SIZE": _size(_OFI),
    "OFI_NCCL_RDMA_MIN_POSTED_BOUNCE_BUFFERS": _removed(
        "int",
        "removed from aws-ofi-nccl; use OFI_NCCL_RDMA_MIN_POSTED_CONTROL_BUFFERS or"
        " OFI_NCCL_RDMA_MIN_POSTED_EAGER_BUFFERS",
        _OFI,
    ),
    "OFI_NCCL_RDMA_MAX_POSTED_BOUNCE_BUFFERS": _removed(
        "int",
        "removed from aws-ofi-nccl; use OFI_NCCL_RDMA_MAX_POSTED_CONTROL_BUFFERS or"
        " OFI_NCCL_RDMA_MAX_POSTED_EAGER_BUFFERS",
        _OFI,
    ),
    "OFI_NCCL_RDMA_MIN_POSTED_EAGER_BUFFERS": _int(_OFI, min=0),
    "OFI_NCCL_RDMA_MAX_POSTED_EAGER_BUFFERS": _int(_OFI, min=0),
    "OFI_NCCL_RDMA_MIN_POSTED_CONTROL_BUFFERS": _int(_OFI, min=0),
    "OFI_NCCL_RDMA_MAX_POSTED_CONTROL_BUFFERS": _int(_OFI, min=0),
    "OFI_NCCL_RR_CTRL_MSG": _b01(_OFI),
    "OFI_NCCL_NET_LATENCY": _str(_OFI, pattern=r"[0-9]+(\.[0-9]*)?", form="a number of microseconds"),
    "OFI_NCCL_EAGER_MAX_SIZE": _int(_OFI, min=-1),
    "OFI_NCCL_ERRORCHECK_MUTEX": _b01(_OFI),
    "OFI_NCCL_ENDPOINT_PER_COMM": _removed(
        "bool01", "endpoint-per-communicator support was removed from aws-ofi-nccl", _OFI
    ),
    "OFI_NCCL_ABORT_ON_ERROR": _b01(_OFI),
    "OFI_NCCL_TUNER_TYPE": _enum(["INTERNAL", "REGION", "MODEL"], _OFI),
    "OFI_NCCL_TUNER_NUM_CHANNELS": _int(_OFI, min=1),
    "OFI_NCCL_TUNER_NET_LATENCY": _int(_OFI, min=0),
    "OFI_NCCL_TUNER_NET_COMP_OVERHEAD": _int(_OFI, min=0),
    "OFI_NCCL_USE_LOW_LATENCY_TC": _b01(_OFI),
    "OFI_NCCL_FORCE_NUM_RAILS": _int(_OFI, min=0),
    "OFI_NCCL_EARLY_COMPLETION": _b01(_OFI),
    "OFI_NCCL_DISABLE_CLOSE_MESSAGE": _b01(_OFI),
    "OFI_NCCL_SKIP_NICS_WITHOUT_ACCEL_AT_SAME_PCI_LEVEL": _b01(_OFI),
    "OFI_NCCL_CM_NUM_RX_BUFFERS": _int(_OFI, min=1),
    "OFI_NCCL_PROGRESS_MODEL": _enum(["UNSPEC", "AUTO", "MANUAL"], _OFI),
    "OFI_NCCL_PLATFORM": _str(_OFI, allow_empty=True),
    "OFI_NCCL_NVTX_TRACE_DIMENSION": _enum(["PER_COMM", "PER_DEV"], _OFI),
    "OFI_NCCL_GDAKI_EFA_HW_COUNTER": _enum(["AUTO", "ON", "OFF"], _OFI),
    "OFI_NCCL_GIN_STRONG_SIGNAL": _b01(_OFI),
}

VARIABLES = {}
for _group in (_NCCL, _NCCL_SRC, _SHARP_PLUGIN, _PYTORCH, _LIBFABRIC, _FI_EFA, _AWS_OFI_NCCL):
    VARIABLES.update(_group)
del _group
