#!/usr/bin/env python3
"""Write docs/PERFORMANCE.md from the benchmarks' machine-readable last lines.

    scripts/bench-report.py SUMMARY [--previous docs/PERFORMANCE.md] [--out docs/PERFORMANCE.md]
                            [--readme README.md] [--load LOAD] [--carry]

SUMMARY holds one line per benchmark, "NAME: key=value key=value ..." (what
scripts/run-benches.sh prints under "== summary"). bench/figures.tsv says which keys each
table shows, beside which same-run baseline, against which target. The previous report's raw
lines (kept at its end) give the "previous" column, so a change shows; history is git's.
With --readme, the rows marked headline replace the table between the README's
"<!-- headline:begin -->" and "<!-- headline:end -->" markers.
With --carry (a run of only some benchmarks), every benchmark the run left out keeps the
previous report's figures, and its section says when they were measured.
"""
import argparse
import datetime
import os
import platform
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RAW_HEADING = "## Raw last lines"


def parse_line(text):
    """key=value pairs of one last line; values that are numbers become floats."""
    figures = {}
    for word in text.split():
        key, sep, value = word.partition("=")
        if not sep:
            continue
        try:
            figures[key] = float(value)
        except ValueError:
            figures[key] = value
    return figures


def read_summary(path):
    runs = {}
    with open(path, encoding="utf-8") as summary:
        for line in summary:
            name, sep, rest = line.strip().partition(": ")
            if sep and "=" in rest:
                runs[name] = (rest, parse_line(rest))
    return runs


def read_previous(path):
    """The raw last lines, the machine line and each benchmark's date of measurement of an
    earlier report, if there is one."""
    if not path or not os.path.exists(path):
        return {}, None, {}
    with open(path, encoding="utf-8") as report:
        text = report.read()
    machine = re.search(r"^Machine: (.*)$", text, re.M)
    date = re.search(r"^Date: (.*)$", text, re.M)
    measured = {name: when for name, when in re.findall(r"^## (\S+)\n\n_Measured (.*?)\._$",
                                                        text, re.M)}
    raw = text.partition(RAW_HEADING)[2]
    runs = {}
    for line in raw.splitlines():
        name, sep, rest = line.strip().partition(": ")
        if sep and "=" in rest:
            runs[name] = (rest, parse_line(rest))
            measured.setdefault(name, date.group(1) if date else "in an earlier report")
    return runs, machine.group(1) if machine else None, measured


def read_spec(path):
    rows = []
    with open(path, encoding="utf-8") as spec:
        for number, line in enumerate(spec, 1):
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 6:
                sys.exit(f"{path}:{number}: expected 6 tab-separated columns, found {len(fields)}")
            bench, key, what, baseline, target, headline = fields
            baseline, _, ratio_key = baseline.partition(" ratio=")
            rows.append(dict(bench=bench, key=key, what=what, ratio_key=ratio_key or None,
                             baseline=None if baseline == "-" else baseline,
                             target=None if target == "-" else target,
                             headline=headline == "yes"))
    return rows


def fmt(value):
    if value is None:
        return "not measured"
    if isinstance(value, str):
        return value
    if value == int(value) and abs(value) >= 100:
        return f"{int(value):,}".replace(",", " ")
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def judge(target, figures):
    """'met', 'missed', or 'not measured' when a key the target names is missing."""
    if target is None:
        return ""
    names = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", target)) - {"abs", "min", "max"}
    if any(not isinstance(figures.get(name), float) for name in names):
        return "not measured"
    try:
        return "met" if eval(target, {"__builtins__": {}, "abs": abs, "min": min, "max": max},
                             dict(figures)) else "**missed**"
    except ZeroDivisionError:
        return "not measured"


def row_cells(row, figures, previous):
    value = figures.get(row["key"])
    baseline = figures.get(row["baseline"]) if row["baseline"] else None
    ratio = ""
    if row["ratio_key"] and isinstance(figures.get(row["ratio_key"]), float):
        # The benchmark's own ratio, from unrounded figures.
        ratio = f"{figures[row['ratio_key']]:.2f}"
    elif isinstance(value, float) and isinstance(baseline, float) and baseline:
        ratio = f"{value / baseline:.2f}"
    baseline_text = ""
    if row["baseline"]:
        baseline_text = f"{fmt(baseline)} (`{row['baseline']}`)"
    return [row["what"], f"{fmt(value)}", baseline_text, ratio,
            f"`{row['target']}`" if row["target"] else "", judge(row["target"], figures),
            fmt(previous[row["key"]]) if row["key"] in previous else "–"]


def machine_line(load):
    model = "unknown CPU"
    hypervisor = False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name") and model == "unknown CPU":
                    model = line.split(":", 1)[1].strip()
                if line.startswith("flags") and " hypervisor" in line:
                    hypervisor = True
    except OSError:
        pass
    virt = "virtualised" if hypervisor else "not virtualised"
    try:
        detected = subprocess.run(["systemd-detect-virt"], capture_output=True, text=True,
                                  check=False).stdout.strip()
        if detected and detected != "none":
            virt = f"virtualised ({detected})"
    except OSError:
        pass
    line = f"{model}, {os.cpu_count()} CPUs, Linux {platform.release()}, {virt}"
    if load is not None:
        line += f"; load average before the run {load}"
    return line


def write_report(args, spec, runs, previous, previous_machine, measured):
    today = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = ["# Performance", "",
           "Generated by `make bench-report` (scripts/bench-report.py from bench/figures.tsv); "
           "do not edit by hand. Every figure is the benchmark's own last line from one run, "
           "beside the baseline it measured in the same run. The previous column is the "
           "report this one replaced; older ones are in git's history of this file.", "",
           f"Machine: {machine_line(args.load)}", f"Date: {today}", ""]
    if previous_machine:
        out += [f"Previous report's machine: {previous_machine}", ""]
    benches = []
    for row in spec:
        if row["bench"] not in benches:
            benches.append(row["bench"])
    for bench in benches:
        figures = runs.get(bench, (None, {}))[1]
        earlier = previous.get(bench, (None, {}))[1]
        out += [f"## {bench}", ""]
        if not figures:
            out += ["Not run (the benchmark was not built or failed; see the run's log).", ""]
            continue
        out += [f"_Measured {measured.get(bench, today)}._", ""]
        out += ["| figure | value | same-run baseline | ratio | target | | previous |",
                "|---|---|---|---|---|---|---|"]
        for row in spec:
            if row["bench"] == bench:
                out.append("| " + " | ".join(row_cells(row, figures, earlier)) + " |")
        out.append("")
    out += [RAW_HEADING, "", "```text"]
    out += [f"{name}: {runs[name][0]}" for name in benches + sorted(set(runs) - set(benches))
            if name in runs]
    out += ["```", ""]
    with open(args.out, "w", encoding="utf-8") as report:
        report.write("\n".join(out))


def headline_table(spec, runs):
    lines = ["| what | haecer | same-run baseline | ratio | target | |",
             "|---|---|---|---|---|---|"]
    for row in spec:
        if not row["headline"]:
            continue
        figures = runs.get(row["bench"], (None, {}))[1]
        cells = row_cells(row, figures, {})
        lines.append("| " + " | ".join(cells[:6]) + " |")
    return lines


def update_readme(path, spec, runs):
    with open(path, encoding="utf-8") as readme:
        text = readme.read()
    begin, end = "<!-- headline:begin -->", "<!-- headline:end -->"
    if begin not in text or end not in text:
        sys.exit(f"{path}: no {begin} ... {end} markers to put the headline table between")
    head, _, rest = text.partition(begin)
    _, _, tail = rest.partition(end)
    table = "\n".join(headline_table(spec, runs))
    with open(path, "w", encoding="utf-8") as readme:
        readme.write(f"{head}{begin}\n{table}\n{end}{tail}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("summary")
    parser.add_argument("--spec", default=os.path.join(ROOT, "bench", "figures.tsv"))
    parser.add_argument("--previous", default=os.path.join(ROOT, "docs", "PERFORMANCE.md"))
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "PERFORMANCE.md"))
    parser.add_argument("--readme")
    parser.add_argument("--load")
    parser.add_argument("--carry", action="store_true",
                        help="keep the previous figures of benchmarks this run left out")
    args = parser.parse_args()
    spec = read_spec(args.spec)
    runs = read_summary(args.summary)
    if not runs:
        sys.exit(f"{args.summary}: no benchmark's last line in it")
    previous, previous_machine, measured = read_previous(args.previous)
    measured = {name: when for name, when in measured.items() if name not in runs}
    if args.carry:
        for name in set(previous) - set(runs):
            runs[name] = previous[name]
    write_report(args, spec, runs, previous, previous_machine, measured)
    if args.readme:
        update_readme(args.readme, spec, runs)
    print(f"bench-report: wrote {args.out}" + (f" and {args.readme}'s headline table"
                                               if args.readme else ""))


if __name__ == "__main__":
    main()
