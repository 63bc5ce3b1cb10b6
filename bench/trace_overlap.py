"""Reads a Chrome trace of the Trainer (--trace) and says, per worker, how
the preparation of each next batch ("prepare batch N" on the data row)
overlapped the training step that ran meanwhile, and how long the training
thread waited for a batch ("next batch" on the waiting-for-data row).

    python3 bench/trace_overlap.py trace.json

A prepared batch overlaps the step whose forward began before its
preparation ended; the step's span is from its first compute event to its
last (the step tracer's forward and backward rows).
"""
import json
import sys
from collections import defaultdict


def main(path):
    events = [e for e in json.load(open(path))["traceEvents"] if e.get("ph") == "X"]
    by_row = defaultdict(list)
    for e in events:
        by_row[(e["pid"], e["tid"])].append(e)
    for pid in sorted({e["pid"] for e in events}):
        compute = sorted(by_row[(pid, 0)], key=lambda e: e["ts"])
        prepared = sorted(by_row[(pid, 2)], key=lambda e: e["ts"])
        waits = sorted(by_row[(pid, 3)], key=lambda e: e["ts"])
        # Steps: runs of compute events separated by gaps.
        steps, current = [], None
        for e in compute:
            if current and e["ts"] - current[1] > 50:
                steps.append(current)
                current = None
            end = e["ts"] + e["dur"]
            current = [e["ts"], end] if current is None else [current[0], max(current[1], end)]
        if current:
            steps.append(current)
        overlapped = 0
        for p in prepared:
            p_begin, p_end = p["ts"], p["ts"] + p["dur"]
            if any(s[0] < p_end and p_begin < s[1] for s in steps):
                overlapped += 1
        prep_us = [p["dur"] for p in prepared]
        wait_us = [w["dur"] for w in waits]
        print(f"worker {pid}: {len(steps)} traced steps, {len(prepared)} batches prepared "
              f"(mean {sum(prep_us) / max(1, len(prep_us)):.0f} us), {overlapped} of them "
              f"while a step ran; the training thread waited for data "
              f"{sum(wait_us) / max(1, len(wait_us)):.0f} us a step on average "
              f"(max {max(wait_us, default=0):.0f} us)")


if __name__ == "__main__":
    main(sys.argv[1])
