"""haecer: measure energy and hardware counters from Python, safely and without root.

A Python face of libhaecer (the same library C programs link; no second implementation of
msrd's protocol). msrd, haecer's MSR server, decides by its policy what each user may read;
results from msrd's simulated CPU say so (``simulated``).

    import haecer

    haecer.connect()                          # optional: $HAECER_SOCKET or the system socket
    c = haecer.energy("energy-pkg", cpu=0)    # perf's names: energy-cores, energy-ram, ...
    r = c.read()                              # r.value, r.joules, r.uncertainty_joules,
                                              # r.timestamp_ns, r.simulated
    e = haecer.event("instructions:u")        # on the calling thread's CPU

    with haecer.measure("energy-pkg") as m:   # startEnergyRead / endEnergyRead
        work()
    m.joules, m.uncertainty_joules, m.seconds, m.simulated

    @haecer.region("parse")                   # region markers (or `with haecer.region(...)`)
    def parse(): ...

    c.monitor(10, 0)                          # every read of c goes into ring (10, 0)
    haecer.post(10, 0, event_id=1, value=42)  # an application event into that ring
    mon = haecer.attach(10, 0)                # a monitor, in any process the policy allows
    for rec in mon.read(timeout=1.0):
        rec.value, rec.id, rec.timestamp_ns
    mon.lost                                  # records missed, exact
    df = mon.to_dataframe(seconds=2.0)        # pandas: value, id, timestamp, joules, watts

Errors are exceptions carrying the C library's sentence: :class:`Denied` (msrd's policy),
:class:`Unavailable` (no such event or domain here), :class:`NotConnected` (no msrd), all
:class:`HaecerError`. Blocking calls release the GIL; any thread may measure.

The library is found at $HAECER_LIBRARY, else the source tree's build/libhaecer.so, else the
installed libhaecer.so.1. See man 3 haecer for what every figure means.
"""
from haecer._counters import (Counter, Measurement, Reading, connect, disconnect, energy, event,
                              measure, post, region, simulated)
from haecer._errors import Denied, HaecerError, NotConnected, Unavailable
from haecer._lib import lib as _library
from haecer._ring import Monitor, Record, attach

__version__ = (_library.haecer_version() or b"").decode()

__all__ = ["connect", "disconnect", "simulated", "energy", "event", "measure", "region",
           "attach", "post", "Counter", "Reading", "Measurement", "Monitor", "Record",
           "HaecerError", "Denied", "Unavailable", "NotConnected"]
