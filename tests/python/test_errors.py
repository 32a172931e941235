"""Failures are exceptions with the C library's sentence: a policy's refusal, an event the CPU
lacks, no msrd."""
import os

import pytest

import haecer
from conftest import Msrd, run_python

# Root may read the TSC and nothing else: energy is refused by the policy.
TIME_ONLY = """version: 1
default: deny
msrs:
  - {name: TSC, address: 0x10, read: true, set: time}
  - {name: RAPL_POWER_UNIT, address: 0x606, read: true, set: rapl}
  - {name: PKG_ENERGY, address: 0x611, read: true, set: rapl}
rules:
  - {match: {uid: 0}, allow: [time]}
"""

DENIED = """
import haecer
try:
    haecer.energy("energy-pkg", cpu=0).read()
except haecer.Denied as error:
    print("Denied:", error.errno, error.detail)
"""


def test_a_policy_refusal_raises_denied_with_its_words():
    server = Msrd(TIME_ONLY)
    try:
        done = run_python(DENIED, server.socket)
    finally:
        assert server.stop() == 0
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Denied:"), done.stdout + done.stderr
    assert "polic" in done.stdout      # msrd's sentence names the policy


def test_an_unknown_event_raises_unavailable(msrd):
    with pytest.raises(haecer.Unavailable) as raised:
        haecer.event("NO_SUCH_EVENT_ANYWHERE")
    assert "NO_SUCH_EVENT_ANYWHERE" in raised.value.detail


def test_no_msrd_raises_not_connected(tmp_path):
    done = run_python("""
import haecer
try:
    haecer.energy()
except haecer.NotConnected as error:
    print("NotConnected:", error)
""", str(tmp_path / "nobody-listens.sock"))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("NotConnected:")


def test_post_without_a_ring_is_an_error(msrd):
    with pytest.raises(haecer.NotConnected):
        haecer.post(77, 1, 1, 1)
