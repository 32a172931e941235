"""Monitors (FERRET): follow a ring by (major, minor) with exact lost counts."""
from __future__ import annotations

import ctypes
import time
import weakref
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

from haecer._errors import check, error_of
from haecer._lib import (HAECER_RING_CLOCK_TSC, HAECER_RING_COUNTER_ENERGY, ConnP, ReaderP,
                         RingInfo, RingRecord, lib)

_BATCH = 1024
_POLL_SECONDS = 0.001
_WRAP_32 = 1 << 32


@dataclass(frozen=True)
class Record:
    """One ring record: a counter's reading (its counter id) or an application event (its
    event id, ``event`` true). timestamp_ns is in the ring's clock (CLOCK_MONOTONIC_RAW ns; a
    TSC ring's ticks converted with its frequency); unit_exponent > 0 marks energy
    (joules = value * 2^-unit_exponent)."""
    value: int
    id: int
    timestamp_ns: int
    event: bool
    unit_exponent: int
    flags: int


def _close_reader(handle: int) -> None:
    if handle:
        lib.haecer_ring_detach(handle)


class Monitor:
    """A reader of one ring, from :func:`attach`. ``lost`` counts, exactly, the records it
    missed (overwritten before it read them, or dropped by a producer): records read + lost =
    records pushed since it attached (from the oldest one still in the ring then)."""

    def __init__(self, major: int, minor: int, instance: int = 0,
                 socket: Optional[str] = None):
        conn = ConnP()
        reader = ReaderP()
        status = lib.haecer_connect(socket.encode() if socket else None, ctypes.byref(conn))
        if status < 0:
            raise error_of(status, "connect to msrd")
        status = lib.haecer_ring_attach(conn, major, minor, instance, ctypes.byref(reader))
        detail = (lib.haecer_conn_error(conn) or b"").decode(errors="replace")
        lib.haecer_close(conn)   # the reader keeps its own mapping of the ring
        if status < 0:
            raise error_of(status, f"attach to ring ({major}, {minor})", detail)
        self._reader = reader
        self._finalizer = weakref.finalize(self, _close_reader, reader.value)
        self._buffer = (RingRecord * _BATCH)()
        self._lost = ctypes.c_uint64(0)
        self.major, self.minor = major, minor
        info = self.info()
        self.instance: int = info.instance
        self.capacity: int = info.capacity
        self._tsc_hz: int = info.tsc_hz if info.clock == HAECER_RING_CLOCK_TSC else 0
        self._energy_ids = {info.counters[i].id: info.counters[i].unit_exponent
                            for i in range(min(info.counter_count, len(info.counters)))
                            if info.counters[i].kind == HAECER_RING_COUNTER_ENERGY}
        self.counter_names: Dict[int, str] = {
            info.counters[i].id: info.counters[i].name.decode(errors="replace")
            for i in range(min(info.counter_count, len(info.counters)))}

    @property
    def lost(self) -> int:
        """Records missed so far, exact."""
        return self._lost.value

    @property
    def producer_alive(self) -> bool:
        return bool(lib.haecer_ring_producer_alive(self._reader))

    def info(self) -> RingInfo:
        """The ring's description and counts (struct haecer_ring_info)."""
        info = RingInfo()
        lib.haecer_ring_reader_info(self._reader, ctypes.byref(info))
        return info

    def seek_newest(self) -> None:
        """Skip everything in the ring now: read only what is pushed from here on."""
        lib.haecer_ring_seek_newest(self._reader)

    def _timestamp_ns(self, timestamp: int) -> int:
        return timestamp * 1_000_000_000 // self._tsc_hz if self._tsc_hz else timestamp

    def _take(self, final: bool) -> List[Record]:
        read = lib.haecer_ring_read_final if final else lib.haecer_ring_read
        got = check(read(self._reader, self._buffer, _BATCH, ctypes.byref(self._lost)),
                    "read the ring")
        return [Record(r.value, r.id, self._timestamp_ns(r.timestamp), bool(r.event),
                       r.unit_exponent, r.flags) for r in self._buffer[:got]]

    def read(self, timeout: float = 1.0) -> List[Record]:
        """Every complete record the ring has for this reader, in push order; waits up to
        ``timeout`` seconds for the first one (an empty list when none came). Once the producer
        is gone, a record it left half-written is counted as lost, not waited for."""
        deadline = time.monotonic() + timeout
        while True:
            records = self._take(final=not self.producer_alive)
            if records:
                while len(records) % _BATCH == 0:
                    more = self._take(final=False)
                    if not more:
                        break
                    records.extend(more)
                return records
            if time.monotonic() >= deadline:
                return []
            time.sleep(_POLL_SECONDS)

    def __iter__(self):
        """Records as they come, until the producer is gone and the ring is drained."""
        while True:
            records = self.read(timeout=0.1)
            yield from records
            if not records and not self.producer_alive:
                return

    def to_dataframe(self, seconds: float = 2.0):
        """Follow the ring for ``seconds`` and return a pandas DataFrame with columns value,
        id, timestamp (ns), event, joules and watts. Joules and watts are computed as
        ``haecer-mon follow`` computes them (tools/mon/reading.c): joules = value *
        2^-unit_exponent for energy readings; watts from the previous reading of the same
        counter, over the difference of the timestamps, a 32-bit register's wrap undone.
        Needs pandas; without it, ImportError says so."""
        try:
            import pandas
        except ImportError as error:
            raise ImportError("haecer: Monitor.to_dataframe needs pandas (Debian: apt-get "
                              "install python3-pandas; pip install pandas)") from error
        rows = []
        previous: Dict[int, Tuple[int, int]] = {}
        until = time.monotonic() + seconds
        while time.monotonic() < until:
            for record in self.read(timeout=min(0.1, max(0.0, until - time.monotonic()))):
                rows.append(self._row(record, previous))
        return pandas.DataFrame(rows, columns=["value", "id", "timestamp", "event", "joules",
                                               "watts"])

    def _row(self, record: Record, previous: Dict[int, Tuple[int, int]]):
        exponent = record.unit_exponent or self._energy_ids.get(record.id, 0)
        energy = not record.event and (record.id in self._energy_ids or record.unit_exponent != 0)
        joules = watts = None
        if energy:
            joules = record.value * 2.0 ** -exponent
            if record.id in previous:
                last_value, last_time = previous[record.id]
                delta = record.value - last_value
                if delta < 0 and last_value < _WRAP_32:
                    delta += _WRAP_32
                if delta >= 0 and record.timestamp_ns > last_time:
                    watts = delta * 2.0 ** -exponent / ((record.timestamp_ns - last_time) / 1e9)
            previous[record.id] = (record.value, record.timestamp_ns)
        return (record.value, record.id, record.timestamp_ns, record.event, joules, watts)

    def close(self) -> None:
        """Detach from the ring."""
        self._finalizer()

    def __enter__(self) -> "Monitor":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def attach(major: int, minor: int, instance: int = 0, socket: Optional[str] = None) -> Monitor:
    """Attach to the ring (major, minor) of msrd's directory (instance 0: the newest). The
    policy decides who may monitor which major; :class:`Denied` when it does not allow it."""
    return Monitor(major, minor, instance, socket)
