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


def group_table(records, tools, g):
    """Lines of one problem's table; problem 2 (records with floor_flops) shows TFLOP/s per tool."""
    flops = any("floor_flops" in r for r in records)
    lines = []
    copy = not flops and all("copy_same_bytes_us" in r for r in records)
    head = ["B,T" if flops else "B,H,T,p", "floor us", "reachable us"] + (["same-bytes copy us"] if copy else [])
    head += [f"{t} us" for t in tools]
    if flops:
        head += ["floor/ours"] + [f"{t} TFLOP/s" for t in tools] + ["check", "worst output"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "|".join(["---"] + ["---:"] * (len(head) - 3) + [":---:", "---"]) + "|")
    else:
        head += ["floor/ours", "ours GB/s", "check"]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "|".join(["---"] + ["---:"] * (len(head) - 2) + [":---:"]) + "|")
    for r in records:
        cells = [r["label"], fmt(r["floor_us"], ".1f"), fmt(r["reachable_us"], ".1f")]
        cells += [fmt(r["copy_same_bytes_us"], ".1f")] if copy else []
        cells += [tool_time(r, t) for t in tools]
        cells += [fmt(tool(r, "ours", "floor_fraction"), ".3f")]
        if flops:
            check = (r["tools"].get("ours") or {}).get("check") or {}
            cells += [fmt(tool(r, t, "tflops"), ".1f") for t in tools] + [passed(r), check.get("worst", "-")]
        else:
            cells += [fmt(tool(r, "ours", "gbs"), ".0f"), passed(r)]
        lines.append("| " + " | ".join(cells) + " |")
    cells = ["**geomean**", fmt(g.get("floor_us"), ".1f"), fmt(g.get("reachable_us"), ".1f")]
    cells += [fmt(g.get("copy_same_bytes_us"), ".1f")] if copy else []
    cells += [fmt(g.get(f"{t}_us"), ".1f") for t in tools]
    cells += [fmt(g.get("ours_floor_fraction"), ".3f")]
    if flops:
        cells += [fmt(g.get(f"{t}_tflops"), ".1f") for t in tools]
        cells += [f"{g.get('ours_passed', 0)}/{g.get('ours_checked', 0)}", ""]
    else:
        cells += [fmt(g.get("ours_gbs"), ".0f"), f"{g.get('ours_passed', 0)}/{g.get('ours_checked', 0)}"]
    lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if g.get("floor_over_ours") is not None:
        lines.append(f"geomean(floor) / geomean(ours) = **{g['floor_over_ours']:.3f}**; "
                     f"geomean(reachable) / geomean(ours) = **{g['reachable_over_ours']:.3f}** "
                     f"(over {g['ours_workloads']} workloads).")
    if copy and g.get("copy_over_ours") is not None:
        lines.append(f"A copy of each workload's bytes, timed the same way: geomean {g['copy_same_bytes_us']:.1f} us; "
                     f"geomean(copy) / geomean(ours) = **{g['copy_over_ours']:.3f}**; geomean(floor) / "
                     f"geomean(copy) = **{g['floor_over_copy']:.3f}**.")
    fr = [f"{t} {g[f'{t}_floor_fraction']:.3f}" for t in tools if g.get(f"{t}_floor_fraction") is not None]
    if fr:
        lines.append("Geometric mean of the fraction of the floor reached: " + ", ".join(fr) + ".")
    return lines


def table(data):
    tools = data["tools"]
    lines = []
    lines.append(f"Device: {data['device']} ({data['sm_count']} SMs), torch {data['torch']}, "
                 f"CUDA {data['cuda']}, {data['date']}. ")
    lines.append(f"Copy bandwidth measured in the same run: {data['copy_bandwidth_gbs']:.0f} GB/s "
                 f"(bytes read + written); one minimal kernel: {data['minimal_kernel_us']:.2f} us. ")
    if data.get("tf32_tflops") is not None:
        lines.append(f"TF32 matmul measured in the same run: {data['tf32_tflops']:.0f} TFLOP/s "
                     f"({data['tf32_matmul_n']}^3); our kernel's precision for problem 2: {data.get('precision')}. ")
    lines.append(f"Times: median of {data['iters']} after {data['warmup']} warm-ups, L2 flushed before every "
                 f"iteration, device time from CUDA events. Floor = bytes that must move / copy bandwidth; "
                 f"reachable = max(floor, minimal kernel).")
    groups = {}
    for r in data["workloads"]:
        groups.setdefault(r.get("problem"), []).append(r)
    if any("floor_flops" in r for r in data["workloads"]):
        lines.append("Problem 2 (edit attention backward): floor = max(matrix flops / TF32 rate, bytes / copy "
                     "bandwidth); TFLOP/s = matrix flops / time.")
    lines.append("")
    if len(groups) <= 1:
        lines += group_table(data["workloads"], tools, data["geomean"])
    else:
        for name, records in groups.items():
            lines.append(f"**{name}**")
            lines.append("")
            ts = [t for t in tools if any(t in r["tools"] for r in records)]
            lines += group_table(records, ts, data.get("geomean_by_problem", {}).get(name, {}))
            lines.append("")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 bench/markdown.py bench.json > table.md")
    with open(sys.argv[1]) as f:
        data = json.load(f)
    sys.stdout.write(table(data))


if __name__ == "__main__":
    main()
