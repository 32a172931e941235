"""ctypes bindings of libhaecer: the library, the C structs, the prototypes.

Private to the package. Every struct mirrors a struct of <haecer/haecer.h>, <haecer/msrd.h> or
<haecer/ring.h> field for field (tests/python/test_abi.py compares their sizes and offsets with
what the C compiler says). Calls go through ctypes.CDLL, which releases the GIL around each one.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import (POINTER, Structure, c_bool, c_char, c_char_p, c_double, c_int, c_int16,
                    c_int32, c_size_t, c_ssize_t, c_uint, c_uint8, c_uint16, c_uint32, c_uint64,
                    c_void_p)

LIBRARY_ENV = "HAECER_LIBRARY"
SONAME = "libhaecer.so.1"

HAECER_CPU_CURRENT = -1
HAECER_COUNTER_ENERGY = 3
HAECER_NAME_MAX = 32
HAECER_COUNTER_NAME_MAX = 160
HAECER_RING_MAX_COUNTERS = 16
HAECER_RING_CLOCK_TSC = 2
HAECER_RING_COUNTER_ENERGY = 1
HAECER_SMI_UNKNOWN = 0xFFFFFFFF


def _candidates():
    explicit = os.environ.get(LIBRARY_ENV)
    if explicit:
        yield explicit
        return
    try:  # installed by make install, which says where the library went
        from haecer._installed import LIBRARY
        yield LIBRARY
    except ImportError:  # run from the source tree: python/haecer/ -> build/libhaecer.so
        here = os.path.dirname(os.path.abspath(__file__))
        build = os.environ.get("HAECER_BUILD") or os.path.join(here, "..", "..", "build")
        yield os.path.join(build, "libhaecer.so")
    yield SONAME
    found = ctypes.util.find_library("haecer")
    if found:
        yield found


def load() -> ctypes.CDLL:
    """The first libhaecer that loads: $HAECER_LIBRARY, the build tree, the installed soname."""
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append(f"{path}: no such file")
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as error:
            errors.append(str(error))
    raise ImportError("haecer: cannot load libhaecer (set $HAECER_LIBRARY to its path): "
                      + "; ".join(errors))


class CounterInfo(Structure):
    _fields_ = [("name", c_char * HAECER_COUNTER_NAME_MAX), ("id", c_uint32), ("kind", c_uint16),
                ("hardware_index", c_uint16), ("cpu", c_uint32), ("package", c_int32),
                ("width", c_uint8), ("unit_exponent", c_int16), ("unit", c_double),
                ("unit_name", c_char_p), ("config", c_uint64), ("counter_address", c_uint32),
                ("enabled", c_bool), ("monitored", c_bool), ("major", c_uint16),
                ("minor", c_uint16), ("ring_instance", c_uint32), ("ring_capacity", c_uint32),
                ("simulated", c_bool), ("scaled", c_bool), ("core_type", c_char_p)]


class EnergyReading(Structure):
    _fields_ = [("value", c_uint64), ("joules", c_double), ("update_joules", c_double),
                ("watts_estimated", c_double), ("age_max_ns", c_uint64), ("estimated", c_bool),
                ("estimate_joules", c_double), ("estimate_uncertainty_joules", c_double),
                ("watts_last_update", c_double), ("watts_last_update_uncertainty", c_double),
                ("update_age_ns", c_uint64), ("update_bracket_ns", c_uint64)]


class EnergyRegion(Structure):
    _fields_ = [("start_total", c_uint64), ("start_tsc", c_uint64),
                ("start_update_tsc", c_uint64), ("start_poll_tsc", c_uint64),
                ("start_smi", c_uint64), ("start_bracket", c_uint64), ("active", c_bool),
                ("before_per_tick", c_double), ("before_doubt_per_tick", c_double),
                ("start_measurement_cpu_ns", c_uint64), ("start_measurement_nj", c_uint64),
                ("start_measurement_known", c_bool)]


class EnergyResult(Structure):
    _fields_ = [("joules", c_double), ("raw_joules", c_double), ("wait_joules", c_double),
                ("joules_per_tick", c_double), ("uncertainty_joules", c_double),
                ("region_ticks", c_uint64), ("wait_ticks", c_uint64), ("lead_ticks", c_uint64),
                ("tail_ticks", c_uint64), ("detected_wait_ticks", c_uint64),
                ("start_tsc", c_uint64), ("end_tsc", c_uint64), ("first_poll_tsc", c_uint64),
                ("last_poll_tsc", c_uint64), ("seconds", c_double), ("smi_count", c_uint32),
                ("smi_count_exact", c_bool), ("tsc_source", c_uint32), ("simulated", c_bool),
                ("before_joules_per_tick", c_double), ("after_joules_per_tick", c_double),
                ("span_joules_per_tick", c_double), ("power_changed", c_bool),
                ("reliable", c_bool), ("doubt_reasons", c_uint32),
                ("measurement_cpu_ns", c_uint64), ("measurement_joules", c_double),
                ("measurement_uncertainty_joules", c_double), ("measurement_known", c_bool)]


class RingRecord(Structure):
    _fields_ = [("value", c_uint64), ("timestamp", c_uint64), ("id", c_uint32),
                ("unit_exponent", c_int16), ("flags", c_uint16), ("event", c_bool)]


class RingCounter(Structure):
    _fields_ = [("name", c_char * HAECER_NAME_MAX), ("id", c_uint32), ("kind", c_uint16),
                ("unit_exponent", c_int16), ("package", c_int32), ("cpu", c_int32)]


class RingInfo(Structure):
    _fields_ = [("major", c_uint16), ("minor", c_uint16), ("instance", c_uint32),
                ("capacity", c_uint32), ("clock", c_uint32), ("tsc_hz", c_uint64),
                ("producer_pid", c_int32), ("pushed", c_uint64), ("lost", c_uint64),
                ("counter_count", c_uint32),
                ("counters", RingCounter * HAECER_RING_MAX_COUNTERS)]


# Opaque handles.
ContextP = c_void_p
CounterP = c_void_p
ConnP = c_void_p
ReaderP = c_void_p

_PROTOTYPES = {
    "haecer_strerror": (c_char_p, [c_int]),
    "haecer_error_detail": (c_char_p, []),
    "haecer_version": (c_char_p, []),
    "haecer_default_context": (c_int, [POINTER(ContextP)]),
    "haecer_shutdown": (None, []),
    "haecer_context_simulated": (c_bool, [ContextP]),
    "haecer_counter_open_named": (c_int, [ContextP, c_int, c_char_p, c_uint32, c_uint8,
                                          POINTER(CounterP)]),
    "haecer_counter_free": (None, [CounterP]),
    "haecer_counter_enable": (c_int, [CounterP]),
    "haecer_counter_disable": (c_int, [CounterP]),
    "haecer_counter_reset": (c_int, [CounterP]),
    "haecer_counter_read": (c_int, [CounterP, POINTER(c_uint64)]),
    "haecer_counter_read_aged": (c_int, [CounterP, POINTER(c_uint64), POINTER(c_uint64)]),
    "haecer_counter_read_energy": (c_int, [CounterP, POINTER(EnergyReading)]),
    "haecer_counter_info": (c_int, [CounterP, POINTER(CounterInfo)]),
    "haecer_counter_monitor": (c_int, [CounterP, c_uint16, c_uint16, c_uint32]),
    "haecer_energy_start": (c_int, [CounterP, POINTER(EnergyRegion)]),
    "haecer_energy_end": (c_int, [CounterP, POINTER(EnergyRegion), POINTER(EnergyResult)]),
    "haecer_region_begin_at": (c_int, [c_char_p, c_char_p, c_uint]),
    "haecer_region_end": (c_int, [c_char_p]),
    "haecer_ring_post": (c_int, [CounterP, c_uint32, c_uint64]),
    "haecer_connect": (c_int, [c_char_p, POINTER(ConnP)]),
    "haecer_close": (None, [ConnP]),
    "haecer_conn_error": (c_char_p, [ConnP]),
    "haecer_ring_attach": (c_int, [ConnP, c_uint16, c_uint16, c_uint32, POINTER(ReaderP)]),
    "haecer_ring_detach": (None, [ReaderP]),
    "haecer_ring_read": (c_ssize_t, [ReaderP, POINTER(RingRecord), c_size_t, POINTER(c_uint64)]),
    "haecer_ring_read_final": (c_ssize_t, [ReaderP, POINTER(RingRecord), c_size_t,
                                           POINTER(c_uint64)]),
    "haecer_ring_producer_alive": (c_bool, [ReaderP]),
    "haecer_ring_seek_newest": (None, [ReaderP]),
    "haecer_ring_reader_info": (None, [ReaderP, POINTER(RingInfo)]),
}


def bind(library: ctypes.CDLL) -> ctypes.CDLL:
    for name, (restype, argtypes) in _PROTOTYPES.items():
        function = getattr(library, name)
        function.restype = restype
        function.argtypes = argtypes
    return library


lib = bind(load())
