"""answers.ReadOnce: each host variable read once, a result shared by all hosts read once in all."""

from collections.abc import Mapping

import pytest

from ansible_collections.raygate.cluster.plugins.plugin_utils import answers as an


class Counting(Mapping):
    """A host's variables that count every read, as ansible-core templates on every read."""

    def __init__(self, data, reads):
        self.data, self.reads = data, reads

    def __getitem__(self, name):
        self.reads[name] = self.reads.get(name, 0) + 1
        return self.data[name]

    def __contains__(self, name):  # as HostVarsVars: a membership test templates nothing
        return name in self.data

    def __iter__(self):
        return iter(self.data)

    def __len__(self):
        return len(self.data)


def hostvars(n, reads):
    pairs = {"nodes": {"10.0.0.%d" % i: {"checks": []} for i in range(n)}}
    return {"h%d" % i: Counting({"status": "checked", "pairs": pairs}, reads) for i in range(n)}


def test_each_variable_of_each_host_is_read_once():
    reads = {}
    view = an.ReadOnce(hostvars(3, reads))
    for _round in range(4):
        assert view["h1"]["status"] == "checked"
        assert view["h1"].get("status") == "checked"
    assert reads == {"status": 1}


def test_a_shared_result_is_read_from_one_host_only():
    reads = {}
    view = an.ReadOnce(hostvars(50, reads), shared=["pairs", None])
    for host in view:
        assert len(view[host]["pairs"]["nodes"]) == 50
    assert reads == {"pairs": 1}


def test_without_shared_every_host_reads_its_own():
    reads = {}
    view = an.ReadOnce(hostvars(5, reads))
    for host in view:
        view[host]["pairs"]
    assert reads == {"pairs": 5}


def test_absent_hosts_and_variables_stay_absent():
    reads = {}
    data = hostvars(2, reads)
    data["left"] = Counting({"status": "skipped"}, reads)
    view = an.ReadOnce(data, shared=["pairs"])
    assert view["h0"]["pairs"]
    # A host without the shared result does not get another host's.
    assert "pairs" not in view["left"]
    assert view["left"].get("pairs") is None
    with pytest.raises(KeyError):
        view["left"]["pairs"]
    assert "nobody" not in view and view.get("nobody", {}) == {}
    assert len(view) == 3 and sorted(view) == ["h0", "h1", "left"]
