#!/usr/bin/env python3
"""Side-by-side table of gpu_step_bench and torch_reference.py, with targets.

    python3 bench/compare_gpu_bench.py --tandem t1.log t2.log --torch torch.log

Reads the "result ...", "gemm ..." and "check ..." key=value lines of the
logs. With several logs of one side (repeated runs), each figure is the
slowest run's (conservative) and `spread` is (slowest - fastest) / fastest of
the Tandem step time. Targets:
  large, batch 4096: Tandem reaches >= 95% of the 8192^3 SGEMM rate measured
                     in the same run (6 x params x batch FLOPs per step);
  large, batch 512:  Tandem is >= 10% faster than PyTorch (speedup >= 1.10);
  small, batch 256:  Tandem is >= 3x faster than PyTorch (speedup >= 3.0).
Each Tandem mode (eager, graph) gets its own verdict.
"""
import argparse
import collections


def parse(path):
    rows = []
    with open(path, errors="replace") as f:
        for line in f:
            parts = line.split()
            if not parts or parts[0] not in ("result", "gemm", "check", "copy"):
                continue
            row = {"_tag": parts[0]}
            for p in parts[1:]:
                if "=" in p:
                    k, v = p.split("=", 1)
                    row[k] = v
            rows.append(row)
    return rows


def fnum(row, key):
    try:
        return float(row[key])
    except (KeyError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tandem", nargs="+", required=True)
    ap.add_argument("--torch", nargs="*", default=[])
    args = ap.parse_args()

    tandem = collections.defaultdict(list)  # (model, batch, mode) -> [row per run]
    torch_rows = collections.defaultdict(list)  # (model, batch) -> [row per run]
    sgemm = {"tandem": [], "torch": []}
    checks = []
    copies = []
    for path in args.tandem:
        for r in parse(path):
            if r["_tag"] == "result" and r.get("impl") == "tandem":
                tandem[(r["model"], int(r["batch"]), r["mode"])].append(r)
            elif r["_tag"] == "gemm" and r.get("name", "").startswith("sgemm_"):
                sgemm["tandem"].append(float(r["tflops"]))
            elif r["_tag"] == "check":
                checks.append(r)
            elif r["_tag"] == "copy":
                copies.append(r.get("GBps_read_plus_write", "?"))
    for path in args.torch:
        for r in parse(path):
            if r["_tag"] == "result" and r.get("impl") == "torch":
                torch_rows[(r["model"], int(r["batch"]))].append(r)
            elif r["_tag"] == "gemm" and r.get("name", "").startswith("sgemm_"):
                sgemm["torch"].append(float(r["tflops"]))

    # Each target: (text, which figure it reads, threshold).
    targets = {
        ("large", 4096): ("pct_sgemm >= 95", "pct", 95.0),
        ("large", 512): ("speedup >= 1.10", "speedup", 1.10),
        ("small", 256): ("speedup >= 3.0", "speedup", 3.0),
    }

    header = ["model", "batch", "tandem", "tandem_ms", "spread", "torch_ms", "speedup",
              "tandem_TFLOPs", "pct_sgemm", "torch_pct_sgemm", "target", "verdict"]
    table = []
    for key in sorted(tandem, key=lambda k: (k[0], k[1], k[2] != "eager")):
        model, batch, mode = key
        runs = tandem[key]
        ms = [fnum(r, "step_ms") for r in runs]
        slow = max(runs, key=lambda r: fnum(r, "step_ms"))
        spread = (max(ms) - min(ms)) / min(ms) if len(ms) > 1 else None
        pct = min((fnum(r, "pct_sgemm") for r in runs if fnum(r, "pct_sgemm") is not None),
                  default=None)
        t_runs = torch_rows.get((model, batch), [])
        t_ms = max((fnum(r, "step_ms") for r in t_runs), default=None)
        t_pct = min((fnum(r, "pct_sgemm") for r in t_runs if fnum(r, "pct_sgemm") is not None),
                    default=None)
        speedup = t_ms / fnum(slow, "step_ms") if t_ms else None
        target, figure, threshold = targets.get((model, batch), ("-", None, None))
        value = {"pct": pct, "speedup": speedup}.get(figure)
        if figure is None:
            verdict = "-"
        elif value is None:
            verdict = "NO DATA"
        else:
            verdict = "PASS" if value >= threshold else "FAIL"
        table.append([
            model, str(batch), mode, f"{fnum(slow, 'step_ms'):.3f}",
            "-" if spread is None else f"{100 * spread:.1f}%",
            "-" if t_ms is None else f"{t_ms:.3f}",
            "-" if speedup is None else f"{speedup:.2f}x",
            slow.get("tflops", "-"), "-" if pct is None else f"{pct:.1f}%",
            "-" if t_pct is None else f"{t_pct:.1f}%", target, verdict,
        ])
    widths = [max(len(h), *(len(r[i]) for r in table)) if table else len(h)
              for i, h in enumerate(header)]
    print("  ".join(h.rjust(w) for h, w in zip(header, widths)))
    for r in table:
        print("  ".join(c.rjust(w) for c, w in zip(r, widths)))
    for side in ("tandem", "torch"):
        if sgemm[side]:
            print(f"SGEMM 8192^3 measured by {side}: "
                  + ", ".join(f"{v:.2f}" for v in sgemm[side]) + " TFLOP/s")
    if copies:
        print("device-to-device copy, 1 GiB (read + write): " + ", ".join(copies) + " GB/s")
    for c in checks:
        print(f"graph check {c.get('model')} batch {c.get('batch')}: {c.get('status')} "
              f"(rel_l2 {c.get('rel_l2')}, bitwise {c.get('bitwise')}, {c.get('steps')} steps)")
    if not tandem:
        print("no Tandem results found: did gpu_step_bench run?")


if __name__ == "__main__":
    main()
