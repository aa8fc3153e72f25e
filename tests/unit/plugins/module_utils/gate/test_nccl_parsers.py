"""nccl-tests tables, NCCL INFO transport lines and the checks judged from them."""

import os

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.gate import nccl_parsers as np_

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
SAMPLES = os.path.join(REPO, "..", "shared", "samples")

HEADER = """\
# Collective test starting: all_reduce_perf
# nThread 1 nGpus 1 minBytes 8 maxBytes 128 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1
#
# Using devices
#  Rank  0 Group  0 Pid   4101 on node-a device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  1 Group  0 Pid   4102 on node-a device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#  Rank  2 Group  0 Pid   3301 on node-b device  0 [0000:18:00] NVIDIA H100 80GB HBM3
#  Rank  3 Group  0 Pid   3302 on node-b device  1 [0000:2a:00] NVIDIA H100 80GB HBM3
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
"""
ROWS = [
    "        8             2     float     sum      -1    30.10    0.00    0.00      0    29.90    0.00    0.00      0",
    "       16             4     float     sum      -1    30.20    0.00    0.00      0    30.00    0.00    0.00      0",
    "       32             8     float     sum      -1    30.40    0.00    0.00      0    30.10    0.00    0.00      0",
    "       64            16     float     sum      -1    30.50    0.00    0.00      0    30.30    0.00    0.00      0",
    "      128            32     float     sum      -1    30.90    0.00    0.01      0    30.70    0.00    0.02      0",
]
TRAILER = """\
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 0.00600
#
# Collective test concluded: all_reduce_perf
"""

GDR_LOG = """\
node-a:4101:4150 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.1<0>
node-a:4101:4150 [0] NCCL INFO Using network IB
node-a:4101:4150 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
node-a:4101:4150 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0/GDRDMA
node-a:4101:4150 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/IB/1/GDRDMA
node-a:4101:4150 [0] NCCL INFO Channel 01/0 : 3[1] -> 0[0] [receive] via NET/IB/0/GDRDMA
node-a:4101:4150 [0] NCCL INFO comm 0x55d0 rank 0 nranks 4 cudaDev 0 busId 18000 - Init COMPLETE
"""
NO_GDR_LOG = """\
node-a:4101:4150 [0] NCCL INFO GPU Direct RDMA Disabled for HCA 0 'mlx5_0' (no module)
node-a:4101:4150 [0] NCCL INFO GPU Direct RDMA Disabled for HCA 1 'mlx5_1' (no module)
node-a:4101:4150 [0] NCCL INFO Using network IB
node-a:4101:4150 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/IB/0
node-a:4101:4150 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/IB/1
"""
SOCKET_LOG = """\
node-a:4101:4150 [0] NCCL INFO NET/IB : No device found.
node-a:4101:4150 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>
node-a:4101:4150 [0] NCCL INFO Using network Socket
node-a:4101:4150 [0] NCCL INFO Channel 00/0 : 3[1] -> 0[0] [receive] via NET/Socket/0
node-a:4101:4150 [0] NCCL INFO Channel 00/0 : 1[1] -> 2[0] [send] via NET/Socket/0
"""
SINGLE_NODE_LOG = """\
node-a:4101:4150 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth0
node-a:4101:4150 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
node-a:4101:4150 [0] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via SHM/direct/direct
"""


def _table(rows=None, trailer=TRAILER, header=HEADER):
    return header + "\n".join(ROWS if rows is None else rows) + "\n" + trailer


def _by_name(checks):
    return {check["name"]: check for check in checks}


def _mpi(text, rank=0):
    return "".join("[1,%d]<stdout>:%s\n" % (rank, line) for line in text.splitlines())


def _row(size, busbw, wrong="0", ip_busbw=None):
    ip = busbw if ip_busbw is None else ip_busbw
    return "%12d %13d %9s %7s %7d %8.1f %7.2f %7.2f %6s %8.1f %7.2f %7.2f %6s" % (
        size,
        size // 4,
        "float",
        "sum",
        -1,
        100.0,
        busbw / 2,
        busbw,
        wrong,
        100.0,
        ip / 2,
        ip,
        wrong,
    )


# ---------------------------------------------------------------------------- parse_nccl_tests


def test_healthy_table_parses_every_field():
    parsed = np_.parse_nccl_tests(_table())
    assert parsed["test"] == "all_reduce_perf"
    assert [row["size"] for row in parsed["rows"]] == [8, 16, 32, 64, 128]
    first = parsed["rows"][0]
    assert first["count"] == 2 and first["type"] == "float" and first["redop"] == "sum" and first["root"] == -1
    assert first["oop"] == {"time_us": 30.1, "algbw": 0.0, "busbw": 0.0, "wrong": 0, "error": None}
    assert parsed["rows"][-1]["ip"]["busbw"] == 0.02
    assert parsed["max_size_busbw"] == 0.02
    assert parsed["avg_busbw"] == 0.006
    assert parsed["out_of_bounds"] == 0
    assert parsed["wrong_total"] == 0
    assert parsed["aborted"] is False and parsed["errors"] == []
    assert parsed["nranks"] == 4
    assert parsed["devices"][2] == {
        "rank": 2,
        "host": "node-b",
        "pid": 3301,
        "device": 0,
        "bus_id": "0000:18:00",
        "name": "NVIDIA H100 80GB HBM3",
    }


def test_mpirun_and_srun_prefixes_are_stripped():
    plain = np_.parse_nccl_tests(_table())
    assert np_.parse_nccl_tests(_mpi(_table())) == plain
    srun = "".join("0: %s\n" % line for line in _table().splitlines())
    assert np_.parse_nccl_tests(srun) == plain


def test_wrong_values_are_counted_and_fail():
    rows = ROWS[:-1] + [_row(128, 0.01, wrong="7")]
    trailer = TRAILER.replace("0 OK", "14 FAILED")
    parsed = np_.parse_nccl_tests(_table(rows, trailer))
    assert parsed["wrong_total"] == 14
    assert parsed["out_of_bounds"] == 14
    check = _by_name(np_.judge(parsed, None))["nccl_wrong"]
    assert check["status"] == "fail" and check["value"] == 28 and check["threshold"] == 0


def test_na_wrong_column_is_none_and_skips_the_check():
    rows = [_row(size, 1.0, wrong="N/A") for size in (8, 16, 32, 64, 128)]
    parsed = np_.parse_nccl_tests(_table(rows, trailer="# Avg bus bandwidth    : 1.0\n"))
    assert all(row["oop"]["wrong"] is None and row["ip"]["wrong"] is None for row in parsed["rows"])
    assert parsed["wrong_total"] == 0
    assert parsed["aborted"] is False
    assert _by_name(np_.judge(parsed, None))["nccl_wrong"]["status"] == "skip"


def test_abort_mid_table_with_nccl_warn():
    text = _table(
        ROWS[:2]
        + [
            "node-b:3301:3350 [0] transport/net_ib.cc:1295 NCCL WARN NET/IB : Got completion from peer 10.0.0.1"
            " with status=12 opcode=0 len=0 vendor err 129 (Recv)",
            "node-a: Test NCCL failure common.cu:1005 'remote process exited or there was a network error / '",
            " .. node-a pid 4101: Test failure common.cu:891",
        ],
        trailer="",
    )
    parsed = np_.parse_nccl_tests(text)
    assert parsed["aborted"] is True
    assert [row["size"] for row in parsed["rows"]] == [8, 16]
    assert any("NCCL WARN" in error for error in parsed["errors"])
    assert any("Test NCCL failure" in error for error in parsed["errors"])
    check = _by_name(np_.judge(parsed, None))["nccl_completed"]
    assert check["status"] == "fail" and "NCCL WARN" in check["detail"]


def test_table_cut_short_without_any_message_is_an_abort():
    parsed = np_.parse_nccl_tests(_table(ROWS[:3], trailer=""))
    assert parsed["aborted"] is True
    assert parsed["errors"] == ["the result table stops at 32 bytes before maxBytes 128"]


def test_missing_trailer_after_the_last_size_is_not_an_abort():
    parsed = np_.parse_nccl_tests(_table(trailer=""))
    assert parsed["aborted"] is False and parsed["errors"] == []
    assert parsed["avg_busbw"] is None and parsed["out_of_bounds"] is None


def test_garbage_inside_the_table_is_an_error():
    rows = ROWS[:2] + ["Segmentation fault (core dumped)", "16 oops"] + ROWS[2:]
    parsed = np_.parse_nccl_tests(_table(rows))
    assert parsed["aborted"] is True
    assert "unexpected line in the result table: 16 oops" in parsed["errors"]
    assert len(parsed["rows"]) == 5


def test_nccl_warn_alone_is_a_warning_not_an_abort():
    rows = ROWS[:1] + ["node-a:4101:4150 [0] init.cc:1200 NCCL WARN Cuda failure 'out of memory'"] + ROWS[1:]
    parsed = np_.parse_nccl_tests(_table(rows))
    assert parsed["aborted"] is False
    assert len(parsed["errors"]) == 1
    assert _by_name(np_.judge(parsed, None))["nccl_completed"]["status"] == "warn"


def test_header_without_rows_and_empty_input():
    parsed = np_.parse_nccl_tests(_table(rows=[], trailer=""))
    assert parsed["aborted"] is True and parsed["rows"] == []
    empty = np_.parse_nccl_tests("")
    assert empty["rows"] == [] and empty["aborted"] is False and empty["max_size_busbw"] is None
    assert _by_name(np_.judge(empty, None))["nccl_completed"]["status"] == "fail"


def test_old_build_with_error_column_and_no_root():
    header = (
        "#                                                     out-of-place                       in-place\n"
        "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n"
        "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n"
    )
    row = "  4294967296    1073741824   float     sum   183834   23.36   43.81  5e-07   184216   23.31   43.72  5e-07"
    parsed = np_.parse_nccl_tests(_table([row], header=header))
    only = parsed["rows"][0]
    assert only["root"] is None and only["oop"]["wrong"] is None and only["oop"]["error"] == 5e-07
    assert parsed["max_size_busbw"] == 43.81
    assert _by_name(np_.judge(parsed, None))["nccl_wrong"]["status"] == "pass"


# ---------------------------------------------------------------------------- parse_transports


def test_gdrdma_channels():
    transports = np_.parse_transports(_mpi(GDR_LOG))
    assert transports["network"] == "IB" and transports["fallback"] is False
    net = [ch for ch in transports["channels"] if ch["transport"] == "NET"]
    assert len(net) == 3 and all(ch["net"] == "IB" and ch["gdr"] for ch in net)
    p2p = transports["channels"][0]
    assert p2p["transport"] == "P2P" and p2p["net"] is None and p2p["gdr"] is False
    assert (p2p["channel"], p2p["from"], p2p["to"], p2p["direction"]) == (0, "0", "1", None)
    assert net[1]["direction"] == "send" and net[1]["from_bus"] == "1"


def test_efa_spellings_with_a_space():
    log = (
        "h:1:2 [1] NCCL INFO Channel 00 : 1[101d0] -> 8[101c0] [send] via NET/AWS Libfabric/1/GDRDMA\n"
        "h:1:2 [1] NCCL INFO Channel 01/0 : 1[101d0] -> 8[101c0] [send] via NET/Libfabric/1/GDRDMA\n"
        "h:1:2 [1] NCCL INFO Channel 01/0 : 1[101d0] -> 8[101c0] [send] via NET/Libfabric/1/GDRDMA\n"
    )
    channels = np_.parse_transports(log)["channels"]
    assert [(ch["net"], ch["gdr"]) for ch in channels] == [("AWS Libfabric", True), ("Libfabric", True)]


def test_no_gdr_hcas_and_channels():
    transports = np_.parse_transports(NO_GDR_LOG)
    assert transports["gdr_disabled_hcas"] == ["mlx5_0", "mlx5_1"]
    assert not any(ch["gdr"] for ch in transports["channels"])
    checks = _by_name(np_.judge(np_.parse_nccl_tests(_table()), transports))
    assert checks["nccl_transport"]["status"] == "fail"
    assert checks["nccl_transport"]["value"] == "NET/IB"
    # only "not Socket" required: GDR off is then a warning, not a failure
    relaxed = _by_name(np_.judge(np_.parse_nccl_tests(_table()), transports, require="no_socket"))
    assert relaxed["nccl_transport"]["status"] == "warn"


def test_socket_fallback():
    transports = np_.parse_transports(SOCKET_LOG)
    assert transports["fallback"] is True and transports["network"] == "Socket"
    for require in ("GDRDMA", "no_socket", None):
        check = _by_name(np_.judge(np_.parse_nccl_tests(_table()), transports, require=require))["nccl_transport"]
        assert check["status"] == "fail" and "sockets" in check["detail"]


def test_socket_ifname_is_not_a_fallback_and_single_node_skips():
    transports = np_.parse_transports(SINGLE_NODE_LOG)
    assert transports["fallback"] is False and transports["network"] is None
    assert [ch["transport"] for ch in transports["channels"]] == ["P2P", "SHM"]
    check = _by_name(np_.judge(np_.parse_nccl_tests(_table()), transports))["nccl_transport"]
    assert check["status"] == "skip" and "single-node" in check["detail"]


# ---------------------------------------------------------------------------- judge


def test_low_busbw_fails_and_good_busbw_passes():
    rows = ROWS[:-1] + [_row(128, 455.5, ip_busbw=458.25)]
    parsed = np_.parse_nccl_tests(_table(rows))
    assert parsed["max_size_busbw"] == 458.25
    low = _by_name(np_.judge(parsed, None, min_busbw=460.0))["nccl_busbw"]
    assert low == {
        "name": "nccl_busbw",
        "status": "fail",
        "detail": "busbw 458.25 GB/s at 128 bytes is below 460.00 GB/s",
        "value": 458.25,
        "threshold": 460.0,
        "severity": "do-not-allocate",
    }
    assert _by_name(np_.judge(parsed, None, min_busbw=431.0))["nccl_busbw"]["status"] == "pass"
    assert _by_name(np_.judge(parsed, None))["nccl_busbw"]["status"] == "skip"


def test_healthy_run_passes_everything():
    checks = np_.judge(np_.parse_nccl_tests(_table()), np_.parse_transports(GDR_LOG), min_busbw=0.01)
    assert [check["name"] for check in checks] == ["nccl_busbw", "nccl_wrong", "nccl_completed", "nccl_transport"]
    assert [check["status"] for check in checks] == ["pass"] * 4
    assert set(checks[0]) == {"name", "status", "detail", "value", "threshold"}


def test_judge_rejects_unknown_requirement():
    with pytest.raises(ValueError):
        np_.judge(np_.parse_nccl_tests(_table()), None, require="RDMA")


def test_default_thresholds_shape():
    assert np_.DEFAULT_THRESHOLDS[("H100", "nvlink", "single_node")]["min_busbw"] == 460.0
    assert np_.DEFAULT_THRESHOLDS[("H200", "nvlink", "single_node")]["min_busbw"] == 431.0
    efa = np_.DEFAULT_THRESHOLDS[("H100", "efa", "2_node")]
    assert efa["reference_busbw"] == 487.0 and efa["min_busbw"] < efa["reference_busbw"]
    for entry in np_.DEFAULT_THRESHOLDS.values():
        assert entry["test"] == "all_reduce_perf" and entry["size"] == 17179869184


# ---------------------------------------------------------------------------- real samples

# name -> (rows, avg_busbw, max_size_busbw, largest size, nranks, network, NET channel forms)
SAMPLE_FACTS = {
    "nccltests_allreduce_2node_16xh100_gcp_a3mega_avg70.txt": (31, 70.742, 338.82, 8589934592, 16, None, []),
    "nccltests_allreduce_2node_g4dn_t4_efa_no_gdrdma_with_nccl_info.txt": (
        31,
        1.15327,
        3.12,
        1073741824,
        2,
        "AWS Libfabric",
        [("AWS Libfabric", False)],
    ),
    "nccltests_allreduce_2node_p4d_efa_gdrdma_with_nccl_info.txt": (
        30,
        11.2432,
        43.81,
        4294967296,
        16,
        "AWS Libfabric",
        [("AWS Libfabric", True)],
    ),
    "nccltests_allreduce_2node_p4de_slurm_table_no_avg.txt": (29, None, 78.33, 2147483648, None, None, []),
    "nccltests_allreduce_2node_p5_slurm_table_no_avg.txt": (32, None, 487.26, 17179869184, None, None, []),
    "nccltests_allreduce_2pod_eks_socket_fallback_excerpt.txt": (31, 0.733914, 2.0, 1073741824, None, "Socket", []),
    "nccltests_allreduce_p5_awsbatch_8B_16G_avg156.txt": (32, 156.742, 483.35, 17179869184, None, None, []),
}


def _sample(name):
    path = os.path.join(SAMPLES, name)
    if not os.path.exists(path):
        pytest.skip("sample %s not available" % name)
    with open(path) as handle:
        return handle.read()


@pytest.mark.parametrize("name", sorted(SAMPLE_FACTS))
def test_real_nccl_tests_samples(name):
    rows, avg, peak, largest, nranks, network, forms = SAMPLE_FACTS[name]
    text = _sample(name)
    parsed = np_.parse_nccl_tests(text)
    assert len(parsed["rows"]) == rows
    assert parsed["avg_busbw"] == avg
    assert parsed["max_size_busbw"] == peak
    assert parsed["rows"][-1]["size"] == largest
    assert parsed["nranks"] == nranks
    assert parsed["wrong_total"] == 0
    assert parsed["aborted"] is False and parsed["errors"] == []
    transports = np_.parse_transports(text)
    assert transports["network"] == network
    assert transports["fallback"] is (network == "Socket")
    net = sorted({(ch["net"], ch["gdr"]) for ch in transports["channels"] if ch["transport"] == "NET"})
    assert net == forms


def test_real_sample_verdicts():
    g4dn = _sample("nccltests_allreduce_2node_g4dn_t4_efa_no_gdrdma_with_nccl_info.txt")
    p4d = _sample("nccltests_allreduce_2node_p4d_efa_gdrdma_with_nccl_info.txt")
    socket = _sample("nccltests_allreduce_2pod_eks_socket_fallback_excerpt.txt")

    def transport(text, require):
        return _by_name(np_.judge(np_.parse_nccl_tests(text), np_.parse_transports(text), require=require))[
            "nccl_transport"
        ]["status"]

    # the meta files: g4dn must be flagged when GDRDMA is required, pass when only "not Socket" is
    assert transport(g4dn, "GDRDMA") == "fail"
    assert transport(g4dn, "no_socket") == "pass"
    assert transport(p4d, "GDRDMA") == "pass"
    assert transport(socket, "no_socket") == "fail"
    p4d_parsed = np_.parse_nccl_tests(p4d)
    assert p4d_parsed["rows"][-1]["ip"]["busbw"] == 43.72
    assert max(row["oop"]["error"] for row in p4d_parsed["rows"]) == 5e-07
    assert np_.parse_transports(p4d)["ofi_provider"] == "efa"


def test_real_nccl_info_ofi_plugin_falling_back_to_ib():
    text = _sample("nccl_info_2node_roce_gdrdma_ofi_plugin_fallback_to_ib.txt")
    transports = np_.parse_transports(text)
    assert transports["network"] == "IB" and transports["networks"] == ["IB"]
    assert transports["fallback"] is False
    net = [ch for ch in transports["channels"] if ch["transport"] == "NET"]
    assert net and all(ch["net"] == "IB" and ch["gdr"] for ch in net)
    assert sorted({ch["via"].split("/")[2] for ch in net}) == [str(n) for n in range(8)]
    assert transports["gdr_disabled_hcas"] == []
    assert np_.parse_nccl_tests(text)["nranks"] == 16
    check = _by_name(np_.judge(np_.parse_nccl_tests(text), transports))["nccl_transport"]
    assert check["status"] == "pass" and check["value"] == "NET/IB/GDRDMA"


# ---------------------------------------------------------------------------- model, fabric, default thresholds


def _devices(*names):
    return {"devices": [{"name": name} for name in names]}


@pytest.mark.parametrize(
    "names, model",
    [
        (["NVIDIA H100 80GB HBM3"], "H100"),
        (["NVIDIA H200"], "H200"),
        (["NVIDIA A100-SXM4-40GB"], "A100"),
        (["Tesla T4", "NVIDIA H100 80GB HBM3"], "H100"),
        (["NVIDIA L40S"], "L40S"),
        ([], None),
        (["NVIDIA Graphics Device"], None),
    ],
)
def test_gpu_model_of(names, model):
    assert np_.gpu_model_of(_devices(*names)) == model


@pytest.mark.parametrize(
    "log, fabric",
    [
        (GDR_LOG, "ib"),
        (SOCKET_LOG, "socket"),
        (
            "x:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.1<0>\n"
            "x:1:2 [0] NCCL INFO Using network IB\n",
            "roce",
        ),
        (
            "x:1:2 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)\n"
            "x:1:2 [0] NCCL INFO Using network AWS Libfabric\n"
            "x:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/AWS Libfabric/0/GDRDMA\n",
            "efa",
        ),
        ("x:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n", None),
        ("", None),
    ],
)
def test_fabric_of(log, fabric):
    assert np_.fabric_of(log) == fabric


def test_default_threshold_applies_only_to_a_matching_run():
    sixteen = 16 << 30
    assert np_.default_threshold("H100", None, "single_node", 8, sixteen)[0] == 460.0
    assert np_.default_threshold("H200", "ib", "single_node", None, None)[0] == 431.0
    assert np_.default_threshold("H100", "efa", "2_node", 16, sixteen)[0] == 462.0
    value, why = np_.default_threshold("H100", "efa", "2_node", 2, sixteen)
    assert value is None and "is for 16 GPUs, this run had 2; set min_busbw" in why
    value, why = np_.default_threshold("H100", None, "single_node", 8, 1 << 30)
    assert value is None and "this run stopped at 1073741824; set min_busbw" in why
    value, why = np_.default_threshold("H100", "ib", "2_node", 16, sixteen)
    assert value is None and why == "no default threshold for H100 2_node over ib; set min_busbw"
    assert "set gpu_model or min_busbw" in np_.default_threshold(None, "ib", "2_node")[1]
    assert "set fabric or min_busbw" in np_.default_threshold("H100", None, "2_node")[1]
    with pytest.raises(ValueError):
        np_.default_threshold("H100", "ib", "3_node")
