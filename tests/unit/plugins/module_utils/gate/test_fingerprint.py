"""The node fingerprint: parsed from nvidia-smi XML and ibstat (real samples too), sysfs, library names."""

import pytest
from real_samples import needs_samples, sample

from ansible_collections.raygate.cluster.plugins.module_utils._runner import CommandError
from ansible_collections.raygate.cluster.plugins.module_utils.gate import fingerprint as fp
from ansible_collections.raygate.cluster.plugins.module_utils.gate import gpu_parsers as gp


def nvsmi_sample(name):
    return gp.parse_nvsmi_xml(sample(name))


# ---- real nvidia-smi -q -x ---------------------------------------------------------------


@needs_samples
@pytest.mark.parametrize(
    "name, expected",
    [
        (
            "nvsmi_qx_2x_rtxa5000_v13_telegraf.xml",
            {
                "gpu_model": ["NVIDIA RTX A5000"],
                "gpu_count": 2,
                "driver": "590.44.01",
                "cuda": "13.1",
                "vbios": ["94.02.6D.00.0D"],
                "pcie_link": ["x16/x16"],
            },
        ),
        (
            # The header says 4 attached GPUs; the fixture kept one <gpu>: the count is what is listed.
            "nvsmi_qx_a100_sxm4_80gb_mig_535_telegraf.xml",
            {
                "gpu_model": ["NVIDIA A100-SXM4-80GB"],
                "gpu_count": 1,
                "driver": "535.54.03",
                "cuda": "12.2",
                "vbios": ["92.00.36.00.02"],
                "pcie_link": ["x16/x16"],
            },
        ),
        (
            # A virtualised A10G runs x8 of x16 by design: the fingerprint records it as it is.
            "nvsmi_qx_a10g_telegraf.xml",
            {
                "gpu_model": ["NVIDIA A10G"],
                "gpu_count": 1,
                "driver": "515.105.01",
                "cuda": "11.7",
                "vbios": ["94.02.75.00.01"],
                "pcie_link": ["x8/x16"],
            },
        ),
        (
            "nvsmi_qx_tesla_t4_telegraf.xml",
            {
                "gpu_model": ["Tesla T4"],
                "gpu_count": 1,
                "driver": "515.105.01",
                "cuda": "11.7",
                "vbios": ["90.04.84.00.06"],
                "pcie_link": ["x8/x16"],
            },
        ),
    ],
)
def test_gpu_fields_from_real_nvidia_smi_xml(name, expected):
    assert fp.from_nvsmi(nvsmi_sample(name)) == expected


@needs_samples
def test_two_real_nodes_on_different_drivers_differ_in_exactly_those_fields():
    a10g = fp.build(nvsmi_sample("nvsmi_qx_a10g_telegraf.xml"))
    t4 = fp.build(nvsmi_sample("nvsmi_qx_tesla_t4_telegraf.xml"))
    differ = [f for f in fp.FIELDS if fp.text(a10g[f]) != fp.text(t4[f])]
    assert differ == ["gpu_model", "vbios"]


# ---- real ibstat ------------------------------------------------------------------------


@needs_samples
@pytest.mark.parametrize(
    "name, expected",
    [
        # Eight ConnectX-7 on 28.41.1000 and a BlueField-3 bond on its own firmware.
        ("ibstat_h100_8xNDR400_all_active_plus_bond.txt", ["28.41.1000", "32.38.3056"]),
        # ibstat died (ibpanic, exit 255) after printing the CAs: their firmware still counts.
        ("ibstat_a100_azure_8xHDR_ibpanic_exit255.txt", ["20.41.1000"]),
    ],
)
def test_hca_firmware_from_real_ibstat(name, expected):
    assert fp.hca_firmware_from_ibstat(sample(name)) == expected


def test_hca_firmware_absent_or_empty_ibstat_is_none():
    assert fp.hca_firmware_from_ibstat(None) is None
    assert fp.hca_firmware_from_ibstat("ibpanic: [1234] main: stat of IB device 'mlx5_0' failed\n") is None


# ---- small readers ----------------------------------------------------------------------


def test_vbios_and_links_are_sets_over_gpus():
    def gpu(vbios, width):
        pcie = {"width_current": width, "width_max": 16}
        return {"name": "NVIDIA H100 80GB HBM3", "vbios_version": vbios, "pcie": pcie}

    nvsmi = {
        "driver_version": "550.90.07",
        "cuda_version": "12.4",
        "gpus": [gpu("96.00.74.00.0D", 16), gpu("96.00.99.00.01", 8), gpu("96.00.74.00.0D", None)],
    }
    out = fp.from_nvsmi(nvsmi)
    assert out["vbios"] == ["96.00.74.00.0D", "96.00.99.00.01"]
    assert out["pcie_link"] == ["x16/x16", "x8/x16"]
    assert out["gpu_count"] == 3


def test_no_nvidia_smi_leaves_the_gpu_fields_unread():
    out = fp.build(None, kernel="6.1.0-18-amd64")
    assert out == dict(fp.empty(), kernel="6.1.0-18-amd64")
    with pytest.raises(ValueError, match="unknown fingerprint fields: firmware"):
        fp.build(None, firmware="1")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("MLNX_OFED_LINUX-23.10-0.5.5.0:\n", "MLNX_OFED_LINUX-23.10-0.5.5.0"),
        ("\nOFED-internal-24.10-1.1.4:\n", "OFED-internal-24.10-1.1.4"),
        ("", None),
        (None, None),
    ],
)
def test_parse_ofed_info(text, expected):
    assert fp.parse_ofed_info(text) == expected


def test_kernel_from_the_boot_banner_of_journal_or_dmesg():
    journal = "[    0.000000] node3 kernel: Linux version 6.1.0-18-amd64 (debian-kernel@lists.debian.org) #1 SMP\n"
    assert fp.kernel_from_log("-- Journal begins --\n" + journal) == "6.1.0-18-amd64"
    dmesg = "[    0.000000] Linux version 5.15.0-105-generic (buildd@lcy02)\n"
    assert fp.kernel_from_log(dmesg) == "5.15.0-105-generic"
    assert fp.kernel_from_log("[ 12.5] nvidia: loading out-of-tree module\n") is None


def test_nccl_from_library_file_names(tmp_path):
    lib = tmp_path / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    for name in ("libnccl.so.2.21.5", "libnccl.so.2", "libnccl.so", "libnccl-net.so", "libnccl_static.a"):
        (lib / name).write_text("")
    assert fp.nccl_from_libs(str(tmp_path)) == ["2.21.5"]
    other = tmp_path / "opt" / "nccl" / "lib"
    other.mkdir(parents=True)
    (other / "libnccl.so.2.18.3").write_text("")
    assert fp.nccl_from_libs(str(tmp_path)) == ["2.18.3", "2.21.5"]
    assert fp.nccl_from_libs(str(tmp_path / "nowhere")) is None


def sysfs_hcas(root, firmware):
    for name, version in firmware.items():
        dev = root / "sys" / "class" / "infiniband" / name
        dev.mkdir(parents=True)
        if version is not None:
            (dev / "fw_ver").write_text(version + "\n")


def test_hca_firmware_from_sysfs(tmp_path):
    sysfs_hcas(tmp_path, {"mlx5_0": "28.39.1002", "mlx5_1": "28.41.1000", "mlx5_2": "28.39.1002", "efa_0": None})
    assert fp.hca_firmware_from_sysfs(str(tmp_path)) == ["28.39.1002", "28.41.1000"]
    assert fp.hca_firmware_from_sysfs(str(tmp_path / "none")) is None


class Runner:
    """Answers which() from ``tools`` and run() from ``answers`` ({argv[0]: (rc, out) or an exception})."""

    def __init__(self, tools, answers):
        self.tools, self.answers, self.ran = tools, answers, []

    def which(self, name, extra_dirs=()):
        return self.tools.get(name)

    def run(self, args):
        self.ran.append(list(args))
        answer = self.answers[args[0]]
        if isinstance(answer, Exception):
            raise answer
        return answer[0], answer[1], ""


def test_rdma_stack_prefers_ofed_info():
    runner = Runner(
        {"ofed_info": "/usr/bin/ofed_info", "dpkg-query": "/usr/bin/dpkg-query"},
        {"/usr/bin/ofed_info": (0, "MLNX_OFED_LINUX-23.10-0.5.5.0:\n")},
    )
    assert fp.rdma_stack(runner) == "MLNX_OFED_LINUX-23.10-0.5.5.0"
    assert runner.ran == [["/usr/bin/ofed_info", "-s"]]


def test_rdma_stack_falls_back_to_the_rdma_core_package():
    runner = Runner(
        {"ofed_info": "/usr/bin/ofed_info", "dpkg-query": "/usr/bin/dpkg-query"},
        {"/usr/bin/ofed_info": CommandError("cannot run"), "/usr/bin/dpkg-query": (0, "44.0-2")},
    )
    assert fp.rdma_stack(runner) == "rdma-core 44.0-2"
    assert runner.ran[-1] == ["/usr/bin/dpkg-query", "-W", "-f=${Version}", "rdma-core"]
    rpm = Runner({"rpm": "/usr/bin/rpm"}, {"/usr/bin/rpm": (0, "48.0-1.el9")})
    assert fp.rdma_stack(rpm) == "rdma-core 48.0-1.el9"
    assert rpm.ran == [["/usr/bin/rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}", "rdma-core"]]


def test_rdma_stack_not_installed_is_none_not_a_guess():
    missing = Runner({"dpkg-query": "/usr/bin/dpkg-query"}, {"/usr/bin/dpkg-query": (1, "")})
    assert fp.rdma_stack(missing) is None
    assert fp.rdma_stack(Runner({}, {})) is None


def test_read_live_runs_no_tool_without_rdma_devices(tmp_path):
    runner = Runner({"ofed_info": "/usr/bin/ofed_info"}, {"/usr/bin/ofed_info": (0, "MLNX_OFED_LINUX-5.8:\n")})
    assert fp.read_live(runner, str(tmp_path)) == {"hca_firmware": None, "rdma_stack": None, "nccl": None}
    sysfs_hcas(tmp_path, {"mlx5_0": "28.39.1002"})
    assert fp.read_live(runner, str(tmp_path), rdma=False)["rdma_stack"] is None
    assert runner.ran == []
    live = fp.read_live(runner, str(tmp_path))
    assert live == {"hca_firmware": ["28.39.1002"], "rdma_stack": "MLNX_OFED_LINUX-5.8", "nccl": None}


@pytest.mark.parametrize(
    "value, expected",
    [(None, None), ([], None), ("", None), (["b", "a"], "a, b"), (8, "8"), ("550.90.07", "550.90.07")],
)
def test_text_is_one_comparable_string(value, expected):
    assert fp.text(value) == expected


# ---- the short hash (the Ray node label raygate.io/fingerprint) ---------------------------

H100 = fp.build(
    {
        "driver_version": "550.90.07",
        "cuda_version": "12.4",
        "gpus": [{"name": "NVIDIA H100 80GB HBM3", "vbios_version": "96.00.74.00.0D"}] * 8,
    },
    hca_firmware=["28.39.1002"],
    rdma_stack="MLNX_OFED_LINUX-23.10-0.5.5.0",
    nccl=["2.21.5"],
    kernel="6.1.0-18-amd64",
)


def test_digest_is_pinned_so_labels_of_nodes_started_apart_stay_comparable():
    # Nodes started by different runs (or raygate versions) must hash equal versions alike: a
    # change of the canonical form is a breaking change, and this value says so.
    assert fp.digest(fp.empty()) == "d88dcaf0b538"
    assert fp.digest(H100) == fp.digest(dict(H100))
    assert len(fp.digest(H100)) == 12 and set(fp.digest(H100)) <= set("0123456789abcdef")


def test_digest_ignores_key_order():
    assert fp.digest(dict(reversed(list(H100.items())))) == fp.digest(H100)


@pytest.mark.parametrize("field", fp.FIELDS)
def test_digest_changes_with_any_field(field):
    changed = dict(H100)
    changed[field] = "something else"
    assert fp.digest(changed) != fp.digest(H100)


def test_digest_tells_an_unread_field_from_an_empty_one():
    assert fp.digest(dict(H100, nccl=None)) != fp.digest(dict(H100, nccl=[]))
