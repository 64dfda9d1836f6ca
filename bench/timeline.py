#!/usr/bin/env python3
"""Where one call of our problem-2 backward spends its time: each kernel's start, length and stream within
the whole call, as CUPTI records them (torch.profiler), after a cold L2 like bench.py's. `attnbwd check --time`
times each kernel alone; this shows them as the plan's lanes run them together: what waits for what, and
where the GPU sits idle between kernels.

    python3 bench/timeline.py --lib build/libattnbwd.so suites/sol072_workload.jsonl --only 1,13 [--json F]

Prints, per workload, the call's span (first kernel start to last kernel end, median of --iters calls), then
per kernel of the median call: start and end in us from the call's first kernel, its length, its stream and
its name without the shape prefix. "busy" is the time some kernel of the call runs. From the second call with
the same arguments the library replays a CUDA graph of the plan, whose streams are the graph's own: a stream
then holds kernels of more than one lane (the pair after a side lane's transpose, say), and the kernel names
tell the plan's lanes (ATTNBWD_GRAPHS=0 launches every call on the lanes' streams instead)."""
import argparse
import json
import os
import re
import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402  (the inputs, the library binding and the cold-L2 flush of the benchmark)


def kernel_events(prof):
    """(name, start us, end us, stream) of every GPU kernel the profiler saw, in start order."""
    out = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and e.time_range.elapsed_us() >= 0:
            out.append((e.name, e.time_range.start, e.time_range.end, getattr(e, "device_resource_id", 0)))
    return sorted(out, key=lambda x: x[1])


def split_calls(events, gap_us=1000.0):
    """The kernels of each call: the calls are a flush and a spin of about 10 ms apart."""
    calls, end = [], None
    for ev in events:
        if end is None or ev[1] - end > gap_us:
            calls.append([])
        calls[-1].append(ev)
        end = ev[2] if end is None else max(end, ev[2])
    return calls


def short(name):
    return re.sub(r"^edit_attention_bwd_B\d+_T\d+_p\d_", "", name)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("suite", nargs="?", default=os.path.join(bench.REPO, "suites", "sol072_workload.jsonl"))
    ap.add_argument("--lib", default=os.path.join(bench.REPO, "build", "libattnbwd.so"))
    ap.add_argument("--only", help="workload indices from 0, comma separated (default: all)")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--json", help="write the kernels of each median call here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("no CUDA device")

    rows = bench.load_rows([args.suite])
    chosen = bench.select(rows, args.only if args.only is None or "," in args.only else args.only + ",")
    lib = bench.Library(args.lib)
    prob = bench.EditAttentionBwd()
    flush_buf = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    report = []
    for _, row in chosen:
        if not prob.accepts(row):
            continue
        inputs = prob.make_inputs(row, 0)
        run, _, _ = prob.make_ours(lib, row, inputs)
        for _ in range(3):  # loaded, and every lazy first-launch cost paid
            run()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(args.iters):
                flush_buf.zero_()
                torch.cuda._sleep(20_000_000)  # the host enqueues the whole call while this spins
                run()
            torch.cuda.synchronize()
        calls = split_calls([e for e in kernel_events(prof) if e[0].startswith("edit_attention_bwd_")])
        if not calls:
            print(f"{prob.label(row)}: no kernels recorded", flush=True)
            continue
        spans = [max(k[2] for k in c) - min(k[1] for k in c) for c in calls]
        med = sorted(range(len(calls)), key=lambda i: spans[i])[len(calls) // 2]
        call = calls[med]
        t0 = min(k[1] for k in call)
        streams = {s: i for i, s in enumerate(sorted({k[3] for k in call}))}
        _, busy = bench.attributed_us([(name, s, e) for name, s, e, _ in call])  # the union of their spans
        print(f"\n{prob.label(row)}: call {statistics.median(spans):.1f} us (median of {len(calls)}), "
              f"busy {busy:.1f} us, {len(call)} kernels", flush=True)
        print(f"  {'start':>8} {'end':>8} {'us':>8}  stream  kernel")
        kernels = []
        for name, s, e, st in call:
            print(f"  {s - t0:8.1f} {e - t0:8.1f} {e - s:8.1f}  {streams[st]:>6}  {short(name)}")
            kernels.append({"name": short(name), "start_us": s - t0, "end_us": e - t0, "stream": streams[st]})
        report.append({"label": prob.label(row), "call_us": statistics.median(spans), "busy_us": busy,
                       "kernels": kernels})
        del run, inputs
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
