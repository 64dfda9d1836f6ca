#!/usr/bin/env python3
"""Turn bench/bench.py's JSON into the markdown table of docs/benchmarks.md.

    python3 bench/markdown.py bench.json > table.md

Standard library only: runs anywhere, no GPU or PyTorch needed.
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from report import fmt, geomean, tool_check, tool_value  # noqa: E402


def tool_time(rec, name):
    """The time, marked **FAIL** where the tool's output failed the check: a failing peer stays in the table."""
    t = rec["tools"].get(name)
    if t is None:
        return "-"
    if not t.get("ok"):
        return "failed"
    return fmt(t.get("us"), ".1f") + (" **FAIL**" if tool_check(rec, name) == "FAIL" else "")


def passed(rec):
    v = tool_check(rec, "ours")
    return "**FAIL**" if v == "FAIL" else v


SHAPE_PREFIX = re.compile(r"^(edit_attention_bwd|softmax_dropout_bwd)_B\d+_(H\d+_)?T\d+_(p\d+_)?")


def short_kernel(name):
    """A kernel's name without the problem and shape that every kernel of the call starts with."""
    return SHAPE_PREFIX.sub("", name)


def most_time(rec, name):
    """The kernel with the largest share of the tool's time (bench.py --profile): "name 48%", "x2" when it
    is launched twice a call."""
    pr = (rec["tools"].get(name) or {}).get("profile")
    if not pr:
        return "-"
    if not pr.get("top_kernel"):
        return "no profile"
    launches = pr.get("top_launches_per_call", 1)
    times = f" x{launches:g}" if launches and launches != 1 else ""
    return f"`{short_kernel(pr['top_kernel'])}`{times} {pr['top_share']:.0%}"


def kernels_per_call(rec, name):
    pr = (rec["tools"].get(name) or {}).get("profile") or {}
    return fmt(pr.get("kernels_per_call"), "g")


def check_summary(records, tools):
    """One line: how many workloads each tool passes under the public rule, failures named."""
    parts = []
    for t in tools:
        verdicts = [(r["label"], tool_check(r, t)) for r in records]
        checked = [v for v in verdicts if v[1] in ("pass", "FAIL")]
        if not checked:
            continue
        failed = [label for label, v in checked if v == "FAIL"]
        errors = sum(1 for _, v in verdicts if v == "ERROR")
        notes = ([f"fails {'; '.join(failed)}"] if failed else []) + ([f"{errors} did not run"] if errors else [])
        parts.append(f"{t} {len(checked) - len(failed)}/{len(checked)}" + (f" ({', '.join(notes)})" if notes else ""))
    return "Passing the public acceptance rule: " + ", ".join(parts) + "." if parts else None


def align(head, left=("B,T", "B,H,T,p", "worst output"), center=("check",)):
    cells = [":---:" if h in center else "---" if h in left or "most time" in h else "---:" for h in head]
    return ["| " + " | ".join(head) + " |", "|" + "|".join(cells) + "|"]


def row(cells):
    return "| " + " | ".join(cells) + " |"


def times_table(records, tools, g):
    """Problem 2: every tool's time per workload (FAIL marked), the floors, and ours' check."""
    fp16 = any(r.get("floor_fp16_us") for r in records)
    head = ["B,T", "floor us"] + (["fp16 floor us"] if fp16 else []) + [f"{t} us" for t in tools]
    head += ["floor/ours", "check", "worst output"]
    lines = align(head)
    for r in records:
        check = (r["tools"].get("ours") or {}).get("check") or {}
        cells = [r["label"], fmt(r["floor_us"], ".1f")] + ([fmt(r.get("floor_fp16_us"), ".1f")] if fp16 else [])
        cells += [tool_time(r, t) for t in tools]
        cells += [fmt(tool_value(r, "ours", "floor_fraction"), ".3f"), passed(r), check.get("worst", "-")]
        lines.append(row(cells))
    cells = ["**geomean**", fmt(g.get("floor_us"), ".1f")] + ([fmt(g.get("floor_fp16_us"), ".1f")] if fp16 else [])
    cells += [fmt(g.get(f"{t}_us"), ".1f") for t in tools]
    cells += [fmt(g.get("ours_floor_fraction"), ".3f"), f"{g.get('ours_passed', 0)}/{g.get('ours_checked', 0)}", ""]
    lines.append(row(cells))
    return lines


def ours_table(records, name, g):
    """Problem 2, one of our tools per workload: time, TFLOP/s, fraction of the floor (and of the fp16 floor for
    an fp16 tool), the kernel with the most time and kernels a call (with --profile), check."""
    fp16 = any(tool_value(r, name, "floor_fp16_fraction") is not None for r in records)
    profiled = any((r["tools"].get(name) or {}).get("profile") for r in records)
    head = ["B,T", "us", "TFLOP/s", "floor/time"] + (["fp16 floor/time"] if fp16 else [])
    head += ["most time: kernel, share", "kernels a call"] if profiled else []
    head += ["check", "worst output"]
    lines = align(head)
    for r in records:
        check = (r["tools"].get(name) or {}).get("check") or {}
        v = tool_check(r, name)
        cells = [r["label"], tool_time(r, name), fmt(tool_value(r, name, "tflops"), ".1f"),
                 fmt(tool_value(r, name, "floor_fraction"), ".3f")]
        cells += [fmt(tool_value(r, name, "floor_fp16_fraction"), ".3f")] if fp16 else []
        cells += [most_time(r, name), kernels_per_call(r, name)] if profiled else []
        cells += ["**FAIL**" if v == "FAIL" else v, check.get("worst", "-")]
        lines.append(row(cells))
    cells = ["**geomean**", fmt(g.get(f"{name}_us"), ".1f"), fmt(g.get(f"{name}_tflops"), ".1f"),
             fmt(g.get(f"{name}_floor_fraction"), ".3f")]
    cells += [fmt(g.get(f"{name}_floor_fp16_fraction"), ".3f")] if fp16 else []
    cells += ["", ""] if profiled else []
    passed_n, checked_n = g.get(f"{name}_passed"), g.get(f"{name}_checked")
    cells += [f"{passed_n}/{checked_n}" if checked_n is not None else "", ""]
    lines.append(row(cells))
    return lines


FLOOR_FRACTION = "Geometric mean of the fraction of the floor reached: "


def tools_line(g, tools, key, spec, text):
    """One sentence, `text` then "tool value" for each tool whose geometric mean `key` is known; none if no
    tool's is."""
    known = [f"{t} {g[f'{t}_{key}']:{spec}}" for t in tools if g.get(f"{t}_{key}") is not None]
    return [text + ", ".join(known) + "."] if known else []


def precision_of(records, name, default):
    found = {tool_value(r, name, "precision") for r in records} - {None}
    return found.pop() if len(found) == 1 else default


def error_table(records):
    """Problem 2: our TF32 and fp16 calls' error against the fp64 reference side by side, where both were
    checked: the largest absolute error over the 8 outputs, fp16's against TF32's, the share of elements within
    the rule, and the output with the lowest share. None where no workload has both."""
    both = [r for r in records if all(((r["tools"].get(t) or {}).get("check") or {}).get("max_abs_err") is not None
                                      for t in ("ours", "ours_fp16"))]
    if not both:
        return None
    head = ["B,T", "atol", "ours max-abs error", "ours_fp16 max-abs error", "fp16 / TF32", "ours match",
            "ours_fp16 match", "worst outputs"]
    lines = align(head, left=("B,T", "worst outputs"))
    errs, ratios = {"ours": [], "ours_fp16": []}, []
    for r in both:
        a, b = (r["tools"][t]["check"] for t in ("ours", "ours_fp16"))
        errs["ours"].append(a["max_abs_err"])
        errs["ours_fp16"].append(b["max_abs_err"])
        ratio = b["max_abs_err"] / a["max_abs_err"] if a["max_abs_err"] > 0 else None
        ratios.append(ratio)
        worst = a.get("worst", "-") if a.get("worst") == b.get("worst") else f"{a.get('worst', '-')} / {b.get('worst', '-')}"
        lines.append(row([r["label"], fmt(a.get("atol"), ".3g"), fmt(a["max_abs_err"], ".3g"),
                          fmt(b["max_abs_err"], ".3g"), fmt(ratio, ".2f"), fmt(a.get("match_ratio"), ".5f"),
                          fmt(b.get("match_ratio"), ".5f"), worst]))
    lines.append(row(["**geomean**", "", fmt(geomean(errs["ours"]), ".3g"), fmt(geomean(errs["ours_fp16"]), ".3g"),
                      fmt(geomean(ratios), ".2f"), "", "", ""]))
    return lines


def flops_tables(records, tools, g, precision=None):
    """Problem 2: the times of every tool, then a table for each of our tools."""
    lines = times_table(records, tools, g)
    lines.append("")
    summary = check_summary(records, tools)
    if summary:
        lines.append(summary)
    lines += tools_line(g, tools, "tflops", ".1f", "Geometric mean TFLOP/s (matrix flops / time): ")
    lines += tools_line(g, tools, "floor_fraction", ".3f", FLOOR_FRACTION)
    lines += tools_line(g, tools, "floor_fp16_fraction", ".3f", "Of the fp16 floor: ")
    for name in [t for t in tools if t.startswith("ours")]:
        lines += ["", f"**{name}** ({precision_of(records, name, precision or '?')}), per workload:", ""]
        lines += ours_table(records, name, g)
    errors = error_table(records) if "ours" in tools and "ours_fp16" in tools else None
    if errors:
        lines += ["", "Error against the fp64 reference, TF32 (ours) and fp16 (ours_fp16): the largest absolute "
                  "error over the 8 outputs, and the share of elements within the rule (|error| <= atol + rtol "
                  "|reference| on at least 98% of each output):", ""]
        lines += errors
    return lines


def group_table(records, tools, g, precision=None):
    """Lines of one problem's tables; problem 2 (records with floor_flops): flops_tables."""
    if any("floor_flops" in r for r in records):
        return flops_tables(records, tools, g, precision)
    lines = []
    copy = all("copy_same_bytes_us" in r for r in records)
    profiled = any((r["tools"].get("ours") or {}).get("profile") for r in records)
    head = ["B,H,T,p", "floor us", "reachable us"] + (["same-bytes copy us"] if copy else [])
    head += [f"{t} us" for t in tools] + ["floor/ours", "ours GB/s"]
    head += ["most time: kernel, share"] if profiled else []
    head += ["check"]
    lines += align(head)
    for r in records:
        cells = [r["label"], fmt(r["floor_us"], ".1f"), fmt(r["reachable_us"], ".1f")]
        cells += [fmt(r["copy_same_bytes_us"], ".1f")] if copy else []
        cells += [tool_time(r, t) for t in tools]
        cells += [fmt(tool_value(r, "ours", "floor_fraction"), ".3f"), fmt(tool_value(r, "ours", "gbs"), ".0f")]
        cells += [most_time(r, "ours")] if profiled else []
        cells += [passed(r)]
        lines.append(row(cells))
    cells = ["**geomean**", fmt(g.get("floor_us"), ".1f"), fmt(g.get("reachable_us"), ".1f")]
    cells += [fmt(g.get("copy_same_bytes_us"), ".1f")] if copy else []
    cells += [fmt(g.get(f"{t}_us"), ".1f") for t in tools]
    cells += [fmt(g.get("ours_floor_fraction"), ".3f"), fmt(g.get("ours_gbs"), ".0f")]
    cells += [""] if profiled else []
    cells += [f"{g.get('ours_passed', 0)}/{g.get('ours_checked', 0)}"]
    lines.append(row(cells))
    lines.append("")
    if g.get("floor_over_ours") is not None:
        lines.append(f"geomean(floor) / geomean(ours) = **{g['floor_over_ours']:.3f}**; "
                     f"geomean(reachable) / geomean(ours) = **{g['reachable_over_ours']:.3f}** "
                     f"(over {g['ours_workloads']} workloads).")
    if copy and g.get("copy_over_ours") is not None:
        lines.append(f"A copy of each workload's bytes, timed the same way: geomean {g['copy_same_bytes_us']:.1f} us; "
                     f"geomean(copy) / geomean(ours) = **{g['copy_over_ours']:.3f}**; geomean(floor) / "
                     f"geomean(copy) = **{g['floor_over_copy']:.3f}**.")
    summary = check_summary(records, tools)
    if summary:
        lines.append(summary)
    lines += tools_line(g, tools, "floor_fraction", ".3f", FLOOR_FRACTION)
    return lines


def table(data):
    tools = data["tools"]
    lines = []
    lines.append(f"Device: {data['device']} ({data['sm_count']} SMs), torch {data['torch']}, "
                 f"CUDA {data['cuda']}, {data['date']}. ")
    lines.append(f"Copy bandwidth measured in the same run: {data['copy_bandwidth_gbs']:.0f} GB/s "
                 f"(bytes read + written); one minimal kernel: {data['minimal_kernel_us']:.2f} us. ")
    if data.get("tf32_tflops") is not None:
        fp16 = (f", fp16 {data['fp16_tflops']:.0f} TFLOP/s (fp16 operands, fp32 accumulation)"
                if data.get("fp16_tflops") is not None else "")
        lines.append(f"Matmul rates measured in the same run ({data['tf32_matmul_n']}^3): TF32 "
                     f"{data['tf32_tflops']:.0f} TFLOP/s{fp16}; ours runs {data.get('precision')}. ")
    lines.append(f"Times: median of {data['iters']} after {data['warmup']} warm-ups, L2 flushed before every "
                 f"iteration, device time from CUDA events. Floor = bytes that must move / copy bandwidth; "
                 f"reachable = max(floor, minimal kernel).")
    groups = {}
    for r in data["workloads"]:
        groups.setdefault(r.get("problem"), []).append(r)
    if any("floor_flops" in r for r in data["workloads"]):
        formula = data.get("flop_formula", "2 * (B*T*8*2^20 + 4*B*16*T*T*64)")
        fp16_floor = ", the fp16 floor the same at the fp16 rate" if data.get("fp16_tflops") is not None else ""
        peers = (" eager_fp16 / compile_fp16: the reference under torch.autocast(\"cuda\", torch.float16), outputs "
                 "cast to fp32." if any(t in tools for t in ("eager_fp16", "compile_fp16")) else "")
        lines.append(f"Problem 2 (edit attention backward): floor = max(matrix flops / TF32 rate, bytes / copy "
                     f"bandwidth){fp16_floor}; matrix flops = {formula}; TFLOP/s = matrix flops / time.{peers}")
    if data.get("profile"):
        of = ("busy time (the union of its kernels)" if data["profile"].get("share_of") == "busy"
              else "summed kernel time")
        lines.append(f"Most time: the kernel with the largest share of our call's {of}, "
                     f"{data['profile']['method']} ({data['profile']['calls']} calls).")
    lines.append("")
    precision = data.get("precision")
    if len(groups) <= 1:
        lines += group_table(data["workloads"], tools, data["geomean"], precision)
    else:
        for name, records in groups.items():
            lines.append(f"**{name}**")
            lines.append("")
            ts = [t for t in tools if any(t in r["tools"] for r in records)]
            lines += group_table(records, ts, data.get("geomean_by_problem", {}).get(name, {}), precision)
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
