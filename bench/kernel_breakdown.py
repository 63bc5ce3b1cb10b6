#!/usr/bin/env python3
"""Sums one training step's kernel times from an ncu CSV log.

    ncu --metrics gpu__time_duration.sum --csv --log-file step.csv <benchmark>
    python3 bench/kernel_breakdown.py step.csv

A step is as many kernels as lie between the last two launches of a kernel
that runs once per step (--marker, part of its name; the MSE loss's by
default): the log's last that many kernels hold each of the step's kernels
once, and are summed by name, longest first. ncu runs kernels one at a time,
so the sum is what the step would take with no overlap between streams.
"""
import argparse
import csv
import sys

UNITS = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3,
         "second": 1e6, "s": 1e6}


def read_kernels(path):
    """(name, microseconds) per kernel, in launch order."""
    with open(path, newline="") as f:
        lines = [line for line in f if line.startswith('"')]
    kernels = []
    for row in csv.DictReader(lines):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        kernels.append((row["Kernel Name"], value * UNITS[row["Metric Unit"]]))
    return kernels


def last_step(kernels, marker):
    """The log's last step-length run of kernels."""
    marks = [i for i, (name, _) in enumerate(kernels) if marker in name]
    if len(marks) < 2:
        sys.exit(f"kernel_breakdown: fewer than two kernels named like '{marker}'")
    period = marks[-1] - marks[-2]
    step = kernels[-period:]
    if [n for n, _ in step] != [n for n, _ in kernels[-2 * period:-period]]:
        sys.exit("kernel_breakdown: the last two steps launched different kernels")
    return step


def short(name, width=90):
    return name if len(name) <= width else name[:width - 3] + "..."


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log")
    parser.add_argument("--marker", default="MseKernel",
                        help="part of the name of a kernel launched once per step")
    args = parser.parse_args()
    step = last_step(read_kernels(args.log), args.marker)
    total = sum(us for _, us in step)
    by_name = {}
    for name, us in step:
        count, sum_us = by_name.get(name, (0, 0.0))
        by_name[name] = (count + 1, sum_us + us)
    print(f"kernels in a step: {len(step)}, their times summed: {total:.1f} us")
    print(f"{'us':>9} {'share':>6} {'calls':>5}  kernel")
    for name, (count, us) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        print(f"{us:9.1f} {100 * us / total:5.1f}% {count:5d}  {short(name)}")


if __name__ == "__main__":
    main()
