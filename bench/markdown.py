#!/usr/bin/env python3
"""Turn bench/bench.py's JSON into the markdown table of docs/benchmarks.md.

    python3 bench/markdown.py bench.json > table.md

Standard library only: runs anywhere, no GPU or PyTorch needed.
"""

import json
import sys


def fmt(v, spec):
    return format(v, spec) if v is not None else "-"


def tool(rec, name, key):
    t = rec["tools"].get(name)
    return t.get(key) if t else None


def tool_time(rec, name):
    t = rec["tools"].get(name)
    if t is None:
        return "-"
    if not t.get("ok"):
        return "failed"
    return fmt(t.get("us"), ".1f")


def passed(rec):
    t = rec["tools"].get("ours")
    if t is None:
        return "-"
    if not t.get("ok"):
        return "error"
    if "check" not in t:
        return "not checked"
    return "pass" if t["check"]["pass"] else "**FAIL**"


def table(data):
    tools = data["tools"]
    g = data["geomean"]
    lines = []
    lines.append(f"Device: {data['device']} ({data['sm_count']} SMs), torch {data['torch']}, "
                 f"CUDA {data['cuda']}, {data['date']}. ")
    lines.append(f"Copy bandwidth measured in the same run: {data['copy_bandwidth_gbs']:.0f} GB/s "
                 f"(bytes read + written); one minimal kernel: {data['minimal_kernel_us']:.2f} us. ")
    lines.append(f"Times: median of {data['iters']} after {data['warmup']} warm-ups, L2 flushed before every "
                 f"iteration, device time from CUDA events. Floor = bytes that must move / copy bandwidth; "
                 f"reachable = max(floor, minimal kernel).")
    lines.append("")
    head = ["B,H,T,p", "floor us", "reachable us"] + [f"{t} us" for t in tools]
    head += ["floor/ours", "ours GB/s", "check"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---"] + ["---:"] * (len(head) - 2) + [":---:"]) + "|")
    for r in data["workloads"]:
        cells = [r["label"], fmt(r["floor_us"], ".1f"), fmt(r["reachable_us"], ".1f")]
        cells += [tool_time(r, t) for t in tools]
        cells += [fmt(tool(r, "ours", "floor_fraction"), ".3f"), fmt(tool(r, "ours", "gbs"), ".0f"), passed(r)]
        lines.append("| " + " | ".join(cells) + " |")
    cells = ["**geomean**", fmt(g.get("floor_us"), ".1f"), fmt(g.get("reachable_us"), ".1f")]
    cells += [fmt(g.get(f"{t}_us"), ".1f") for t in tools]
    cells += [fmt(g.get("ours_floor_fraction"), ".3f"), fmt(g.get("ours_gbs"), ".0f"),
              f"{g.get('ours_passed', 0)}/{g.get('ours_checked', 0)}"]
    lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if g.get("floor_over_ours") is not None:
        lines.append(f"geomean(floor) / geomean(ours) = **{g['floor_over_ours']:.3f}**; "
                     f"geomean(reachable) / geomean(ours) = **{g['reachable_over_ours']:.3f}** "
                     f"(over {g['ours_workloads']} workloads).")
    fr = [f"{t} {g[f'{t}_floor_fraction']:.3f}" for t in tools if g.get(f"{t}_floor_fraction") is not None]
    if fr:
        lines.append("Geometric mean of the fraction of the floor reached: " + ", ".join(fr) + ".")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 bench/markdown.py bench.json > table.md")
    with open(sys.argv[1]) as f:
        data = json.load(f)
    sys.stdout.write(table(data))


if __name__ == "__main__":
    main()
