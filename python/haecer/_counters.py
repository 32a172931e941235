"""Counters, readings, energy regions and region markers over libhaecer's default context."""
from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading
import time
import weakref
from typing import Callable, NamedTuple, Optional, TypeVar

from haecer._errors import NotConnected, check, error_of
from haecer._lib import (HAECER_COUNTER_ENERGY, HAECER_CPU_CURRENT, ContextP, CounterInfo,
                         CounterP, EnergyReading, EnergyRegion, EnergyResult, lib)

SOCKET_ENV = "HAECER_SOCKET"
_read_aged = lib.haecer_counter_read_aged
_clock_ns = time.clock_gettime_ns
_RAW = time.CLOCK_MONOTONIC_RAW
_lock = threading.Lock()
_generation = 0          # bumped whenever the default context is replaced
_monitored: "weakref.WeakValueDictionary[tuple[int, int], Counter]" = weakref.WeakValueDictionary()


def connect(socket: Optional[str] = None) -> None:
    """Connect to msrd: at ``socket``, else ``$HAECER_SOCKET``, else the system socket
    (/run/haecer/msrd.sock). Optional: the first counter connects by itself. Connecting again
    closes the earlier connection, and every counter set up through it stops working."""
    global _generation
    with _lock:
        if socket is not None:
            os.environ[SOCKET_ENV] = socket
        if _generation > 0:
            lib.haecer_shutdown()
        _generation += 1
        context = ContextP()
        status = lib.haecer_default_context(ctypes.byref(context))
    if status < 0:
        raise error_of(status, "connect")


def _context() -> ContextP:
    global _generation
    context = ContextP()
    with _lock:
        if _generation == 0:
            _generation = 1
        status = lib.haecer_default_context(ctypes.byref(context))
    check(status, "connect to msrd")
    return context


def disconnect() -> None:
    """Close the connection; counters set up before stop working. The next call connects anew."""
    global _generation
    with _lock:
        lib.haecer_shutdown()
        _generation += 1


def simulated() -> bool:
    """Whether msrd presents a simulated CPU: every value is then invented, not measured."""
    return bool(lib.haecer_context_simulated(_context()))


class Reading(NamedTuple):
    """One reading of a counter.

    value: the 64-bit count (events, or energy units); joules: energy counters only, else None;
    uncertainty_joules: how far a difference of two readings can be off (one register update
    at the domain's maximum power, plus one unit; None for event counts); timestamp_ns:
    CLOCK_MONOTONIC_RAW (the clock of ring records) when the value was true (msrd's sample
    behind an energy-page reading, the middle of the round trip otherwise; to a few µs, as
    haecer_counter_read_aged says); simulated: msrd's CPU is simulated.
    """
    value: int
    joules: Optional[float]
    uncertainty_joules: Optional[float]
    timestamp_ns: int
    simulated: bool


def _free(handle: int, generation: int) -> None:
    # A counter of an earlier connection was freed with it (haecer_shutdown).
    if handle and generation == _generation:
        lib.haecer_counter_free(handle)


class Counter:
    """A hardware event counter or an energy domain, opened by :func:`energy` or :func:`event`.

    Closed by :meth:`close`, by ``with`` or when garbage-collected.
    """

    def __init__(self, name: str, cpu: Optional[int]):
        handle = CounterP()
        context = _context()
        status = lib.haecer_counter_open_named(
            context, HAECER_CPU_CURRENT if cpu is None else cpu, name.encode(), 0, 0,
            ctypes.byref(handle))
        check(status, f"open {name!r}")
        self._handle = handle
        self._generation = _generation
        self._finalizer = weakref.finalize(self, _free, handle.value, _generation)
        info = self.info()
        self.name = name
        self.cpu: int = info.cpu
        self.is_energy: bool = info.kind == HAECER_COUNTER_ENERGY
        self.unit: float = info.unit
        self.simulated: bool = bool(info.simulated)
        self._value = ctypes.c_uint64()
        self._age = ctypes.c_uint64()
        self._value_ref = ctypes.byref(self._value)
        self._age_ref = ctypes.byref(self._age)
        self.update_joules: Optional[float] = None
        if self.is_energy:
            # One update at the domain's maximum power and one unit: the same for every read.
            reading = EnergyReading()
            check(lib.haecer_counter_read_energy(handle, ctypes.byref(reading)), "read")
            self.update_joules = reading.update_joules

    def _live(self) -> CounterP:
        if not self._finalizer.alive or self._generation != _generation:
            raise NotConnected(0, "the counter was closed, or its connection was", "counter")
        return self._handle

    def info(self) -> CounterInfo:
        """The C library's description of the counter (struct haecer_counter_info)."""
        info = CounterInfo()
        check(lib.haecer_counter_info(self._handle, ctypes.byref(info)), "counter info")
        return info

    def read(self) -> Reading:
        """Read the counter now. Energy: from msrd's energy page where it grants one (no round
        trip); events: one round trip to msrd. The value is as haecer_counter_read returns it."""
        if self._generation != _generation or not self._finalizer.alive:
            self._live()
        status = _read_aged(self._handle, self._value_ref, self._age_ref)
        if status < 0:
            raise error_of(status, "read")
        timestamp = _clock_ns(_RAW) - self._age.value
        value = self._value.value
        if self.is_energy:
            return Reading(value, value * self.unit, self.update_joules, timestamp,
                           self.simulated)
        return Reading(value, None, None, timestamp, self.simulated)

    def read_energy(self) -> EnergyReading:
        """An energy counter's full reading (struct haecer_energy_reading): the register's
        total, its uncertainty, and the estimate at the moment of the read from msrd's update
        brackets (precise edges), with its own uncertainty."""
        reading = EnergyReading()
        check(lib.haecer_counter_read_energy(self._live(), ctypes.byref(reading)), "read")
        return reading

    def enable(self) -> None:
        check(lib.haecer_counter_enable(self._live()), "enable")

    def disable(self) -> None:
        check(lib.haecer_counter_disable(self._live()), "disable")

    def reset(self) -> None:
        check(lib.haecer_counter_reset(self._live()), "reset")

    def monitor(self, major: int, minor: int, capacity: int = 0) -> None:
        """Publish every read of this counter into a new ring (major, minor) that monitors
        attach to (:func:`attach`, ``haecer-mon follow``); :func:`post` adds application
        events to it. FERRET's setupFerretMonitor."""
        check(lib.haecer_counter_monitor(self._live(), major, minor, capacity), "monitor")
        _monitored[(major, minor)] = self

    def post(self, event_id: int, value: int) -> None:
        """Post an application event into this counter's ring (it must be monitored)."""
        check(lib.haecer_ring_post(self._live(), event_id, value), "post")

    def close(self) -> None:
        """Release the counter (its slot goes back to msrd)."""
        self._finalizer()

    def __enter__(self) -> "Counter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<haecer.Counter {self.name!r} cpu={self.cpu}{' simulated' if self.simulated else ''}>"


def energy(domain: str = "energy-pkg", cpu: int = 0) -> Counter:
    """An energy counter: a RAPL domain by perf's name ("energy-pkg", "energy-cores",
    "energy-gpu", "energy-ram", "energy-psys") of the package of ``cpu``."""
    return Counter(domain, cpu)


def event(name: str, cpu: Optional[int] = None) -> Counter:
    """An event counter by name ("instructions:u", "cycles", libpfm4's names), on ``cpu`` or,
    with None, on the CPU the calling thread runs on now (the thread is not pinned: counters
    count their CPU, whatever runs on it)."""
    return Counter(name, cpu)


def post(major: int, minor: int, event_id: int, value: int) -> None:
    """Post an application event (an id and a value) into the ring (major, minor) that a
    counter of this process publishes to (:meth:`Counter.monitor`)."""
    counter = _monitored.get((major, minor))
    if counter is None:
        raise NotConnected(0, f"no counter of this process publishes to ring ({major}, {minor}); "
                              "call Counter.monitor first", "post")
    counter.post(event_id, value)


class Measurement:
    """An energy region (startEnergyRead / endEnergyRead): use as ``with haecer.measure():``.

    After the block: joules, uncertainty_joules (what the method cannot resolve, widened to the
    powers seen around the region), seconds (the region's length on the TSC), simulated,
    reliable (false: the ± is as wide as the data allows, and doubt_reasons says why, as
    HAECER_ENERGY_DOUBT_* bits), power_changed, and result (the whole struct
    haecer_energy_result).
    The end waits one to two register updates (1-2 ms) to measure the power of its own wait.
    """

    def __init__(self, domain: str = "energy-pkg", cpu: int = 0):
        self.counter = energy(domain, cpu)
        self._region = EnergyRegion()
        self.result: Optional[EnergyResult] = None
        self.joules: Optional[float] = None
        self.uncertainty_joules: Optional[float] = None
        self.seconds: Optional[float] = None
        self.simulated: bool = self.counter.simulated
        self.reliable: Optional[bool] = None
        self.power_changed: Optional[bool] = None
        self.doubt_reasons: int = 0

    def __enter__(self) -> "Measurement":
        check(lib.haecer_energy_start(self.counter._live(), ctypes.byref(self._region)),
              "start an energy region")
        return self

    def __exit__(self, *exc) -> None:
        result = EnergyResult()
        status = lib.haecer_energy_end(self.counter._live(), ctypes.byref(self._region),
                                       ctypes.byref(result))
        self.counter.close()
        check(status, "end an energy region")
        self.result = result
        self.joules = result.joules
        self.uncertainty_joules = result.uncertainty_joules
        self.seconds = result.seconds
        self.simulated = bool(result.simulated)
        self.reliable = bool(result.reliable)
        self.power_changed = bool(result.power_changed)
        self.doubt_reasons = result.doubt_reasons


def measure(domain: str = "energy-pkg", cpu: int = 0) -> Measurement:
    """Measure the energy of a block: ``with haecer.measure("energy-pkg") as m: work()``."""
    return Measurement(domain, cpu)


F = TypeVar("F", bound=Callable)


class region:
    """A region marker: as a decorator (``@haecer.region("parse")``) or a block (``with
    haecer.region("parse"):``). Regions nest, per thread; libhaecer charges each its time,
    counters and energy (by the thread's CPU time) and writes the report at exit
    ($HAECER_REGION_REPORT, man 3 haecer)."""

    def __init__(self, name: str):
        caller = sys._getframe(1)
        self.name = name
        self._encoded = name.encode()
        self._file = caller.f_code.co_filename.encode()
        self._line = caller.f_lineno

    def __enter__(self) -> "region":
        _context()
        check(lib.haecer_region_begin_at(self._encoded, self._file, self._line),
              f"region {self.name!r}")
        return self

    def __exit__(self, *exc) -> None:
        check(lib.haecer_region_end(self._encoded), f"region {self.name!r}")

    def __call__(self, function: F) -> F:
        self._file = function.__code__.co_filename.encode()
        self._line = function.__code__.co_firstlineno

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            with self:
                return function(*args, **kwargs)
        return wrapper  # type: ignore[return-value]
