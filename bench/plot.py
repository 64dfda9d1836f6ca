#!/usr/bin/env python3
"""Draw bench/bench.py's JSON results as the plots in docs/.

    python3 bench/plot.py times docs/benchmarks_edit.json docs/benchmarks_edit.png
    python3 bench/plot.py speedup docs/speedup.png docs/benchmarks.json docs/benchmarks_edit.json ...

`times`: one bar group per workload: our time, torch.compile's and the floor, on a log scale, with
torch.compile's time over ours written above each group. `speedup`: torch.compile's time over ours per
workload, one row of points per JSON file (problem and GPU), the README's one picture.

Needs matplotlib (`pip install matplotlib`); no GPU or PyTorch. The JSON says which GPU, date and tools.
"""

import json
import math
import sys

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


def geomean(values):
    values = [v for v in values if v]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def plot_times(data, path, plt):
    ctool = compile_tool(data)
    records = data["workloads"]
    ours = [tool_us(r, "ours") for r in records]
    comp = [tool_us(r, ctool) for r in records]
    floor = [r["floor_us"] for r in records]
    xs = range(len(records))
    width = 0.27
    fig, ax = plt.subplots(figsize=(max(8, 0.75 * len(records) + 2), 5))
    ax.bar([x - width for x in xs], [v or 0 for v in ours], width, label="attnbwd", color="tab:blue")
    ax.bar(list(xs), [v or 0 for v in comp], width, label="torch.compile", color="tab:orange")
    ax.bar([x + width for x in xs], floor, width, label="floor", color="tab:gray")
    for x, o, c in zip(xs, ours, comp):
        if o and c:
            ax.annotate(f"{c / o:.2f}x", (x, max(o, c)), textcoords="offset points", xytext=(0, 3),
                        ha="center", fontsize=7)
    ax.set_yscale("log")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r["label"] for r in records], rotation=60, ha="right", fontsize=8)
    ax.set_xlabel("workload (" + ("B,T" if records and "floor_flops" in records[0] else "B,H,T,p") + ")")
    ax.set_ylabel("device time, us (log scale; median, cold L2)")
    ax.set_title(f"{title(data)}: geomean {geomean(ours):.1f} us against torch.compile's "
                 f"{geomean(comp):.1f} (speedup above each workload)", fontsize=10)
    ax.legend(loc="upper left", fontsize=8)
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
