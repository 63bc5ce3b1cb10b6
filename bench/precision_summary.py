#!/usr/bin/env python3
"""The single-GPU step in every precision, Tandem beside PyTorch.

    python3 bench/precision_summary.py tandem_fp32.log ... torch_bf16.log

Reads the "result" and "gemm" key=value lines that bench/gpu_step_bench and
bench/torch_reference.py print (any number of logs of either) and prints,
per model, batch and precision: both step times, Tandem's speed-up over
PyTorch in the same precision, each one's share of the GEMM rate of its
precision measured in its own process (at once, and "sustained": after
seconds of load, where the GPU holds its power limit with a lower clock),
and both peak memories; then the goals below, each PASS or FAIL, judged
against the rates measured at once, and the same shares of the sustained
rates beside them, with the sustained rate's own share of the rate at once
(a share-of-rate goal above it asks a step under load to outrun the square
GEMM at the same power limit); rows timed in bursts after idling (gpu_step_bench
--cool_ms) are listed last, beside their own burst rates. A missing
configuration is an error (exit 2).

Goals (one H200):
  bf16 large/4096: >= 80% of the bf16 GEMM rate, and >= 1.15x PyTorch autocast
  bf16 large/512:  >= 2.5x PyTorch autocast
  bf16 small/256:  >= 6x PyTorch autocast
  tf32 large/4096: >= 90% of the TF32 GEMM rate
  every configuration: Tandem's peak memory no higher than PyTorch's
"""
import re
import sys

CONFIGS = [(m, b, p) for p in ("fp32", "tf32", "bf16")
           for m, b in (("large", 512), ("large", 4096), ("small", 256))]


def read(paths):
    """The eager rows: those timed as usual, and those timed in bursts after
    idling (gpu_step_bench --cool_ms > 0), apart."""
    results, bursts = {}, {}
    for path in paths:
        for line in open(path):
            fields = dict(re.findall(r"(\w+)=(\S+)", line))
            if not line.startswith("result") or fields.get("mode") != "eager":
                continue
            key = (fields["impl"], fields["model"], int(fields["batch"]),
                   fields.get("precision", "fp32"))
            (bursts if float(fields.get("cool_ms", 0)) > 0 else results)[key] = fields
    return results, bursts


def goals(results):
    def get(impl, model, batch, precision, field):
        return float(results[(impl, model, batch, precision)][field])

    def speedup(model, batch, precision):
        return (get("torch", model, batch, precision, "step_ms") /
                get("tandem", model, batch, precision, "step_ms"))

    checks = [
        ("bf16 large/4096: >= 80% of the bf16 GEMM rate",
         get("tandem", "large", 4096, "bf16", "pct_gemm"), 80.0, "%", "bf16"),
        ("bf16 large/4096: >= 1.15x PyTorch autocast", speedup("large", 4096, "bf16"), 1.15, "x",
         None),
        ("bf16 large/512: >= 2.5x PyTorch autocast", speedup("large", 512, "bf16"), 2.5, "x",
         None),
        ("bf16 small/256: >= 6x PyTorch autocast", speedup("small", 256, "bf16"), 6.0, "x", None),
        ("tf32 large/4096: >= 90% of the TF32 GEMM rate",
         get("tandem", "large", 4096, "tf32", "pct_gemm"), 90.0, "%", "tf32"),
    ]
    for model, batch, precision in CONFIGS:
        ours = get("tandem", model, batch, precision, "peak_mb")
        theirs = get("torch", model, batch, precision, "peak_mb")
        checks.append((f"{precision} {model}/{batch}: peak memory <= PyTorch's "
                       f"({ours:.0f} vs {theirs:.0f} MB)", theirs / ours, 1.0, "x", None))
    return checks


def sustained_share(row):
    """A result row's sustained GEMM rate as a % of its rate at once (None
    where the row has no sustained rate)."""
    if "gemm_sustained_tflops" not in row:
        return None
    return 100.0 * float(row["gemm_sustained_tflops"]) / float(row["gemm_tflops"])


def main(paths):
    results, bursts = read(paths)
    missing = [f"{impl} {m}/{b} {p}" for m, b, p in CONFIGS for impl in ("tandem", "torch")
               if (impl, m, b, p) not in results]
    if missing:
        print("precision_summary: missing results: " + ", ".join(missing))
        return 2
    print("| model | batch | precision | Tandem ms | PyTorch ms | x PyTorch | Tandem % GEMM "
          "| PyTorch % GEMM | Tandem % sustained | PyTorch % sustained | Tandem MB "
          "| PyTorch MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for m, b, p in CONFIGS:
        t, r = results[("tandem", m, b, p)], results[("torch", m, b, p)]
        ratio = float(r["step_ms"]) / float(t["step_ms"])
        print(f"| {m} | {b} | {p} | {float(t['step_ms']):.3f} | {float(r['step_ms']):.3f} "
              f"| {ratio:.2f}x | {t.get('pct_gemm', '-')} | {r.get('pct_gemm', '-')} "
              f"| {t.get('pct_gemm_sustained', '-')} | {r.get('pct_gemm_sustained', '-')} "
              f"| {t['peak_mb']} | {r['peak_mb']} |")
    print()
    failed = 0
    for text, value, target, unit, rate_precision in goals(results):
        ok = value >= target
        failed += not ok
        shown = f"{value:.1f}%" if unit == "%" else f"{value:.2f}x"
        share = (sustained_share(results[("tandem", "large", 4096, rate_precision)])
                 if rate_precision else None)
        above = (f" (the goal is above {share:.1f}%, the sustained rate's share of the rate "
                 "at once)" if share is not None and target > share else "")
        print(f"goal {text}: {shown} {'PASS' if ok else 'FAIL'}{above}")
    for p in ("bf16", "tf32"):
        t = results[("tandem", "large", 4096, p)]
        if "pct_gemm_sustained" in t:
            print(f"beside: {p} large/4096 is {t['pct_gemm_sustained']}% of the sustained "
                  f"{p} GEMM rate ({t['gemm_sustained_tflops']} TFLOP/s, "
                  f"{sustained_share(t):.1f}% of the {t['gemm_tflops']} at once)")
    for (impl, m, b, p), t in sorted(bursts.items()):
        print(f"beside: {impl} {p} {m}/{b} timed in bursts after {t['cool_ms']} ms idle: "
              f"{t['step_ms']} ms, {t.get('pct_gemm', '-')}% of the {p} GEMM rate measured "
              f"so ({t.get('gemm_tflops', '-')} TFLOP/s)")
    print(f"precision_summary: {len(CONFIGS)} configurations, "
          f"{'every goal met' if not failed else f'{failed} goal(s) missed'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
