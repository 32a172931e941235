#!/usr/bin/python3
"""bench/python_read — what a read costs from Python: c.read() of an energy counter through
msrd's energy page (the haecer package over libhaecer), beside the same read in C
(bench/energy_read, same msrd, same run) and pyRAPL's method, Python reading a powercap
``energy_uj`` file (a stand-in file with the same interface: this machine has no powercap).
Not a test: it prints figures. Starts msrd on the simulated CPU with the shipped policy.

Last line: py_read_ns=… c_read_ns=… sysfs_read_ns=…
"""
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SOURCE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.abspath(os.environ.get("HAECER_BUILD") or os.path.join(SOURCE, "build"))
sys.path.insert(0, os.path.join(SOURCE, "python"))
BATCHES = 21
PER_BATCH = 20000


def per_call_ns(function, batches=BATCHES, per_batch=PER_BATCH):
    """Median over batches of the time per call, in ns."""
    function()
    samples = []
    for _ in range(batches):
        start = time.perf_counter_ns()
        for _ in range(per_batch):
            function()
        samples.append((time.perf_counter_ns() - start) / per_batch)
    return statistics.median(samples)


def start_msrd(directory):
    socket = os.path.join(directory, "msrd.sock")
    log = open(os.path.join(directory, "msrd.log"), "w", encoding="utf-8")
    process = subprocess.Popen(
        [os.path.join(BUILD, "msrd"), "--backend", "sim", "--foreground", "--log-level",
         "notice", "--socket", socket, "--state-dir", directory,
         "--policy", os.path.join(SOURCE, "configs", "policies", "default.yaml")],
        stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 20
    while not os.path.exists(socket):
        if process.poll() is not None or time.monotonic() > deadline:
            sys.exit("bench/python_read: msrd did not start")
        time.sleep(0.01)
    return process, socket


def main():
    directory = tempfile.mkdtemp(prefix="haecer-bench-")
    os.chmod(directory, 0o700)
    process, socket = start_msrd(directory)
    os.environ["HAECER_SOCKET"] = socket
    try:
        import haecer
        counter = haecer.energy("energy-pkg", cpu=0)
        py_ns = per_call_ns(counter.read)
        counter.close()
        haecer.disconnect()
        c_line = subprocess.run([os.path.join(BUILD, "bench", "energy_read")], check=True,
                                capture_output=True, text=True).stdout.splitlines()[-1]
        c_ns = float(c_line.partition("c_read_ns=")[2])
        energy_uj = os.path.join(directory, "energy_uj")
        with open(energy_uj, "w", encoding="ascii") as out:
            out.write("123456789012\n")

        def read_sysfs():
            with open(energy_uj, encoding="ascii") as stand_in:
                return int(stand_in.read())
        sysfs_ns = per_call_ns(read_sysfs, per_batch=PER_BATCH // 4)
    finally:
        process.terminate()
        process.wait(timeout=20)
        shutil.rmtree(directory, ignore_errors=True)
    print(f"Python c.read() of energy-pkg (energy page): {py_ns:8.0f} ns   (target <= 2000)")
    print(f"C haecer_counter_read, same msrd:            {c_ns:8.0f} ns   (ratio {py_ns / c_ns:.1f})")
    print(f"pyRAPL's method, Python reading energy_uj:   {sysfs_ns:8.0f} ns   "
          f"(Python read / that: {py_ns / sysfs_ns:.2f})")
    print(f"py_read_ns={py_ns:.0f} c_read_ns={c_ns:.1f} sysfs_read_ns={sysfs_ns:.0f}")


if __name__ == "__main__":
    main()
