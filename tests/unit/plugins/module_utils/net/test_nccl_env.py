"""Unit tests for the NCCL/libfabric environment (module_utils/net/nccl_env.py, nccl_known.py)."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.raygate.cluster.plugins.module_utils.net import nccl_env as ne
from ansible_collections.raygate.cluster.plugins.module_utils.net import nccl_known as nk

IFACES = ["lo", "eth0", "docker0"]
IB = {
    "fabric": "ib",
    "active_ports": ["mlx5_0:1", "mlx5_1:1"],
    "down_ports": ["mlx5_10:1"],
    "netdevs": ["ib0", "ib1"],
    "gid_index": None,
    "libfabric_efa": None,
    "warnings": [],
}
ROCE = dict(IB, fabric="roce", active_ports=["mlx5_0:1"], down_ports=[], gid_index=3)
EFA = {
    "fabric": "efa",
    "active_ports": ["rdmap16s27:1"],
    "down_ports": [],
    "netdevs": [],
    "gid_index": None,
    "libfabric_efa": True,
    "warnings": [],
}
NONE = {"fabric": "none", "active_ports": [], "down_ports": [], "netdevs": [], "gid_index": None}


def check(env, detected=None, interfaces=None, require_gdr=True, **kwargs):
    base = {"NCCL_SOCKET_IFNAME": "=eth0"}
    base.update(env)
    detected = IB if detected is None else detected
    interfaces = IFACES if interfaces is None else interfaces
    return ne.validate(base, detected, interfaces, require_gdr=require_gdr, **kwargs)


def only_error(env, detected=None, **kwargs):
    errors, _unused = check(env, detected, **kwargs)
    assert len(errors) == 1, errors
    return errors[0]


# ---------------------------------------------------------------------------------------------
# The data file


@pytest.mark.parametrize("name", sorted(nk.VARIABLES))
def test_every_known_variable_has_a_valid_spec(name):
    spec = nk.VARIABLES[name]
    assert re.match(r"(NCCL_|FI_|OFI_NCCL_)[A-Z0-9_]+\Z", name)
    assert spec["type"] in nk.TYPES
    assert spec["source"] in nk.SOURCES
    assert set(spec) <= {
        "type",
        "source",
        "min",
        "max",
        "choices",
        "case_sensitive",
        "negate",
        "sep",
        "pattern",
        "form",
        "allow_empty",
        "removed",
        "deprecated",
    }
    if spec["type"] in ("enum", "coll_list"):
        assert spec["choices"] and all(isinstance(choice, str) for choice in spec["choices"])
    if "pattern" in spec:
        re.compile(spec["pattern"])
        assert spec.get("form"), "a pattern needs a human description in 'form'"
    if "min" in spec and "max" in spec:
        assert spec["min"] <= spec["max"]
    for key in ("removed", "deprecated"):
        assert isinstance(spec.get(key, ""), str)


def test_known_names_do_not_overlap_passthrough_prefixes():
    assert not [name for name in nk.VARIABLES if name.startswith(tuple(nk.PASSTHROUGH_PREFIXES))]


def _all_profiles():
    for detected in (IB, ROCE, EFA, NONE):
        for force_net in (False, True):
            for require_gdr in (False, True):
                for ifname in (None, "eth0"):
                    yield ne.build_env(detected, IFACES, ifname, force_net, require_gdr)


def test_every_name_build_env_writes_is_known_and_its_value_checks():
    seen = set()
    for env in _all_profiles():
        for name, value in env.items():
            assert name in nk.VARIABLES and "removed" not in nk.VARIABLES[name], name
            assert ne.check_value(name, value) is None, (name, value)
            seen.add(name)
    assert {"FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_NET"} <= seen


# ---------------------------------------------------------------------------------------------
# Names


def test_suggest():
    assert ne.suggest("NCCL_SOCKET_IFNAM") == "NCCL_SOCKET_IFNAME"
    assert ne.suggest("FI_EFA_USE_DEVCE_RDMA") == "FI_EFA_USE_DEVICE_RDMA"
    assert ne.suggest("nccl_debug") == "NCCL_DEBUG"
    assert ne.suggest("NCCL_COMPLETELY_DIFFERENT_THING") is None
    # a name NCCL no longer reads is never proposed
    assert ne.suggest("NCCL_LL_THRESHOLDS") != "NCCL_LL_THRESHOLD"


def test_unknown_name_is_an_error_with_a_suggestion():
    error = only_error({"NCCL_SOCKET_IFNAM": "=eth0"})
    assert error.startswith("NCCL_SOCKET_IFNAM is not a variable NCCL reads")
    assert error.endswith("did you mean NCCL_SOCKET_IFNAME?")


@pytest.mark.parametrize(
    "name, library",
    [("FI_EFA_NO_SUCH_KNOB_AT_ALL", "libfabric"), ("OFI_NCCL_ZZZ_QQQ_XXX", "the aws-ofi-nccl plugin")],
)
def test_unknown_name_without_suggestion_names_the_library(name, library):
    error = only_error({name: "1"})
    assert "%s is not a variable %s reads" % (name, library) in error
    assert error.endswith("fix the name or remove it.")


def test_wrong_case_is_caught():
    assert "did you mean NCCL_DEBUG?" in only_error({"nccl_debug": "INFO"})


def test_other_names_and_passthrough_prefixes_are_not_checked():
    env = {
        "CUDA_VISIBLE_DEVICES": "0,1",
        "UCX_TLS": "rc",
        "TORCH_NCCL_BLOCKING_WAIT": "1",
        "NCCL_FASTRAK_IFNAME": "eth1",
        "FI_CXI_RX_MATCH_MODE": "hybrid",
    }
    assert check(env) == ([], [])


def test_extra_known_names_pass():
    assert check({"NCCL_MY_PLUGIN_KNOB": "x"}, extra_known=("NCCL_MY_PLUGIN_KNOB",)) == ([], [])


def test_removed_variable_is_an_error_naming_the_replacement():
    error = only_error({"NCCL_IB_GDR_LEVEL": "PHB"})
    assert error.startswith("NCCL_IB_GDR_LEVEL='PHB' is no longer read")
    assert "NCCL_NET_GDR_LEVEL" in error


def test_deprecated_variable_is_a_warning():
    errors, warnings = check({"NCCL_ASYNC_ERROR_HANDLING": "1"})
    assert errors == [] and len(warnings) == 1 and "TORCH_NCCL_ASYNC_ERROR_HANDLING" in warnings[0]


# ---------------------------------------------------------------------------------------------
# Types

BAD_VALUES = [
    ("NCCL_IB_TIMEOUT", "abc", "is not an integer"),
    ("NCCL_IB_TIMEOUT", "0", "use a value from 1 to 31"),
    ("NCCL_IB_TIMEOUT", "32", "use a value from 1 to 31"),
    ("NCCL_IB_GID_INDEX", "-2", "at least -1"),
    ("NCCL_IB_DISABLE", "true", "must be 0 or 1"),
    ("FI_EFA_FORK_SAFE", "maybe", "is not a libfabric boolean"),
    ("NCCL_BUFFSIZE", "8M", "is not a whole number of bytes"),
    ("NCCL_BUFFSIZE", "0", "at least 1"),
    ("NCCL_DEBUG", "VERBOSE", "is not one of VERSION, WARN, INFO, ABORT, TRACE"),
    ("NCCL_NTHREADS", "100", "is not one of 64, 128, 256, 512"),
    ("FI_MR_CACHE_MONITOR", "Userfaultfd", "case-sensitively, so it is ignored; write 'userfaultfd'"),
    ("NCCL_NET_GDR_LEVEL", "phb", "case-sensitively by NCCL, so it is ignored; write 'PHB'"),
    ("NCCL_NET_GDR_LEVEL", "NEAR", "is not a level NCCL knows"),
    ("NCCL_NET_GDR_LEVEL", "NVL", "is not a level NCCL knows"),
    ("NCCL_P2P_LEVEL", "-1", "is not a level NCCL knows"),
    ("NCCL_SOCKET_IFNAME", "", "is empty"),
    ("NCCL_SOCKET_IFNAME", "eth0, eth1", "contains whitespace"),
    ("NCCL_SOCKET_IFNAME", "^=", "names no interface"),
    ("NCCL_IB_HCA", "=mlx5_0:x", "is not device or device:port"),
    ("NCCL_NETDEVS_POLICY", "MAX:0", "accepted form (AUTO, ALL or MAX:N)"),
    ("NCCL_COMM_ID", "headnode", "accepted form (host:port)"),
    ("NCCL_NET", "", "is empty"),
    ("NCCL_DEBUG_FILE", "~/nccl.log", "~, which is not expanded"),
    ("NCCL_TOPO_FILE", "", "is empty"),
    ("NCCL_DEBUG_SUBSYS", "INIT,FOO", "names 'FOO', which it does not know"),
    ("NCCL_DEBUG_SUBSYS", "INIT,,NET", "has an empty item"),
    ("FI_HMEM", "cuda,ze", "names 'cuda,ze'"),
    ("FI_LOG_SUBSYS", "core,ep", "names 'ep'"),
    ("NCCL_ALGO", "ring,foo", "names 'foo'"),
    ("NCCL_ALGO", "all reduce:ring", "malformed entry"),
    ("NCCL_PROTO", "LL,,Simple", "empty item"),
    ("NCCL_IB_ADDR_RANGE", "10.0.0.0/33", "is not a network in CIDR notation"),
]


@pytest.mark.parametrize("name, value, fragment", BAD_VALUES)
def test_bad_value_is_one_error_naming_variable_value_and_fix(name, value, fragment):
    error = only_error({name: value}, detected=NONE, require_gdr=False)
    assert error.startswith("%s=%r " % (name, value))
    assert fragment in error
    assert "; " in error  # the fix follows the problem


GOOD_VALUES = [
    ("NCCL_IB_TIMEOUT", "0x10"),
    ("NCCL_IB_GID_INDEX", "-1"),
    ("NCCL_IB_DISABLE", "0"),
    ("FI_EFA_FORK_SAFE", "ON"),
    ("FI_EFA_FORK_SAFE", "no"),
    ("NCCL_BUFFSIZE", "8388608"),
    ("NCCL_DEBUG", "info"),
    ("NCCL_NET_GDR_LEVEL", "SYS"),
    ("NCCL_NET_GDR_LEVEL", "5"),
    ("NCCL_P2P_LEVEL", "NVL"),
    ("NCCL_SOCKET_IFNAME", "^=docker0,lo"),
    ("NCCL_NETDEVS_POLICY", "max:2"),
    ("NCCL_CTA_POLICY", "EFFICIENCY|ZERO"),
    ("NCCL_COMM_ID", "10.0.0.1:5000"),
    ("NCCL_DEBUG_FILE", "/var/log/nccl.%h.%p"),
    ("NCCL_DEBUG_SUBSYS", "^INIT,net"),
    ("NCCL_DEBUG_TIMESTAMP_FORMAT", ""),
    ("FI_HMEM", "cuda;ze"),
    ("FI_PROVIDER", "^tcp,udp"),
    ("FI_LOG_LEVEL", "Warn"),
    ("NCCL_ALGO", "ring,collnetdirect;allreduce:tree,collnetdirect;broadcast:ring"),
    ("NCCL_ALGO", "allreduce:^tree"),
    ("NCCL_PROTO", "^LL128"),
    ("NCCL_IB_ADDR_RANGE", "fd00::/64"),
    ("OFI_NCCL_PROTOCOL", "rdma"),
]


@pytest.mark.parametrize("name, value", GOOD_VALUES)
def test_good_value_passes(name, value):
    assert ne.check_value(name, value) is None


def test_python_values_are_read_as_the_process_sees_them():
    assert check({"NCCL_IB_DISABLE": False, "NCCL_BUFFSIZE": 8388608, "NCCL_DEBUG": None}) == ([], [])
    assert "must be 0 or 1" in only_error({"NCCL_IB_DISABLE": 2}, detected=NONE, require_gdr=False)


# ---------------------------------------------------------------------------------------------
# Contradictions


@pytest.mark.parametrize("detected", [IB, ROCE], ids=["ib", "roce"])
def test_ib_disabled_on_an_ib_fabric(detected):
    error = only_error({"NCCL_IB_DISABLE": "1"}, detected=detected)
    assert "NCCL_IB_DISABLE='1'" in error and "fabric is %s" % detected["fabric"] in error
    assert "remove NCCL_IB_DISABLE or set it to 0" in error


def test_socket_net_while_gdr_required():
    error = only_error({"NCCL_NET": "socket"})
    assert error.startswith("NCCL_NET='socket' forces NCCL onto TCP sockets while require_gdr is true")
    assert check({"NCCL_NET": "socket"}, require_gdr=False) == ([], [])


@pytest.mark.parametrize("level", ["LOC", "0", "0x0"])
def test_gdr_level_loc_while_gdr_required(level):
    error = only_error({"NCCL_NET_GDR_LEVEL": level})
    assert error.startswith("NCCL_NET_GDR_LEVEL=%r (LOC) turns GPUDirect RDMA off" % level)
    assert check({"NCCL_NET_GDR_LEVEL": level}, require_gdr=False) == ([], [])


def test_socket_ifname_matching_no_interface_lists_the_interfaces():
    error = only_error({"NCCL_SOCKET_IFNAME": "=ens5"})
    assert error.startswith("NCCL_SOCKET_IFNAME='=ens5' matches no network interface on this host")
    assert "(interfaces: lo, eth0, docker0)" in error and "'=eth0'" in error


def test_socket_ifname_selecting_only_loopback_is_a_warning():
    errors, warnings = check({"NCCL_SOCKET_IFNAME": "lo"})
    assert errors == [] and "only the loopback interface" in warnings[0]


def test_a_malformed_filter_is_reported_once():
    error = only_error({"NCCL_SOCKET_IFNAME": "eth0 "})
    assert "contains whitespace" in error


def test_ib_hca_matching_no_active_port_lists_the_active_ones():
    error = only_error({"NCCL_IB_HCA": "=mlx5_10"})
    assert error.startswith("NCCL_IB_HCA='=mlx5_10' matches none of the active RDMA ports")
    assert "(active: mlx5_0:1, mlx5_1:1)" in error and "'=mlx5_0:1,mlx5_1:1'" in error


def test_ib_hca_prefix_that_also_matches_other_devices_is_a_warning():
    errors, warnings = check({"NCCL_IB_HCA": "mlx5_1"})
    assert errors == []
    assert warnings == [
        "NCCL_IB_HCA='mlx5_1': 'mlx5_1' is a prefix and also matches mlx5_10; start the value with '=' for exact names."
    ]
    assert check({"NCCL_IB_HCA": "=mlx5_1"}) == ([], [])


def test_ib_hca_on_efa_has_no_effect():
    errors, warnings = check({"NCCL_IB_HCA": "=mlx5_0"}, detected=EFA)
    assert errors == [] and "has no effect on a host whose fabric is efa" in warnings[0]


def test_gdr_required_without_rdma_fabric():
    error = only_error({}, detected=NONE)
    assert "no RDMA fabric" in error and "set require_gdr false" in error
    assert check({}, detected=NONE, require_gdr=False) == ([], [])


@pytest.mark.parametrize("fabric", ["ib", "roce"])
def test_rdma_fabric_without_active_port(fabric):
    detected = dict(IB, fabric=fabric, active_ports=[], down_ports=["mlx5_0:1"], gid_index=3)
    error = only_error({}, detected=detected)
    assert "The %s fabric was detected but none of its ports is ACTIVE (down: mlx5_0:1)" % fabric in error
    errors, warnings = check({}, detected=detected, require_gdr=False)
    assert errors == [] and warnings == [error]


def test_forcing_ib_without_any_active_port_fails_loudly():
    detected = dict(IB, active_ports=[])
    errors, _unused = check({"NCCL_NET": "IB"}, detected=detected, require_gdr=False)
    assert errors == ["NCCL_NET='IB' but no InfiniBand/RoCE port is active, so NCCL fails to start; remove it."]
    errors, _unused = check({"NCCL_NET": "IB"}, detected=NONE, require_gdr=False)
    assert errors and "no InfiniBand/RoCE fabric was detected" in errors[0]


@pytest.mark.parametrize("provider", ["tcp", "^efa", "verbs;ofi_rxm"])
def test_efa_with_another_provider(provider):
    error = only_error({"FI_PROVIDER": provider}, detected=EFA)
    assert error.startswith("FI_PROVIDER=%r keeps libfabric from using the efa provider" % provider)


@pytest.mark.parametrize("provider", ["efa", "EFA", "efa,shm", "^tcp"])
def test_efa_provider_selections_that_keep_efa(provider):
    assert check({"FI_PROVIDER": provider}, detected=EFA) == ([], [])


@pytest.mark.parametrize("value", ["0", "false", "Off"])
def test_efa_device_rdma_off_while_gdr_required(value):
    error = only_error({"FI_EFA_USE_DEVICE_RDMA": value}, detected=EFA)
    assert error.startswith("FI_EFA_USE_DEVICE_RDMA=%r makes libfabric emulate RDMA" % value)
    assert check({"FI_EFA_USE_DEVICE_RDMA": value}, detected=EFA, require_gdr=False) == ([], [])


def test_efa_without_libfabric_efa_provider():
    error = only_error({}, detected=dict(EFA, libfabric_efa=False))
    assert error.startswith("fi_info lists no efa provider") and "set require_gdr false" in error
    assert check({}, detected=dict(EFA, libfabric_efa=False), require_gdr=False) == ([], [])


def test_efa_without_fi_info_is_a_warning():
    errors, warnings = check({}, detected=dict(EFA, libfabric_efa=None))
    assert errors == [] and warnings[0].startswith("fi_info is not installed")


def test_ib_net_on_efa():
    error = only_error({"NCCL_NET": "ib"}, detected=EFA, require_gdr=False)
    assert "does not run over EFA" in error and "NCCL_NET='AWS Libfabric'" in error


def test_efa_hmem_settings_that_block_gpudirect():
    assert "FI_HMEM_DISABLE_P2P='1' forbids" in only_error({"FI_HMEM_DISABLE_P2P": "1"}, detected=EFA)
    assert "FI_HMEM='ze' does not include cuda" in only_error({"FI_HMEM": "ze"}, detected=EFA)
    assert check({"FI_HMEM": "cuda;ze"}, detected=EFA) == ([], [])


def test_roce_without_gid_is_a_warning():
    errors, warnings = check({}, detected=dict(ROCE, gid_index=None))
    assert errors == [] and len(warnings) == 1 and "NCCL_IB_GID_INDEX is unset" in warnings[0]
    assert check({"NCCL_IB_GID_INDEX": "3"}, detected=dict(ROCE, gid_index=None)) == ([], [])


def test_roce_gid_differing_from_the_detected_one_is_a_warning():
    errors, warnings = check({"NCCL_IB_GID_INDEX": "1"}, detected=ROCE)
    assert errors == [] and "differs from the detected RoCE v2 GID index 3" in warnings[0]


def test_socket_threads_times_sockets_above_64():
    error = only_error({"NCCL_SOCKET_NTHREADS": "16", "NCCL_NSOCKS_PERTHREAD": "8"})
    assert "exceeds 64" in error
    assert check({"NCCL_SOCKET_NTHREADS": "8", "NCCL_NSOCKS_PERTHREAD": "8"}) == ([], [])


def test_every_problem_is_reported_not_just_the_first():
    env = {"NCCL_IB_DISABLE": "1", "NCCL_NET": "Socket", "NCCL_NET_GDR_LEVEL": "LOC", "NCCL_DEBUGG": "INFO"}
    errors, _unused = check(env)
    assert len(errors) == 4


# ---------------------------------------------------------------------------------------------
# Filters


@pytest.mark.parametrize(
    "value, expected",
    [
        ("eth", ["eth0", "eth1", "eth10"]),
        ("=eth1", ["eth1"]),
        ("=eth0,eth1", ["eth0", "eth1"]),
        ("^docker", ["lo", "eth0", "eth1", "eth10", "ib0"]),
        ("^=docker0", ["lo", "eth0", "eth1", "eth10", "ib0", "docker1"]),
        ("^lo,docker", ["eth0", "eth1", "eth10", "ib0"]),
        ("ib,eth1", ["eth1", "eth10", "ib0"]),
        ("=eth", []),
    ],
)
def test_match_if_filter(value, expected):
    interfaces = ["lo", "eth0", "eth1", "eth10", "ib0", "docker0", "docker1"]
    assert ne.match_if_filter(value, interfaces) == expected


PORTS = ["mlx5_0:1", "mlx5_0:2", "mlx5_1:1", "mlx5_4:1", "mlx5_10:1"]


@pytest.mark.parametrize(
    "value, expected",
    [
        ("mlx5", PORTS),
        ("=mlx5_0:1,mlx5_1:1", ["mlx5_0:1", "mlx5_1:1"]),
        ("^=mlx5_1,mlx5_4", ["mlx5_0:1", "mlx5_0:2", "mlx5_10:1"]),
        ("mlx5_1", ["mlx5_1:1", "mlx5_10:1"]),
        ("=mlx5_1", ["mlx5_1:1"]),
        ("=mlx5_0", ["mlx5_0:1", "mlx5_0:2"]),
        ("=mlx5_0:2", ["mlx5_0:2"]),
        ("mlx5_0:3", []),
        ("^mlx5_1", ["mlx5_0:1", "mlx5_0:2", "mlx5_4:1"]),
    ],
)
def test_match_hca_filter(value, expected):
    assert ne.match_hca_filter(value, PORTS) == expected


# ---------------------------------------------------------------------------------------------
# Profiles


def test_efa_profile():
    env = ne.build_env(EFA, IFACES, socket_ifname="eth0", force_net=True)
    assert env == {
        "NCCL_SOCKET_IFNAME": "=eth0",
        "FI_PROVIDER": "efa",
        "FI_EFA_FORK_SAFE": "1",
        "FI_EFA_USE_DEVICE_RDMA": "1",
        "NCCL_BUFFSIZE": "8388608",
        "NCCL_P2P_NET_CHUNKSIZE": "524288",
        "NCCL_NET": "AWS Libfabric",
    }


def test_efa_profile_without_gdr_leaves_device_rdma_to_libfabric():
    env = ne.build_env(EFA, IFACES, require_gdr=False)
    assert "FI_EFA_USE_DEVICE_RDMA" not in env and "NCCL_NET" not in env
    assert env["NCCL_SOCKET_IFNAME"] == "^lo,docker"


def test_ib_profile():
    env = ne.build_env(IB, IFACES, socket_ifname="eth0", force_net=True)
    assert env == {
        "NCCL_SOCKET_IFNAME": "=eth0",
        "NCCL_IB_HCA": "=mlx5_0:1,mlx5_1:1",
        "NCCL_NET_GDR_LEVEL": "PHB",
        "NCCL_NET": "IB",
    }


def test_roce_profile_carries_the_gid_index():
    env = ne.build_env(ROCE, IFACES, socket_ifname="eth0")
    assert env == {
        "NCCL_SOCKET_IFNAME": "=eth0",
        "NCCL_IB_HCA": "=mlx5_0:1",
        "NCCL_NET_GDR_LEVEL": "PHB",
        "NCCL_IB_GID_INDEX": "3",
    }
    assert "NCCL_IB_GID_INDEX" not in ne.build_env(dict(ROCE, gid_index=None), IFACES)


@pytest.mark.parametrize("given, written", [("eth0", "=eth0"), ("=eth0", "=eth0"), ("^docker", "^docker")])
def test_socket_ifname_is_a_name_or_a_ready_filter(given, written):
    assert ne.build_env(NONE, IFACES, socket_ifname=given)["NCCL_SOCKET_IFNAME"] == written


def test_no_fabric_profile_is_the_socket_interface_only():
    assert ne.build_env(NONE, IFACES, force_net=True, require_gdr=False) == {"NCCL_SOCKET_IFNAME": "^lo,docker"}


def test_profile_knobs():
    overrides = {"efa_net_name": "Libfabric", "efa_buffsize": None, "default_socket_ifname": "^lo"}
    env = ne.build_env(EFA, IFACES, force_net=True, profile_overrides=overrides)
    assert env["NCCL_NET"] == "Libfabric" and "NCCL_BUFFSIZE" not in env
    assert env["NCCL_SOCKET_IFNAME"] == "^lo"
    assert ne.build_env(IB, IFACES, profile_overrides={"ib_gdr_level": "SYS"})["NCCL_NET_GDR_LEVEL"] == "SYS"


def test_bad_profile_inputs_raise():
    with pytest.raises(ValueError, match="unknown profile knob 'gdr'"):
        ne.build_env(IB, IFACES, profile_overrides={"gdr": "PHB"})
    with pytest.raises(ValueError, match="unknown fabric 'omnipath'"):
        ne.build_env({"fabric": "omnipath"}, IFACES)


@pytest.mark.parametrize("detected", [IB, ROCE, EFA], ids=["ib", "roce", "efa"])
def test_profiles_validate_clean(detected):
    env = ne.build_env(detected, IFACES, socket_ifname="eth0", force_net=True)
    assert ne.validate(env, detected, IFACES) == ([], [])


_DEVICE = st.from_regex(r"(mlx5_[0-9]{1,2}|rdmap[0-9]{1,3}s[0-9]{1,2})", fullmatch=True)
_IFACE = st.from_regex(r"(eth|ens|enp|ib|bond)[0-9]{1,2}", fullmatch=True)


@st.composite
def _consistent_host(draw):
    fabric = draw(st.sampled_from(["efa", "ib", "roce", "none"]))
    devices = draw(st.lists(_DEVICE, min_size=1, max_size=6, unique=True))
    ports = ["%s:%d" % (device, draw(st.integers(1, 2))) for device in devices]
    detected = {
        "fabric": fabric,
        "active_ports": [] if fabric == "none" else ports,
        "down_ports": [],
        "netdevs": [],
        "gid_index": draw(st.integers(0, 15)) if fabric == "roce" else None,
        "libfabric_efa": True if fabric == "efa" else None,
        "warnings": [],
    }
    interfaces = ["lo"] + draw(st.lists(_IFACE, min_size=1, max_size=4, unique=True))
    socket_ifname = draw(st.one_of(st.none(), st.sampled_from(interfaces[1:])))
    return detected, interfaces, socket_ifname


@settings(max_examples=200, deadline=None)
@given(_consistent_host(), st.booleans(), st.booleans())
def test_build_env_always_validates_clean_for_a_consistent_host(host, force_net, gdr):
    detected, interfaces, socket_ifname = host
    require_gdr = gdr and detected["fabric"] != "none"
    env = ne.build_env(detected, interfaces, socket_ifname, force_net, require_gdr)
    assert ne.validate(env, detected, interfaces, require_gdr) == ([], [])
    if socket_ifname:
        assert ne.match_if_filter(env["NCCL_SOCKET_IFNAME"], interfaces) == [socket_ifname]
    if detected["fabric"] in ("ib", "roce"):
        assert ne.match_hca_filter(env["NCCL_IB_HCA"], detected["active_ports"]) == detected["active_ports"]


# ---------------------------------------------------------------------------------------------
# /etc/nccl.conf


def _read_like_nccl(text):
    """NCCL's reader: skip '#' lines, split at the first '=', take the rest verbatim."""
    result = {}
    for line in text.splitlines():
        if line.startswith("#") or "=" not in line:
            continue
        key, _sep, value = line.partition("=")
        result[key] = value
    return result


def test_render_nccl_conf_writes_raw_sorted_nccl_lines_only():
    env = {
        "NCCL_NET": "AWS Libfabric",
        "FI_PROVIDER": "efa",
        "NCCL_SOCKET_IFNAME": "=eth0",
        "NCCL_CONF_FILE": "/etc/nccl.conf",
        "NCCL_DEBUG": None,
        "CUDA_VISIBLE_DEVICES": "0",
    }
    text = ne.render_nccl_conf(env)
    body = [line for line in text.splitlines() if not line.startswith("#")]
    assert body == ["NCCL_NET=AWS Libfabric", "NCCL_SOCKET_IFNAME==eth0"]
    assert all("=" not in line for line in text.splitlines() if line.startswith("#"))
    assert _read_like_nccl(text) == {"NCCL_NET": "AWS Libfabric", "NCCL_SOCKET_IFNAME": "=eth0"}
    assert ne.render_nccl_conf({}, header="") == "\n"


def test_render_nccl_conf_refuses_what_nccl_would_misread():
    with pytest.raises(ValueError, match="line break"):
        ne.render_nccl_conf({"NCCL_DEBUG": "INFO\nNCCL_NET=Socket"})
    with pytest.raises(ValueError, match="at most 1023"):
        ne.render_nccl_conf({"NCCL_TOPO_FILE": "/" + "x" * 1023})
    with pytest.raises(ValueError, match="must not contain '='"):
        ne.render_nccl_conf({}, header="written with A=B")
