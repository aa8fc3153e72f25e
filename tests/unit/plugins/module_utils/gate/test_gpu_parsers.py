"""GPU tool parsers against small inline fixtures with the real structure, and against real samples."""

import glob
import os
import time

import pytest

from ansible_collections.raygate.cluster.plugins.module_utils.gate import gpu_parsers as gp

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
SAMPLES = os.path.join(REPO, "..", "shared", "samples")

# ------------------------------------------------------------------ nvidia-smi -q -x fixtures
HEAD = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">
<nvidia_smi_log>
\t<driver_version>535.161.08</driver_version>
\t<cuda_version>12.2</cuda_version>
\t<attached_gpus>%d</attached_gpus>
%s
</nvidia_smi_log>
"""

NEW_ECC = """<ecc_errors>
  <volatile>
    <sram_correctable>{sc}</sram_correctable><sram_uncorrectable>{su}</sram_uncorrectable>
    <dram_correctable>{dc}</dram_correctable><dram_uncorrectable>{du}</dram_uncorrectable>
  </volatile>
  <aggregate>
    <sram_correctable>0</sram_correctable><sram_uncorrectable>0</sram_uncorrectable>
    <dram_correctable>177</dram_correctable><dram_uncorrectable>{du}</dram_uncorrectable>
  </aggregate>
</ecc_errors>"""

OLD_ECC = """<ecc_errors>
  <volatile>
    <single_bit>
      <device_memory>5</device_memory><register_file>1</register_file><l1_cache>N/A</l1_cache>
      <l2_cache>2</l2_cache><texture_memory>0</texture_memory><total>8</total>
    </single_bit>
    <double_bit>
      <device_memory>2</device_memory><register_file>0</register_file><l1_cache>N/A</l1_cache>
      <l2_cache>1</l2_cache><texture_memory>0</texture_memory><total>3</total>
    </double_bit>
  </volatile>
  <aggregate>
    <single_bit><device_memory>N/A</device_memory><register_file>4</register_file><total>N/A</total></single_bit>
    <double_bit><device_memory>N/A</device_memory><total>N/A</total></double_bit>
  </aggregate>
</ecc_errors>"""

V13_ECC = """<ecc_errors>
  <volatile>
    <sram_correctable>0</sram_correctable><sram_uncorrectable_parity>1</sram_uncorrectable_parity>
    <sram_uncorrectable_secded>2</sram_uncorrectable_secded>
    <dram_correctable>0</dram_correctable><dram_uncorrectable>0</dram_uncorrectable>
  </volatile>
  <aggregate>
    <sram_correctable>0</sram_correctable><sram_uncorrectable_parity>0</sram_uncorrectable_parity>
    <sram_uncorrectable_secded>0</sram_uncorrectable_secded>
    <dram_correctable>0</dram_correctable><dram_uncorrectable>0</dram_uncorrectable>
    <sram_threshold_exceeded>Yes</sram_threshold_exceeded>
  </aggregate>
</ecc_errors>"""

GPU = """<gpu id="00000000:{bus}:00.0">
  <product_name>NVIDIA H100 80GB HBM3</product_name>
  <persistence_mode>{pm}</persistence_mode>
  <mig_mode><current_mig>{mig}</current_mig><pending_mig>Disabled</pending_mig></mig_mode>
  <uuid>GPU-{bus}</uuid>
  <minor_number>{minor}</minor_number>
  <pci>
    <pci_bus_id>00000000:{bus}:00.0</pci_bus_id>
    <pci_gpu_link_info>
      <pcie_gen><max_link_gen>5</max_link_gen><current_link_gen>{gen}</current_link_gen></pcie_gen>
      <link_widths><max_link_width>16x</max_link_width><current_link_width>{width}</current_link_width></link_widths>
    </pci_gpu_link_info>
  </pci>
  <{reasons}>
    <{reason}_gpu_idle>Not Active</{reason}_gpu_idle>
    <{reason}_sw_power_cap>{swpc}</{reason}_sw_power_cap>
    <{reason}_hw_slowdown>{hws}</{reason}_hw_slowdown>
    <{reason}_hw_thermal_slowdown>{hwts}</{reason}_hw_thermal_slowdown>
    <{reason}_sw_thermal_slowdown>{swts}</{reason}_sw_thermal_slowdown>
  </{reasons}>
  <ecc_mode><current_ecc>{ecc_mode}</current_ecc><pending_ecc>Enabled</pending_ecc></ecc_mode>
  {ecc}
  <retired_pages>
    <multiple_single_bit_retirement><retired_count>{rsb}</retired_count><retired_pagelist></retired_pagelist>
    </multiple_single_bit_retirement>
    <double_bit_retirement><retired_count>{rdb}</retired_count><retired_pagelist></retired_pagelist>
    </double_bit_retirement>
    <pending_blacklist>No</pending_blacklist>
    <pending_retirement>{rpend}</pending_retirement>
  </retired_pages>
  {remap}
  <temperature><gpu_temp>{temp}</gpu_temp><gpu_temp_max_threshold>92 C</gpu_temp_max_threshold></temperature>
  {fabric}
</gpu>"""

REMAP = """<remapped_rows>
    <remapped_row_corr>{c}</remapped_row_corr><remapped_row_unc>{u}</remapped_row_unc>
    <remapped_row_pending>{p}</remapped_row_pending><remapped_row_failure>{f}</remapped_row_failure>
  </remapped_rows>"""

FABRIC = "<fabric><state>{s}</state><status>{t}</status></fabric>"


def gpu_xml(**kw):
    v = {
        "bus": "18",
        "pm": "Enabled",
        "mig": "Disabled",
        "minor": "0",
        "gen": "5",
        "width": "16x",
        "reasons": "clocks_event_reasons",
        "reason": "clocks_event_reason",
        "swpc": "Not Active",
        "hws": "Not Active",
        "hwts": "Not Active",
        "swts": "Not Active",
        "ecc_mode": "Enabled",
        "ecc": NEW_ECC.format(sc=0, su=0, dc=0, du=0),
        "rsb": "N/A",
        "rdb": "N/A",
        "rpend": "N/A",
        "remap": REMAP.format(c=0, u=0, p="No", f="No"),
        "temp": "35 C",
        "fabric": FABRIC.format(s="Completed", t="Success"),
    }
    v.update(kw)
    return GPU.format(**v)


def doc(*gpus, attached=None):
    return HEAD % (len(gpus) if attached is None else attached, "\n".join(gpus))


def one(**kw):
    return gp.parse_nvsmi_xml(doc(gpu_xml(**kw)))["gpus"][0]


def test_header_and_identity_fields():
    out = gp.parse_nvsmi_xml(doc(gpu_xml(bus="18", minor="3"), gpu_xml(bus="2A", minor="1")))
    assert out["driver_version"] == "535.161.08"
    assert out["cuda_version"] == "12.2"
    assert out["attached_gpus"] == 2
    a, b = out["gpus"]
    assert (a["index"], b["index"]) == (0, 1)
    assert (a["minor_number"], b["minor_number"]) == (3, 1)
    assert a["uuid"] == "GPU-18" and b["pci_bus_id"] == "00000000:2A:00.0"
    assert a["name"] == "NVIDIA H100 80GB HBM3"
    assert a["persistence_mode"] == "Enabled" and a["ecc_mode_current"] == "Enabled"
    assert a["mig_mode"] == "Disabled"
    assert a["temperature_c"] == 35
    assert a["fabric"] == {"state": "Completed", "status": "Success"}


def test_healthy_gpu_has_zero_counters_and_no_faults():
    g = one()
    assert g["ecc_errors"]["volatile"] == {
        "sram_correctable": 0,
        "sram_uncorrectable": 0,
        "dram_correctable": 0,
        "dram_uncorrectable": 0,
    }
    assert g["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert g["pcie"] == {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16}
    reasons = g["clocks_event_reasons"]
    assert not any(reasons[k] for k in ("hw_slowdown", "hw_thermal_slowdown", "sw_thermal_slowdown", "sw_power_cap"))


def test_ecc_uncorrectable_new_schema():
    g = one(ecc=NEW_ECC.format(sc=4, su=1, dc=12, du=2))
    vol = g["ecc_errors"]["volatile"]
    assert (vol["sram_correctable"], vol["sram_uncorrectable"]) == (4, 1)
    assert (vol["dram_correctable"], vol["dram_uncorrectable"]) == (12, 2)
    assert g["ecc_errors"]["aggregate"]["dram_correctable"] == 177
    assert g["ecc_errors"]["aggregate"]["dram_uncorrectable"] == 2


def test_ecc_old_schema_maps_device_memory_to_dram_and_rest_to_sram():
    vol = one(ecc=OLD_ECC)["ecc_errors"]["volatile"]
    assert vol["dram_correctable"] == 5 and vol["sram_correctable"] == 3
    assert vol["dram_uncorrectable"] == 2 and vol["sram_uncorrectable"] == 1
    assert vol["single_bit_total"] == 8 and vol["double_bit_total"] == 3
    agg = one(ecc=OLD_ECC)["ecc_errors"]["aggregate"]
    # total N/A: SRAM is the sum of the locations that report; DRAM unknown.
    assert agg["sram_correctable"] == 4 and agg["dram_correctable"] is None
    assert agg["dram_uncorrectable"] is None and agg["sram_uncorrectable"] is None


def test_ecc_v13_sums_parity_and_secded():
    g = one(ecc=V13_ECC)
    assert g["ecc_errors"]["volatile"]["sram_uncorrectable"] == 3
    assert g["ecc_errors"]["aggregate"]["sram_uncorrectable"] == 0
    assert g["ecc_errors"]["aggregate"]["sram_threshold_exceeded"] is True


def test_ecc_disabled_counters_are_none():
    g = one(ecc_mode="Disabled", ecc=NEW_ECC.format(sc="N/A", su="N/A", dc="N/A", du="N/A"))
    assert g["ecc_mode_current"] == "Disabled"
    assert set(g["ecc_errors"]["volatile"].values()) == {None}


def test_ecc_errors_absent_gives_none_counters():
    g = one(ecc="")
    assert g["ecc_errors"]["volatile"]["dram_uncorrectable"] is None


def test_remap_pending():
    g = one(remap=REMAP.format(c=0, u=4, p="Yes", f="No"))
    assert g["remapped_rows"] == {"correctable": 0, "uncorrectable": 4, "pending": True, "failure": False}


def test_remap_failure():
    g = one(remap=REMAP.format(c=2, u=512, p="No", f="Yes"))
    assert g["remapped_rows"]["failure"] is True and g["remapped_rows"]["uncorrectable"] == 512


def test_remapped_rows_na_when_mig_or_pre_ampere():
    g = one(remap="<remapped_rows>N/A</remapped_rows>", mig="Enabled")
    assert g["remapped_rows"] == {"correctable": None, "uncorrectable": None, "pending": None, "failure": None}
    assert g["mig_mode"] == "Enabled"


def test_retired_pages_pending():
    g = one(rsb="3", rdb="1", rpend="Yes", remap="<remapped_rows>N/A</remapped_rows>")
    assert g["retired_pages"] == {"pending": True, "single_bit": 3, "double_bit": 1}


def test_retired_pages_na_on_ampere():
    assert one()["retired_pages"] == {"pending": None, "single_bit": None, "double_bit": None}


def test_pcie_downgraded():
    g = one(gen="3", width="8x")
    assert g["pcie"] == {"gen_current": 3, "gen_max": 5, "width_current": 8, "width_max": 16}


@pytest.mark.parametrize(
    "reasons, reason",
    [("clocks_event_reasons", "clocks_event_reason"), ("clocks_throttle_reasons", "clocks_throttle_reason")],
)
def test_thermal_and_hw_slowdown_vs_sw_power_cap(reasons, reason):
    hot = one(reasons=reasons, reason=reason, hws="Active", hwts="Active", swts="Active")["clocks_event_reasons"]
    assert hot["hw_slowdown"] is True and hot["hw_thermal_slowdown"] is True and hot["sw_thermal_slowdown"] is True
    assert hot["sw_power_cap"] is False
    capped = one(reasons=reasons, reason=reason, swpc="Active")["clocks_event_reasons"]
    assert capped["sw_power_cap"] is True
    assert capped["hw_slowdown"] is False and capped["hw_thermal_slowdown"] is False
    assert capped["gpu_idle"] is False


def test_missing_clock_reasons_are_none():
    text = doc(gpu_xml()).replace("clocks_event_reason", "something_else")
    reasons = gp.parse_nvsmi_xml(text)["gpus"][0]["clocks_event_reasons"]
    assert reasons["hw_slowdown"] is None and reasons["sw_power_cap"] is None


@pytest.mark.parametrize("na", ["N/A", "[N/A]", "Unknown Error", ""])
def test_na_values_become_none(na):
    g = one(temp=na, gen=na, width=na, pm=na, mig=na, fabric=FABRIC.format(s=na, t=na))
    assert g["temperature_c"] is None
    assert g["pcie"]["gen_current"] is None and g["pcie"]["width_current"] is None
    assert g["persistence_mode"] is None and g["mig_mode"] is None
    assert g["fabric"] is None


def test_fabric_absent_is_none_and_in_progress_kept():
    assert one(fabric="")["fabric"] is None
    assert one(fabric=FABRIC.format(s="In Progress", t="N/A"))["fabric"] == {"state": "In Progress", "status": None}


def test_attached_gpus_may_differ_from_gpu_elements():
    out = gp.parse_nvsmi_xml(doc(gpu_xml(), attached=4))
    assert out["attached_gpus"] == 4 and len(out["gpus"]) == 1


def test_bytes_input_and_encoding_declaration():
    text = doc(gpu_xml()).replace('<?xml version="1.0" ?>', '<?xml version="1.0" encoding="UTF-8"?>')
    assert gp.parse_nvsmi_xml(text.encode())["gpus"][0]["uuid"] == "GPU-18"


@pytest.mark.parametrize(
    "text",
    [
        '<?xml version="1.0"?><!DOCTYPE nvidia_smi_log [<!ENTITY a "aaaa">]><nvidia_smi_log>&a;</nvidia_smi_log>',
        '<?xml version="1.0"?><!DOCTYPE x SYSTEM "y.dtd" [<!ELEMENT x ANY>]><nvidia_smi_log/>',
        '<nvidia_smi_log><!ENTITY x "y"></nvidia_smi_log>',
    ],
)
def test_entities_and_inline_dtd_are_refused(text):
    with pytest.raises(ValueError):
        gp.parse_nvsmi_xml(text)


@pytest.mark.parametrize("text", ["", "not xml", "<other/>", "<nvidia_smi_log><gpu></nvidia_smi_log>"])
def test_bad_xml_raises_value_error(text):
    with pytest.raises(ValueError):
        gp.parse_nvsmi_xml(text)


# ------------------------------------------------------------------ nvidia-smi nvlink -s
NVLINK = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-aaaa)
\t Link 0: 26.562 GB/s
\t Link 1: <inactive>
\t Link 2: Down
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-bbbb)
NVML: Unable to retrieve NVLink information as all links are inactive
GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-cccc)
\t Link 0: 26.562 GB/s
"""


def test_nvlink_states():
    out = gp.parse_nvlink_status(NVLINK)
    assert sorted(out) == [0, 1, 2]
    assert out[0] == [
        {"link": 0, "state": "up", "speed_gbps": 26.562},
        {"link": 1, "state": "inactive", "speed_gbps": None},
        {"link": 2, "state": "down", "speed_gbps": None},
    ]
    assert out[1] == []
    assert out[2] == [{"link": 0, "state": "up", "speed_gbps": 26.562}]


def test_nvlink_empty_output():
    assert gp.parse_nvlink_status("") == {}


# ------------------------------------------------------------------ Xid lines
XIDS = """[  812.123456] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus.
[  900.5] nvidia 0000:18:00.0: some other line
[ 1001.000001] NVRM: Xid (PCI:0000:2a:00): 13, pid='<unknown>', name=<unknown>, Graphics SM Warp Exception
[ 1002.25] NVRM: Xid (PCI:0000:2A:00): 31, pid=77, name=train.py, Ch 00000010, intr 00000000. MMU Fault
"""


def test_xids_dmesg_boot_clock():
    out = gp.parse_xids(XIDS)
    assert [x["xid"] for x in out] == [79, 13, 31]
    first = out[0]
    assert first["pci"] == "0000:18:00" and first["pid"] == 1234 and first["name"] == "python"
    assert first["message"] == "GPU has fallen off the bus."
    assert first["timestamp"] == 812.123456 and first["clock"] == "boot"
    assert out[1]["pid"] is None and out[1]["name"] is None
    assert out[2]["pci"] == "0000:2a:00"
    assert out[2]["message"] == "Ch 00000010, intr 00000000. MMU Fault"


def test_xids_since_filters_dated_lines_only():
    text = XIDS + "NVRM: Xid (PCI:0000:18:00): 48, An uncorrectable double bit error\n"
    out = gp.parse_xids(text, since=1000.0)
    assert [x["xid"] for x in out] == [13, 31, 48]
    assert out[-1]["timestamp"] is None and out[-1]["pid"] is None
    assert out[-1]["message"] == "An uncorrectable double bit error"


def test_xids_iso_and_journal_and_unix_timestamps():
    text = "\n".join(
        [
            "kern  :warn  : 2025-01-21T04:41:44,500000+00:00 NVRM: Xid (PCI:0000:38:00): 43, pid=9, name=x, Ch 08",
            "2025-01-21T06:41:44+0200 host kernel: NVRM: Xid (PCI:0000:38:00): 63, pid=9, Row Remapper",
            "1737434504.25 host kernel: NVRM: Xid (PCI:0000:38:00): 94, pid=9, name=y, Contained",
        ]
    )
    out = gp.parse_xids(text)
    assert [x["clock"] for x in out] == ["wall", "wall", "wall"]
    assert out[0]["timestamp"] == pytest.approx(1737434504.5)
    assert out[1]["timestamp"] == pytest.approx(1737434504.0)
    assert out[2]["timestamp"] == pytest.approx(1737434504.25)
    assert [x["xid"] for x in gp.parse_xids(text, since=1737434504.3)] == [43]


def test_xids_dmesg_T_is_local_time():
    line = "[Sun Feb 23 16:24:18 2025] NVRM: Xid (PCI:0000:9b:00): 119, pid=5, name=n, Timeout"
    expected = time.mktime(time.strptime("Sun Feb 23 16:24:18 2025", "%a %b %d %H:%M:%S %Y"))
    assert gp.parse_xids(line)[0]["timestamp"] == expected


def test_xid_lists_and_classification():
    assert not set(gp.XID_FATAL_DEFAULT) & set(gp.XID_WARN_DEFAULT)
    for xid in (48, 63, 64, 74, 79, 92, 95, 119):
        assert xid in gp.XID_FATAL_DEFAULT and gp.classify_xid(xid) == "fail"
    for xid in (13, 31, 43, 45):
        assert xid in gp.XID_WARN_DEFAULT and gp.classify_xid(xid) == "warn"
    assert gp.classify_xid(999) == "warn"
    assert gp.classify_xid(13, fatal=[13]) == "fail"


# ------------------------------------------------------------------ dcgmi diag
DCGM_JSON = """{
  "DCGM Diagnostic": {
    "test_categories": [
      {"category": "Deployment", "tests": [
        {"name": "Denylist", "results": [{"gpu_ids": "0,1", "status": "PASS"}]},
        null,
        {"name": "Persistence Mode", "results": [{"gpu_ids": "0,1", "status": "SKIP", "info": "not checked"}]}
      ]},
      {"category": "Hardware", "tests": [
        {"name": "GPU Memory", "results": [
          {"gpu_id": "0", "status": "FAIL", "warnings": [{"warning": "GPU 0 has uncorrectable memory errors"}]},
          {"gpu_id": "1", "status": "PASS"}, null]}
      ]},
      {"category": "Stress", "tests": [
        {"name": "Targeted Power", "results": [{"gpu_id": 1, "status": "WARN", "warnings": ["power below target"]}]}
      ]}
    ],
    "version": "3.3.3"
  }
}"""


def test_dcgm_json_failure():
    out = gp.parse_dcgmi_diag("Successfully ran diagnostic\n" + DCGM_JSON)
    assert out["overall"] == "fail"
    by_name = dict((t["name"], t) for t in out["tests"])
    assert by_name["Denylist"] == {
        "name": "Denylist",
        "category": "Deployment",
        "status": "pass",
        "gpus": [0, 1],
        "info": "",
    }
    assert by_name["Persistence Mode"]["status"] == "skip" and by_name["Persistence Mode"]["info"] == "not checked"
    mem = by_name["GPU Memory"]
    assert mem["status"] == "fail" and mem["gpus"] == [0] and mem["category"] == "Hardware"
    assert "uncorrectable" in mem["info"]
    assert by_name["Targeted Power"]["status"] == "warn" and by_name["Targeted Power"]["gpus"] == [1]
    assert out["metadata"]["version"] == "3.3.3"


def test_dcgm_json_warn_and_pass_overall():
    warn = DCGM_JSON.replace('"FAIL"', '"PASS"')
    assert gp.parse_dcgmi_diag(warn)["overall"] == "warn"
    ok = warn.replace('"WARN"', '"PASS"')
    assert gp.parse_dcgmi_diag(ok)["overall"] == "pass"


def test_dcgm_json_runtime_error_fails():
    out = gp.parse_dcgmi_diag('{"runtime_error": "Error: unable to connect to host engine"}')
    assert out["overall"] == "fail" and out["tests"][0]["name"] == "runtime_error"


DCGM_TABLE = """Successfully ran diagnostic for group.
+---------------------------+------------------------------------------------+
| Diagnostic                | Result                                         |
+===========================+================================================+
|-----  Metadata  ----------+------------------------------------------------|
| DCGM Version              | 3.3.3                                          |
|-----  Deployment  --------+------------------------------------------------|
| Denylist                  | Pass                                           |
| Persistence Mode          | Skip                                           |
+-----  Integration  -------+------------------------------------------------+
| PCIe                      | Pass - GPUs: 0, 1, 3                           |
|                           | Fail - GPU: 2                                  |
| Warning                   | GPU 2 PCIe replay count exceeded the thresho   |
|                           | ld. Check the riser  |
|                           |  and the slot.                                 |
+-----  Hardware  ----------+------------------------------------------------+
| GPU Memory                | Pass - All                                     |
+-----  Stress  ------------+------------------------------------------------+
| Targeted Power            | Warn - GPU: 1                                  |
+---------------------------+------------------------------------------------+
"""


def test_dcgm_table_failure_with_wrapped_warning():
    out = gp.parse_dcgmi_diag(DCGM_TABLE)
    assert out["overall"] == "fail"
    assert out["metadata"] == {"DCGM Version": "3.3.3"}
    by_name = dict((t["name"], t) for t in out["tests"])
    assert [t["name"] for t in out["tests"]] == ["Denylist", "Persistence Mode", "PCIe", "GPU Memory", "Targeted Power"]
    assert by_name["Denylist"]["category"] == "Deployment" and by_name["Denylist"]["status"] == "pass"
    assert by_name["Persistence Mode"]["status"] == "skip"
    pcie = by_name["PCIe"]
    assert pcie["status"] == "fail" and pcie["gpus"] == [2] and pcie["category"] == "Integration"
    assert pcie["info"] == "GPU 2 PCIe replay count exceeded the threshold. Check the riser and the slot."
    assert by_name["GPU Memory"]["status"] == "pass" and by_name["GPU Memory"]["gpus"] == []
    assert by_name["Targeted Power"]["status"] == "warn" and by_name["Targeted Power"]["gpus"] == [1]


def test_dcgm_table_error_row_without_test_and_no_footer():
    text = "\n".join(DCGM_TABLE.splitlines()[:5]) + (
        "\n|-----  Deployment  --------+------------------------------------------------|"
        "\n| Error                     | GPU 5 has uncorrectable memory errors and row  |"
        "\n|                           |  remappings are pending                        |"
    )
    out = gp.parse_dcgmi_diag(text)
    assert out["overall"] == "fail"
    assert out["tests"] == [
        {
            "name": "Error",
            "category": "Deployment",
            "status": "fail",
            "gpus": [5],
            "info": "GPU 5 has uncorrectable memory errors and row remappings are pending",
        }
    ]


@pytest.mark.parametrize("text", ["", "Error: unable to establish a connection to the host engine", "{broken"])
def test_dcgm_nothing_found_raises(text):
    with pytest.raises(ValueError):
        gp.parse_dcgmi_diag(text)


# ------------------------------------------------------------------ real samples
needs_samples = pytest.mark.skipif(not os.path.isdir(SAMPLES), reason="shared samples not present")


def _sample(name):
    path = os.path.join(SAMPLES, name)
    if not os.path.exists(path):
        pytest.skip("sample %s not present" % name)
    with open(path) as f:
        return f.read()


@needs_samples
def test_every_xml_sample_parses():
    paths = glob.glob(os.path.join(SAMPLES, "nvsmi_qx_*.xml"))
    assert paths
    for path in paths:
        with open(path) as f:
            out = gp.parse_nvsmi_xml(f.read())
        assert out["gpus"] and out["driver_version"]


@needs_samples
def test_sample_rtxa5000_v13_ecc_disabled():
    out = gp.parse_nvsmi_xml(_sample("nvsmi_qx_2x_rtxa5000_v13_telegraf.xml"))
    assert out["driver_version"] == "590.44.01" and out["attached_gpus"] == 2 and len(out["gpus"]) == 2
    for g in out["gpus"]:
        assert g["ecc_mode_current"] == "Disabled"
        assert g["ecc_errors"]["volatile"]["dram_uncorrectable"] is None
        assert g["ecc_errors"]["volatile"]["sram_uncorrectable"] is None
        assert g["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}


@needs_samples
def test_sample_a100_mig_count_mismatch():
    out = gp.parse_nvsmi_xml(_sample("nvsmi_qx_a100_sxm4_80gb_mig_535_telegraf.xml"))
    assert out["driver_version"] == "535.54.03" and out["cuda_version"] == "12.2"
    assert out["attached_gpus"] == 4 and len(out["gpus"]) == 1
    g = out["gpus"][0]
    assert g["mig_mode"] == "Enabled" and g["ecc_mode_current"] == "Enabled"
    assert set(g["ecc_errors"]["volatile"].values()) == {0} and set(g["ecc_errors"]["aggregate"].values()) == {0}
    assert g["retired_pages"] == {"pending": None, "single_bit": None, "double_bit": None}
    assert set(g["remapped_rows"].values()) == {None}
    assert (g["pcie"]["gen_current"], g["pcie"]["width_current"]) == (4, 16)
    assert g["temperature_c"] == 27


@needs_samples
def test_sample_a10g_healthy():
    out = gp.parse_nvsmi_xml(_sample("nvsmi_qx_a10g_telegraf.xml"))
    assert out["attached_gpus"] == 1 and out["driver_version"] == "515.105.01"
    g = out["gpus"][0]
    assert g["ecc_mode_current"] == "Enabled" and set(g["ecc_errors"]["volatile"].values()) == {0}
    assert g["retired_pages"]["pending"] is None
    assert g["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}


@needs_samples
def test_sample_t4_page_retirement_and_throttle_schema():
    g = gp.parse_nvsmi_xml(_sample("nvsmi_qx_tesla_t4_telegraf.xml"))["gpus"][0]
    assert g["name"] == "Tesla T4" and g["ecc_mode_current"] == "Enabled"
    assert g["retired_pages"] == {"pending": False, "single_bit": 0, "double_bit": 0}
    assert set(g["remapped_rows"].values()) == {None}
    # older schema says clocks_throttle_reasons; same keys come out
    assert g["clocks_event_reasons"]["hw_slowdown"] is False and g["clocks_event_reasons"]["sw_power_cap"] is False


@needs_samples
def test_sample_nvlink():
    good = gp.parse_nvlink_status(_sample("nvsmi_nvlink_s_a100_good.txt"))
    assert list(good) == [7] and len(good[7]) == 12
    assert all(link["state"] == "up" and link["speed_gbps"] == 25.0 for link in good[7])
    bad = gp.parse_nvlink_status(_sample("nvsmi_nvlink_s_a100_inactive_links.txt"))
    assert bad == {6: []}


@needs_samples
def test_sample_xid119_gsp_timeout():
    out = gp.parse_xids(_sample("dmesg_xid119_gsp_timeout_h100_xe9680.txt"))
    assert len(out) == 5 and set(x["xid"] for x in out) == {119}
    assert set(x["pci"] for x in out) == {"0000:9b:00"}
    assert all(gp.classify_xid(x["xid"]) == "fail" for x in out)
    assert out[0]["pid"] == 2024380 and out[0]["name"] == "nvidia-smi" and out[0]["clock"] == "wall"
    assert out[-1]["timestamp"] > out[0]["timestamp"]


@needs_samples
def test_sample_xid13_43_app_fault_is_warn_only():
    out = gp.parse_xids(_sample("dmesg_xid13_43_app_fault.txt"))
    assert [x["xid"] for x in out] == [13] * 16 + [43]
    assert set(x["pci"] for x in out) == {"0000:38:00"}
    assert set(gp.classify_xid(x["xid"]) for x in out) == {"warn"}
    assert out[-1]["pid"] == 2924364 and out[-1]["name"] == "pt_main_thread"
    assert out[0]["timestamp"] == pytest.approx(1737434504.283302)


@needs_samples
def test_sample_xid48_63_94():
    out = gp.parse_xids(_sample("dmesg_xid48_63_94_dbe_rowremap.txt"))
    assert [x["xid"] for x in out[:3]] == [48, 63, 94] and set(x["xid"] for x in out) == {48, 63, 94}
    assert len(out) == 11 and set(x["pci"] for x in out) == {"0000:19:00"}
    assert gp.classify_xid(48) == "fail" and gp.classify_xid(63) == "fail"
    assert out[-1]["name"] == "python3.10" and out[-1]["pid"] == 1248209


@needs_samples
def test_sample_xid63_single_line():
    out = gp.parse_xids(_sample("dmesg_xid63_row_remapper_single_line_mleng.txt"))
    assert len(out) == 1
    assert out[0]["xid"] == 63 and out[0]["pci"] == "0000:10:1c" and out[0]["pid"] == 1896
    assert out[0]["timestamp"] is None and out[0]["message"].startswith("Row Remapper")
    assert gp.parse_xids(_sample("dmesg_xid63_row_remapper_single_line_mleng.txt"), since=1e12) == out


@needs_samples
def test_sample_dcgm_json_pass_with_prefix():
    out = gp.parse_dcgmi_diag(_sample("dcgmi_diag_json_dcgm310_8gpu_pass_with_warning_prefix.txt"))
    assert out["overall"] == "pass" and len(out["tests"]) == 10
    assert set(t["status"] for t in out["tests"]) == {"pass"}
    assert all(t["gpus"] == list(range(8)) for t in out["tests"])
    assert out["tests"][-1]["category"] == "Custom" and out["tests"][-1]["name"] == "software"
    assert "Page Retirement/Row Remap" in [t["name"] for t in out["tests"]]


@needs_samples
def test_sample_dcgm_table_pass():
    out = gp.parse_dcgmi_diag(_sample("dcgmi_diag_r2_p4de_8xA100_pass.txt"))
    assert out["overall"] == "pass" and len(out["tests"]) == 11
    assert out["metadata"]["Driver Version Detected"] == "535.104.12"
    assert out["metadata"]["GPU Device IDs Detected"].count("20b2") == 8
    cats = dict((t["name"], t["category"]) for t in out["tests"])
    assert cats["PCIe"] == "Integration" and cats["GPU Memory"] == "Hardware" and cats["Inforom"] == "Deployment"


@needs_samples
def test_sample_dcgm_gpu_memory_fail_thermal():
    out = gp.parse_dcgmi_diag(_sample("dcgmi_diag_r2_excerpt_gpu_memory_fail_thermal_mleng.txt"))
    assert out["overall"] == "fail" and len(out["tests"]) == 1
    mem = out["tests"][0]
    assert mem["name"] == "GPU Memory" and mem["status"] == "fail" and mem["gpus"] == [0]
    assert "Thermal violations totaling 13.3 seconds started" in mem["info"]
    assert "components." in mem["info"]


@needs_samples
def test_sample_dcgm_deployment_error_remap_pending():
    out = gp.parse_dcgmi_diag(_sample("dcgmi_diag_excerpt_deployment_error_row_remap_pending_mleng.txt"))
    assert out["overall"] == "fail"
    (err,) = out["tests"]
    assert err["category"] == "Deployment" and err["status"] == "fail" and err["gpus"] == [3]
    assert err["info"] == "GPU 3 has uncorrectable memory errors and row remappings are pending"


# ------------------------------------------------------------------ kernel log timestamps (added for gpu_health)
SYSLOG_XID = "Nov 21 09:59:00 node3 kernel: [ 1234.567890] NVRM: Xid (PCI:0000:18:00): 79, pid=1, name=a, Off the bus"


def _local(text, year):
    return time.mktime(time.strptime("%d %s" % (year, text), "%Y %b %d %H:%M:%S"))


def test_line_timestamp_prefers_the_syslog_date_over_boot_seconds():
    now = _local("Nov 21 10:00:00", 2025)
    assert gp.line_timestamp(SYSLOG_XID, now) == (_local("Nov 21 09:59:00", 2025), "wall")
    # parse_xids alone reads the bracketed boot seconds of the same line.
    assert gp.parse_xids(SYSLOG_XID)[0]["clock"] == "boot"


def test_line_timestamp_syslog_year_rolls_back_instead_of_into_the_future():
    now = _local("Jan  2 08:00:00", 2026)
    seconds, clock = gp.line_timestamp("Dec 31 23:00:00 node3 kernel: hello", now)
    assert clock == "wall" and seconds == _local("Dec 31 23:00:00", 2025)


def test_line_timestamp_other_forms_and_undated():
    assert gp.line_timestamp("[  812.5] node3 kernel: NVRM: Xid (PCI:0000:18:00): 79, x") == (812.5, "boot")
    iso = "2025-11-21T09:00:00.250000+00:00 node3 kernel: NVRM: Xid (PCI:0000:18:00): 13, x"
    assert gp.line_timestamp(iso) == (pytest.approx(1763715600.25), "wall")
    assert gp.line_timestamp("NVRM: Xid (PCI:0000:18:00): 13, at [ 99.0] 2030-01-01T00:00:00Z") == (None, None)
    assert gp.line_timestamp("Foo 21 09:59:00 not a month") == (None, None)


def test_kernel_log_xids_restamps_and_keeps_everything_else():
    text = "\n".join(
        [SYSLOG_XID, "Nov 21 09:59:01 node3 kernel: usb 1-1: new device", "[ 5.0] NVRM: Xid (PCI:0000:2a:00): 13, y"]
    )
    now = _local("Nov 21 10:00:00", 2025)
    out = gp.kernel_log_xids(text, now)
    assert [(x["xid"], x["clock"]) for x in out] == [(79, "wall"), (13, "boot")]
    assert out[0]["timestamp"] == _local("Nov 21 09:59:00", 2025) and out[0]["message"] == "Off the bus"
    assert out[1]["timestamp"] == 5.0 and out[1]["pci"] == "0000:2a:00"


def test_newest_timestamps_over_all_lines():
    now = _local("Nov 21 10:00:00", 2025)
    text = "\n".join([SYSLOG_XID, "Nov 21 09:59:30 node3 kernel: usb", "[ 7.0] a", "[ 9.5] b", "no stamp"])
    assert gp.newest_timestamps(text, now) == {"wall": _local("Nov 21 09:59:30", 2025), "boot": 9.5}
    assert gp.newest_timestamps("") == {"wall": None, "boot": None}
