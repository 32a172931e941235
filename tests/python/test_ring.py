"""Monitors: rings written by a C program and by another Python process, exact lost counts,
and watts that match haecer-mon's."""
import csv
import io
import os
import subprocess
import sys
import time

import pytest

import haecer
from conftest import BUILD, python_env, run_python


def attach_when_listed(major, minor, seconds=10.0):
    deadline = time.monotonic() + seconds
    while True:
        try:
            return haecer.attach(major, minor)
        except haecer.Unavailable:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def test_follows_a_ring_a_c_program_writes(msrd):
    phases = subprocess.Popen([os.path.join(BUILD, "examples", "energy_phases"), "1", "30"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    monitor = attach_when_listed(30, 0)
    records = []
    deadline = time.monotonic() + 30
    # The producer is our child: once it exits (and is reaped) the rest is drained.
    while phases.poll() is None and time.monotonic() < deadline:
        records.extend(monitor.read(timeout=0.1))
    assert phases.wait(timeout=30) == 0, phases.stderr.read()
    assert not monitor.producer_alive
    records.extend(monitor.read(timeout=0))
    readings = [r for r in records if not r.event]
    assert len(readings) >= 15            # ten samples a second for two seconds, every domain
    assert monitor.lost == 0
    assert all(b.timestamp_ns >= a.timestamp_ns for a, b in zip(readings, readings[1:]))
    assert all(r.unit_exponent > 0 for r in readings)   # energy readings
    assert "energy-pkg" in monitor.counter_names.values()


PRODUCER = """
import sys, haecer
counter = haecer.energy("energy-pkg", cpu=0)
counter.monitor(31, 0, capacity=64)
print("ready", flush=True)
sys.stdin.readline()
for value in range(1000):
    haecer.post(31, 0, 5, value)
print("done", flush=True)
sys.stdin.readline()
"""


def test_exact_lost_count_from_a_python_producer(msrd):
    producer = subprocess.Popen([sys.executable, "-c", PRODUCER], env=python_env(msrd.socket),
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert producer.stdout.readline().strip() == "ready"
        monitor = haecer.attach(31, 0)
        assert monitor.capacity == 64
        producer.stdin.write("go\n")
        producer.stdin.flush()
        assert producer.stdout.readline().strip() == "done"
        records = monitor.read(timeout=1.0)
        # The ring holds 64: the monitor read nothing while 1000 were posted.
        values = [r.value for r in records]
        assert all(r.event and r.id == 5 for r in records)
        assert len(records) + monitor.lost == 1000
        assert monitor.lost >= 1000 - 64
        assert values == sorted(values) and values[-1] == 999
        assert monitor.info().pushed == 1000
    finally:
        producer.stdin.write("exit\n")
        producer.stdin.flush()
        assert producer.wait(timeout=30) == 0


def test_dataframe_watts_match_haecer_mon(msrd):
    pytest.importorskip("pandas")
    phases = subprocess.Popen([os.path.join(BUILD, "examples", "energy_phases"), "2", "32"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    monitor = attach_when_listed(32, 0)
    mon = subprocess.Popen([os.path.join(BUILD, "haecer-mon"), "follow", "32", "0", "--format",
                            "csv", "--duration", "3"], stdout=subprocess.PIPE, text=True)
    frame = monitor.to_dataframe(seconds=3.0)
    output, _ = mon.communicate(timeout=30)
    phases.wait(timeout=30)
    rows = list(csv.DictReader(io.StringIO(output)))
    theirs = {(int(r["timestamp"]), int(r["counter_id"])): float(r["watts"]) for r in rows
              if r.get("type") == "record" and r.get("watts")}
    ours = {(int(t), int(i)): w for t, i, w in zip(frame["timestamp"], frame["id"],
                                                   frame["watts"]) if w == w and w is not None}
    common = set(theirs) & set(ours)
    assert len(common) >= 10
    for key in common:
        assert ours[key] == pytest.approx(theirs[key], rel=1e-3, abs=1e-3)
    assert set(frame.columns) >= {"value", "id", "timestamp", "joules", "watts"}


BLOCKED_PANDAS = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("No module named 'pandas'")
        return None
sys.meta_path.insert(0, Block())
import haecer
counter = haecer.energy("energy-pkg", cpu=0)
counter.monitor(33, 0)
monitor = haecer.attach(33, 0)
try:
    monitor.to_dataframe(seconds=0.1)
except ImportError as error:
    print("ImportError:", error)
"""


def test_without_pandas_the_error_says_so(msrd):
    done = run_python(BLOCKED_PANDAS, msrd.socket)
    assert done.returncode == 0, done.stderr
    assert "ImportError: haecer: Monitor.to_dataframe needs pandas" in done.stdout
