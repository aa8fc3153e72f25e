from ansible_collections.raygate.cluster.plugins.module_utils.waiter import noop_wait, wait_for


class FakeClock:
    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.sleeps.append(seconds)
        self.now += seconds


def test_returns_as_soon_as_done():
    fake = FakeClock()
    answers = iter([(False, 1), (False, 2), (True, 3)])
    ok, result, elapsed = wait_for(lambda: next(answers), 60, 2, clock=fake.clock, sleep=fake.sleep)
    assert (ok, result, elapsed) == (True, 3, 4.0)
    assert fake.sleeps == [2, 2]


def test_times_out_with_last_result_and_never_oversleeps():
    fake = FakeClock()
    progress = []
    ok, result, elapsed = wait_for(
        lambda: (False, "x"), 5, 2, clock=fake.clock, sleep=fake.sleep, on_progress=lambda r, e: progress.append(e)
    )
    assert ok is False and result == "x"
    assert elapsed == 5.0
    assert fake.sleeps == [2, 2, 1]  # the last sleep is cut to the remaining time
    assert progress == [0.0, 2.0, 4.0, 5.0]


def test_noop_wait_asks_once():
    calls = []

    def pred():
        calls.append(1)
        return False, "now"

    assert noop_wait(pred, 100, 1) == (False, "now", 0.0)
    assert len(calls) == 1
