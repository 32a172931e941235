"""Counters, readings, energy regions and region markers through the real msrd."""
import os
import pydoc
import threading
import time

import pytest

import haecer
from conftest import run_python


def test_energy_reading_has_joules_and_uncertainty(msrd):
    counter = haecer.energy("energy-pkg", cpu=0)
    first = counter.read()
    second = counter.read()
    assert counter.is_energy and counter.simulated
    assert first.simulated and haecer.simulated()
    assert second.value >= first.value
    assert first.joules == pytest.approx(first.value * counter.unit)
    # One register update at the domain's maximum power (35 W on the simulated Sandy Bridge).
    assert 0 < first.uncertainty_joules < 0.1
    now = time.clock_gettime_ns(time.CLOCK_MONOTONIC_RAW)
    # When the value was true: msrd's page sample, at most a few sampling periods old.
    assert now - 50_000_000 < first.timestamp_ns <= now
    counter.close()


def test_event_counts_instructions_of_this_cpu(msrd):
    with haecer.event("instructions:u") as counter:
        before = counter.read()
        sum(range(200000))
        after = counter.read()
    assert before.joules is None and before.uncertainty_joules is None
    assert after.value > before.value


def test_closed_counters_give_their_slots_back(msrd):
    # More counters than the simulated CPU has (4 programmable + 3 fixed): each must be freed.
    for _ in range(20):
        counter = haecer.event("branch-misses", cpu=1)
        counter.read()
        counter.close()
    for _ in range(20):
        haecer.event("branch-misses", cpu=1).read()   # freed by its finaliser


def test_enable_disable_reset(msrd):
    counter = haecer.event("cycles", cpu=0)
    counter.reset()
    counter.disable()
    held = counter.read().value
    sum(range(100000))
    assert counter.read().value == held
    counter.enable()
    counter.close()
    with pytest.raises(haecer.NotConnected):
        counter.read()


def test_measure_gives_a_region_with_its_uncertainty(msrd):
    with haecer.measure("energy-pkg") as m:
        sum(range(300000))
    assert m.simulated
    assert m.seconds > 0
    assert m.uncertainty_joules > 0
    assert isinstance(m.joules, float)
    assert m.result.region_ticks > 0
    assert isinstance(m.reliable, bool) and isinstance(m.power_changed, bool)
    assert m.reliable == (m.doubt_reasons == 0)   # an unreliable result says why


def test_threads_each_measure(msrd):
    results, errors = [], []

    def work():
        try:
            with haecer.measure("energy-pkg") as m:
                sum(range(100000))
            results.append(m)
        except Exception as error:  # reported below, not swallowed
            errors.append(error)

    threads = [threading.Thread(target=work) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(results) == 3 and all(m.seconds > 0 for m in results)


def test_regions_reach_the_report(msrd, tmp_path):
    report = tmp_path / "regions.txt"
    code = """
import haecer
@haecer.region("parse")
def parse():
    return sum(range(100000))
for _ in range(3):
    parse()
with haecer.region("solve"):
    with haecer.region("inner"):
        sum(range(100000))
"""
    done = run_python(code, msrd.socket, HAECER_REGION_REPORT=str(report))
    assert done.returncode == 0, done.stderr
    text = report.read_text()
    rows = {line.split()[0]: line.split() for line in text.splitlines() if line.split()}
    assert rows["parse"][1] == "3"          # calls
    assert "solve" in rows and "inner" in rows
    assert os.path.exists(str(report) + ".json")


def test_help_reads_as_the_manual():
    text = pydoc.render_doc(haecer)
    for name in ("measure", "energy", "attach", "Denied", "to_dataframe"):
        assert name in text
