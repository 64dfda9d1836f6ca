#!/usr/bin/env python3
"""Draw bench/bench.py's JSON results as the plots in docs/.

    python3 bench/plot.py times docs/benchmarks_edit.json docs/benchmarks_edit.png
    python3 bench/plot.py speedup docs/speedup.png docs/benchmarks.json docs/benchmarks_edit.json ...

`times`: one bar group per workload on a log scale: our time (and our fp16 mode's), torch.compile's with TF32
(problem 2; fp32 for problem 1) and under fp16 autocast where the JSON has them, and the floor, with
torch.compile's time over ours written above each group; a tool that failed the public rule is hatched. `speedup`: torch.compile's time over ours per
workload, one row of points per JSON file (problem and GPU), the README's one picture.

Needs matplotlib (`pip install matplotlib`); no GPU or PyTorch. The JSON says which GPU, date and tools.
"""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import geomean  # noqa: E402

# bench.py names torch.compile "compile" for problem 1 and "compile_tf32" for problem 2.
COMPILE_TOOLS = ("compile_tf32", "compile")


def load(path):
    with open(path) as f:
        return json.load(f)


def compile_tool(data):
    for name in COMPILE_TOOLS:
        if name in data["tools"]:
            return name
    sys.exit(f"no torch.compile tool in this JSON's tools {data['tools']}")


def tool_us(record, name):
    t = record["tools"].get(name) or {}
    return t.get("us") if t.get("ok") else None


def problem_name(data):
    problems = {r.get("problem") for r in data["workloads"]}
    return {"softmax_dropout_bwd": "problem 1 (softmax dropout bwd)",
            "edit_attention_bwd": "problem 2 (edit attention bwd)"}.get(problems.pop(), "?") \
        if len(problems) == 1 else "both problems"


def gpu_name(data):
    return data["device"].replace("NVIDIA ", "").replace(" 80GB HBM3", "")


def title(data):
    return f"{problem_name(data)}, {gpu_name(data)}, {data['date'][:10]}"


def geomean_line(records, bars):
    """Each bar's geomean us over the workloads where its tool passed; a tool that passed none is left out."""
    means = ((label, geomean([tool_us(r, name) for r in records])) for name, label, _ in bars)
    return ", ".join(f"{label} {g:.1f}" for label, g in means if g is not None)


def tool_failed(record, name):
    """True where the tool ran but its output failed the public rule (its bar is hatched, not dropped)."""
    check = (record["tools"].get(name) or {}).get("check")
    return bool(check) and not check.get("pass")


# The bars of `times`, in order, where the JSON has them: (tool, label, colour).
TIME_BARS = (("ours", "attnbwd ({precision})", "tab:blue"),
             ("ours_fp16", "attnbwd (fp16)", "tab:cyan"),
             ("compile_tf32", "torch.compile (TF32)", "tab:orange"),
             ("compile", "torch.compile (fp32)", "tab:orange"),
             ("compile_fp16", "torch.compile (fp16 autocast)", "tab:red"))


def time_bars(data):
    """[(tool, label, colour)] of TIME_BARS that the JSON ran; problem 2's fp32 compile only without the TF32 one."""
    ran = [b for b in TIME_BARS if b[0] in data["tools"]]
    if any(b[0] == "compile_tf32" for b in ran):
        ran = [b for b in ran if b[0] != "compile"]
    precision = data.get("precision") or "fp32"
    return [(t, label.format(precision=precision), colour) for t, label, colour in ran]


def plot_times(data, path, plt):
    ctool = compile_tool(data)
    records = data["workloads"]
    bars = time_bars(data)
    floor = [r["floor_us"] for r in records]
    xs = list(range(len(records)))
    width = 0.8 / (len(bars) + 1)
    fig, ax = plt.subplots(figsize=(max(10, 0.3 * (len(bars) + 1) * len(records) + 2), 5))
    failed_any = False
    for k, (name, label, colour) in enumerate(bars):
        offset = (k - len(bars) / 2) * width
        ys = [tool_us(r, name) or 0 for r in records]
        hatch = ["xx" if tool_failed(r, name) else None for r in records]
        failed_any = failed_any or any(hatch)
        for x, y, h in zip(xs, ys, hatch):
            ax.bar(x + offset, y, width, color=colour, hatch=h, edgecolor="black" if h else colour,
                   label=label if x == 0 else None)
    ax.bar([x + len(bars) / 2 * width for x in xs], floor, width, label="floor (TF32)", color="tab:gray")
    for x, r in zip(xs, records):
        o, c = tool_us(r, "ours"), tool_us(r, ctool)
        if o and c:
            top = max(tool_us(r, name) or 0 for name, _, _ in bars)
            ax.annotate(f"{c / o:.2f}x", (x, top), textcoords="offset points", xytext=(0, 3), ha="center", fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks(xs)
    ax.set_xticklabels([r["label"] for r in records], rotation=60, ha="right", fontsize=8)
    ax.set_xlabel("workload (" + ("B,T" if records and "floor_flops" in records[0] else "B,H,T,p") + ")")
    ax.set_ylabel("device time, us (log scale; median, cold L2)")
    ax.set_title(f"{title(data)}\ngeomean us: {geomean_line(records, bars)}"
                 f"\nabove each workload: {ctool} time / attnbwd time"
                 + ("; hatched: failed the public rule" if failed_any else ""), fontsize=8)
    low, high = ax.get_ylim()
    ax.set_ylim(low, high * 4)  # room for the legend above the bars (log scale)
    ax.legend(loc="upper left", fontsize=8, ncol=len(bars) + 1)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_speedup(paths, out, plt):
    runs = [load(p) for p in paths]
    fig, ax = plt.subplots(figsize=(8, 1.0 + 0.8 * len(runs)))
    for row, data in enumerate(runs):
        ctool = compile_tool(data)
        ratios = [tool_us(r, ctool) / tool_us(r, "ours") for r in data["workloads"]
                  if tool_us(r, "ours") and tool_us(r, ctool)]
        ax.scatter(ratios, [row] * len(ratios), alpha=0.6, s=30)
        g = geomean(ratios)
        if g is None:  # no workload where both ran and passed: no mean to mark
            continue
        ax.scatter([g], [row], marker="|", s=400, color="black")
        ax.annotate(f"geomean {g:.2f}x", (g, row), textcoords="offset points", xytext=(6, 8), fontsize=8)
    ax.axvline(1.0, color="gray", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(runs)))
    ax.set_yticklabels([f"{problem_name(d).split(' (')[0]}, {gpu_name(d)}, {d['date'][:10]}" for d in runs],
                       fontsize=8)
    ax.set_ylim(-0.6, len(runs) - 0.4)
    ax.set_xlabel("torch.compile time / attnbwd time, each public workload (> 1: attnbwd faster)", fontsize=9)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv):
    usage = ("usage: plot.py times RESULT.json OUT.png\n"
             "       plot.py speedup OUT.png RESULT.json...")
    if len(argv) < 3 or argv[0] not in ("times", "speedup") or (argv[0] == "times" and len(argv) != 3):
        sys.exit(usage)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    if argv[0] == "times":
        plot_times(load(argv[1]), argv[2], plt)
    else:
        plot_speedup(argv[2:], argv[1], plt)


if __name__ == "__main__":
    main(sys.argv[1:])
