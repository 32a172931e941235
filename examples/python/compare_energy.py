#!/usr/bin/env python3
"""Which of two implementations of a function costs less energy? Measure each a number of times
with haecer.measure (startEnergyRead / endEnergyRead: regions shorter than a RAPL update are
fine) and plot the energy per call with its stated uncertainty.

    python3 examples/python/compare_energy.py [OUTPUT.png] [ROUNDS]

msrd must be running ($HAECER_SOCKET, or the system socket); on its simulated CPU the plot says
the joules are simulated. Needs matplotlib (Debian: python3-matplotlib).
"""
import statistics
import sys

import matplotlib

matplotlib.use("Agg")  # a file, no display needed
import matplotlib.pyplot as plt  # noqa: E402

import haecer  # noqa: E402

N = 20000


def squares_loop():
    total = 0
    for i in range(N):
        total += i * i
    return total


def squares_builtin():
    return sum(i * i for i in range(N))


def measure(function, rounds):
    joules, doubts = [], []
    for _ in range(rounds):
        with haecer.measure("energy-pkg") as m:
            function()
        joules.append(m.joules)
        doubts.append(m.uncertainty_joules)
    return joules, doubts, m.simulated


def main():
    output = sys.argv[1] if len(sys.argv) > 1 else "compare_energy.png"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    results = {f.__name__: measure(f, rounds) for f in (squares_loop, squares_builtin)}
    simulated = any(r[2] for r in results.values())
    figure, axes = plt.subplots(figsize=(6, 4))
    for position, (name, (joules, doubts, _)) in enumerate(results.items()):
        millijoules = [j * 1e3 for j in joules]
        axes.errorbar([position] * len(joules), millijoules, yerr=[d * 1e3 for d in doubts],
                      fmt="o", alpha=0.5, capsize=3)
        median = statistics.median(millijoules)
        axes.hlines(median, position - 0.2, position + 0.2, colors="black")
        print(f"{name}: median {median:.3f} mJ per call over {rounds} calls "
              f"(stated ± median {statistics.median(doubts) * 1e3:.3f} mJ)"
              + (" [simulated]" if simulated else ""))
    axes.set_xticks(range(len(results)), list(results))
    axes.set_ylabel("energy-pkg per call (mJ)")
    title = "Energy per call, with each result's stated ±"
    axes.set_title(title + (" (SIMULATED CPU: invented joules)" if simulated else ""),
                   fontsize=9)
    figure.tight_layout()
    figure.savefig(output, dpi=100)
    print(f"wrote {output}")


if __name__ == "__main__":
    main()
