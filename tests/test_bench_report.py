#!/usr/bin/env python3
"""The benchmark's parts that need no GPU: bench.py's tools, floor model, profile summary and dry run;
markdown.py's tables and plot.py's time plot on a hand-written result (tests/bench/canned_edit.json).

    python3 tests/test_bench_report.py

Standard library only (unittest); the plot test is skipped without matplotlib, and bench.py is imported
without PyTorch when it is absent (--dry-run and the report helpers need none).
"""

import contextlib
import copy
import io
import json
import math
import os
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
import bench  # noqa: E402
import markdown  # noqa: E402
import plot  # noqa: E402

CANNED = os.path.join(REPO, "tests", "bench", "canned_edit.json")
SPEC = os.path.join(REPO, "docs", "spec", "edit_attention_bwd.md")
SUITE1 = os.path.join(REPO, "suites", "sol066_workload.jsonl")
SUITE2 = os.path.join(REPO, "suites", "sol072_workload.jsonl")
FP16_PEERS = ("ours_fp16", "eager_fp16", "compile_fp16")


def load_canned():
    with open(CANNED) as f:
        return json.load(f)


def edit_row(B, T):
    return {"axes": {"batch_size": B, "seq_len": T}}


class Tools(unittest.TestCase):
    def test_fp16_peers_are_problem_2_tools_and_defaults(self):
        prob = bench.EditAttentionBwd()
        for tool in FP16_PEERS:
            self.assertIn(tool, bench.ALL_TOOLS)
            self.assertIn(tool, prob.tools)
            self.assertIn(tool, bench.tools_for(prob, None))
        self.assertIn("compile_tf32", bench.tools_for(prob, None))

    def test_problem_1_has_no_fp16_peer(self):
        prob = bench.SoftmaxDropoutBwd()
        self.assertEqual(bench.tools_for(prob, list(bench.ALL_TOOLS)), ["ours", "eager", "compile"])

    def test_parse_args_takes_the_tools_and_refuses_others(self):
        args = bench.parse_args(["--tools", "compile_fp16,eager_fp16,ours_fp16", "--precision", "fp16"])
        self.assertEqual(args.tools, ["compile_fp16", "eager_fp16", "ours_fp16"])
        self.assertEqual(bench.PRECISIONS[args.precision], 2)  # ATTNBWD_PRECISION_FP16
        self.assertEqual(bench.parse_args(["--tools", "all"]).tools, list(bench.ALL_TOOLS))
        with contextlib.redirect_stderr(io.StringIO()), self.assertRaises(SystemExit):
            bench.parse_args(["--tools", "compile_bf16"])

    def test_precision_of_each_tool(self):
        self.assertEqual(bench.split_tool("compile_fp16"), ("compile", "_fp16"))
        self.assertEqual(bench.split_tool("ours_graph"), ("ours_graph", ""))
        expected = {"ours": "tf32", "ours_graph": "tf32", "ours_fp16": "fp16", "eager": "fp32",
                    "compile_tf32": "tf32", "eager_fp16": "fp16", "compile_fp16": "fp16"}
        for tool, precision in expected.items():
            self.assertEqual(bench.tool_precision(tool, "tf32"), precision, tool)

    def test_quick_fills_only_what_is_not_given(self):
        args = bench.parse_args(["--quick", "--iters", "20"])
        self.assertEqual((args.only, args.iters, args.warmup), ("3", 20, 3))
        args = bench.parse_args([])
        self.assertEqual((args.only, args.iters, args.warmup), (None, 50, 10))


class FloorModel(unittest.TestCase):
    def test_flops_are_the_spec_formula(self):
        with open(SPEC) as f:
            spec = f.read()
        section = spec[spec.index("## Work that must be done"):]
        self.assertIn("B*T*8*2^20 multiply-adds", section)
        self.assertIn("4*B*16*T*T*64", section)
        self.assertEqual(bench.EditAttentionBwd.flop_formula, "2 * (B*T*8*2^20 + 4*B*16*T*T*64)")

    def test_flops_count_the_eight_products(self):
        """2 flops a multiply-add of each product of the spec's "Outputs" section, counted from its shapes."""
        prob = bench.EditAttentionBwd()
        C, H, D = 1024, 16, 64
        for B, T in ((64, 128), (1, 373), (32, 773), (1, 1)):
            rows = B * T
            projections = (rows * C * C        # grad_out_weight = grad_output^T @ attention_output
                           + rows * C * C      # gA = grad_output @ out_weight
                           + rows * 3 * C * C  # grad_hidden_states = grad_qkv @ qkv_weight
                           + 3 * C * rows * C)  # grad_qkv_weight = grad_qkv^T @ hidden_states
            attention = B * H * (T * T * D      # gPd = gA @ v^T
                                 + T * T * D    # gV = probs_dropped^T @ gA
                                 + T * T * D    # gQ = gS @ k
                                 + T * T * D)   # gK = gS^T @ q
            self.assertEqual(prob.floor_flops(edit_row(B, T)), 2 * (projections + attention), (B, T))

    def test_floor_is_the_max_of_matrix_and_memory_time(self):
        prob = bench.EditAttentionBwd()
        row = edit_row(64, 128)
        f = bench.floors(prob, row, copy_gbs=4000.0, rates={"tf32": 400.0, "fp16": 800.0})
        flops, nbytes = prob.floor_flops(row), prob.floor_bytes(row)
        self.assertEqual(nbytes, 2 * 64 * 16 * 128 * 128 * 4 + 64 * 2**20)
        self.assertAlmostEqual(f["floor_memory_us"], nbytes / 4000e9 * 1e6)
        self.assertAlmostEqual(f["floor_matrix_us"], flops / 400e12 * 1e6)
        self.assertAlmostEqual(f["floor_us"], max(f["floor_matrix_us"], f["floor_memory_us"]))
        self.assertAlmostEqual(f["floor_fp16_us"], max(flops / 800e12 * 1e6, f["floor_memory_us"]))
        # B=1,T=373 is memory-bound at the fp16 rate: the 64 MiB gradient outweighs its products
        small = bench.floors(prob, edit_row(1, 373), copy_gbs=4000.0, rates={"tf32": 400.0, "fp16": 800.0})
        self.assertEqual(small["floor_fp16_us"], small["floor_memory_us"])
        self.assertNotIn("floor_fp16_us", bench.floors(prob, row, 4000.0, {"tf32": 400.0}))


class ProfileSummary(unittest.TestCase):
    FLUSH = {"fill_u8", "spin_kernel"}

    @staticmethod
    def in_turn(kernels, t0=0.0):
        """(name, us) pairs as spans run one after another from t0."""
        out, t = [], t0
        for name, us in kernels:
            out.append((name, t, t + us))
            t += us
        return out

    def test_top_kernel_and_share_leave_the_flush_out(self):
        calls = 2
        kernels = self.in_turn([("fill_u8", 30.0), ("spin_kernel", 500.0)], -1000.0)
        for c in range(calls):
            kernels += self.in_turn([("gemm", 60.0), ("transpose", 10.0), ("transpose", 15.0), ("attention", 40.0)],
                                    1000.0 * c)
        s = bench.kernel_summary(kernels, self.FLUSH, calls)
        self.assertEqual(s["top_kernel"], "gemm")
        self.assertAlmostEqual(s["top_share"], 60.0 / 125.0)
        self.assertAlmostEqual(s["top_kernel_us"], 60.0)
        self.assertAlmostEqual(s["kernel_us_per_call"], 125.0)
        self.assertAlmostEqual(s["busy_us_per_call"], 125.0)
        self.assertEqual(s["kernels_per_call"], 4)
        self.assertEqual(s["top_launches_per_call"], 1)
        self.assertEqual([n for n, _ in s["kernels"]], ["gemm", "attention", "transpose"])

    def test_launches_of_one_name_add_up(self):
        kernels = self.in_turn([("gemm", 50.0)] + [("transpose", 20.0)] * 3)
        s = bench.kernel_summary(kernels, self.FLUSH, 1)
        self.assertEqual((s["top_kernel"], s["top_launches_per_call"]), ("transpose", 3))
        self.assertAlmostEqual(s["top_share"], 60.0 / 110.0)

    def test_side_by_side_kernels_share_the_stretch(self):
        # A transpose starved beside three short kernels runs 90 us; the gemm after them runs 60 alone. By summed
        # lengths the transpose would lead (90 of 240 us); it shares each of its stretches, so the gemm does.
        kernels = [("transpose", 0.0, 90.0), ("p", 0.0, 30.0), ("q", 30.0, 60.0), ("r", 60.0, 90.0),
                   ("gemm", 90.0, 150.0)]
        s = bench.kernel_summary(kernels, self.FLUSH, 1)
        self.assertEqual(s["top_kernel"], "gemm")
        self.assertAlmostEqual(s["top_share"], 60.0 / 150.0)
        self.assertAlmostEqual(s["kernel_us_per_call"], 240.0)
        self.assertAlmostEqual(s["busy_us_per_call"], 150.0)
        self.assertEqual([n for n, _ in s["kernels"][:2]], ["gemm", "transpose"])
        self.assertAlmostEqual(s["kernels"][1][1], 45.0 / 150.0)

    def test_attributed_time_adds_up_to_the_busy_time(self):
        total, busy = bench.attributed_us([("pass", 0.0, 80.0), ("transpose", 10.0, 90.0), ("gemm", 85.0, 100.0),
                                           ("gemm", 120.0, 130.0)])
        self.assertAlmostEqual(busy, 110.0)  # 0-100 and 120-130; the gap between is no one's
        self.assertAlmostEqual(total["pass"], 10.0 + 35.0)
        self.assertAlmostEqual(total["transpose"], 35.0 + 5.0 + 2.5)
        self.assertAlmostEqual(total["gemm"], 2.5 + 10.0 + 10.0)
        self.assertAlmostEqual(sum(total.values()), busy)

    def test_nothing_recorded_is_an_error(self):
        self.assertIn("error", bench.kernel_summary([("fill_u8", 0.0, 3.0)], self.FLUSH, 5))
        self.assertIn("error", bench.kernel_summary([], self.FLUSH, 5))


class DryRun(unittest.TestCase):
    def run_main(self, argv):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = bench.main(argv)
        return status, out.getvalue().splitlines()

    def test_both_suites_every_tool(self):
        status, lines = self.run_main(["--dry-run", "--tools", "all", SUITE2, SUITE1])
        self.assertEqual(status, 0)
        p2 = [line for line in lines if " edit_attention_bwd " in line]
        p1 = [line for line in lines if " softmax_dropout_bwd " in line]
        self.assertEqual((len(p2), len(p1)), (16, 16))
        for line in p2:
            for tool in FP16_PEERS + ("compile_tf32",):
                self.assertIn(tool, line.split(":")[1].split(";")[0].split(","))
        for line in p1:
            self.assertNotIn("fp16", line)
        first = bench.load_rows([SUITE2])[0]
        self.assertIn(f"matrix flops {bench.EditAttentionBwd().floor_flops(first)} ", p2[0])
        # 9 tools for each of the 16 rows of problem 2, 3 for problem 1; 4 and 1 of them torch.compile
        self.assertRegex(lines[-1], r"^192 tool runs \(64 torch\.compile\), 10 \+ 50 iterations each")

    def test_quick_runs_three_workloads(self):
        status, lines = self.run_main(["--dry-run", "--quick", SUITE2])
        self.assertEqual(status, 0)
        self.assertEqual(len([line for line in lines if line.startswith("[")]), 3)
        self.assertIn("3 + 10 iterations", lines[-1])


class Report(unittest.TestCase):
    def test_aggregate_counts_every_tools_checks(self):
        data = load_canned()
        g = bench.aggregate(data["workloads"], data["tools"])
        self.assertEqual((g["compile_fp16_passed"], g["compile_fp16_checked"]), (2, 3))
        self.assertEqual((g["eager_fp16_passed"], g["eager_fp16_checked"]), (2, 2))  # one did not run
        self.assertEqual((g["ours_passed"], g["ours_checked"]), (3, 3))
        self.assertAlmostEqual(g["ours_fp16_floor_fp16_fraction"],
                               math.exp(sum(math.log(v) for v in (0.304, 0.257, 0.235)) / 3))

    def test_markdown_shows_failures_kernels_and_columns(self):
        text = markdown.table(load_canned())
        lines = text.splitlines()
        self.assertIn("| B,T | floor us | fp16 floor us | ours us | ours_fp16 us | eager_tf32 us | compile_tf32 us | "
                      "eager_fp16 us | compile_fp16 us | floor/ours | check | worst output |", lines)
        row = next(line for line in lines if line.startswith("| 1,373 | 28.3 | 28.3 |"))
        self.assertIn("| 190.0 **FAIL** |", row)
        row = next(line for line in lines if line.startswith("| 2,352 | 32.9 |"))
        self.assertIn("| failed |", row)  # eager_fp16 did not run
        self.assertIn("compile_fp16 2/3 (fails 1,373)", text)
        self.assertIn("eager_fp16 2/2 (1 did not run)", text)
        self.assertIn("matrix flops = 2 * (B*T*8*2^20 + 4*B*16*T*T*64)", text)
        self.assertIn("fp16 800 TFLOP/s", text)
        ours = lines.index("**ours** (tf32), per workload:")
        self.assertEqual(lines[ours + 2], "| B,T | us | TFLOP/s | floor/time | most time: kernel, share | "
                                          "kernels a call | check | worst output |")
        self.assertEqual(lines[ours + 4], "| 64,128 | 729.4 | 200.2 | 0.501 | `grad_hidden_and_grad_qkv_weight` 48% "
                                          "| 13 | pass | grad_qkv_bias |")
        fp16 = lines.index("**ours_fp16** (fp16), per workload:")
        self.assertIn("fp16 floor/time", lines[fp16 + 2])
        self.assertIn("| 0.304 | `transpose` x4 31% | 14 |", lines[fp16 + 4])
        self.assertIn("| no profile |", lines[fp16 + 5])

    def test_markdown_puts_fp16_error_beside_tf32(self):
        data = load_canned()
        self.assertNotIn("Error against the fp64 reference", markdown.table(data))  # no max-abs errors recorded
        for r, (tf32, fp16) in zip(data["workloads"], ((0.02, 0.03), (0.01, 0.01), (0.04, 0.02))):
            r["tools"]["ours"]["check"].update(max_abs_err=tf32, atol=0.05)
            r["tools"]["ours_fp16"]["check"].update(max_abs_err=fp16, atol=0.05, worst="grad_hidden_states")
        lines = markdown.table(data).splitlines()
        head = lines.index("| B,T | atol | ours max-abs error | ours_fp16 max-abs error | fp16 / TF32 | ours match | "
                           "ours_fp16 match | worst outputs |")
        self.assertEqual(lines[head + 2], "| 64,128 | 0.05 | 0.02 | 0.03 | 1.50 | 0.99990 | 0.99980 | "
                                          "grad_qkv_bias / grad_hidden_states |")
        self.assertTrue(lines[head + 5].startswith("| **geomean** |  | 0.02 | 0.0182 | 0.91 |"))

    def test_markdown_names_the_profiles_share(self):
        data = load_canned()
        self.assertIn("share of our call's summed kernel time", markdown.table(data))
        data["profile"]["share_of"] = "busy"
        self.assertIn("share of our call's busy time", markdown.table(data))

    def test_markdown_without_profile_or_peers(self):
        data = load_canned()
        data["tools"] = ["ours", "compile_tf32"]
        data["profile"] = None
        for r in data["workloads"]:
            r["tools"] = {k: v for k, v in r["tools"].items() if k in data["tools"]}
            r["tools"]["ours"].pop("profile")
        text = markdown.table(data)
        self.assertNotIn("most time", text)
        self.assertNotIn("autocast", text)
        self.assertIn("| B,T | us | TFLOP/s | floor/time | check | worst output |", text)

    def test_markdown_reads_the_shipped_results(self):
        for name in ("benchmarks.json", "benchmarks_edit.json", "benchmarks_edit_h100.json"):
            with open(os.path.join(REPO, "docs", name)) as f:
                text = markdown.table(json.load(f))
            self.assertRegex(text, r"\| \*\*geomean\*\* \|.*\| 16/16 \|", name)

    def test_short_kernel_names(self):
        self.assertEqual(markdown.short_kernel("edit_attention_bwd_B64_T128_p0_attention_wg"), "attention_wg")
        self.assertEqual(markdown.short_kernel("softmax_dropout_bwd_B2_H8_T293_d1_v4"), "d1_v4")
        self.assertEqual(markdown.short_kernel("sm90_xmma_gemm"), "sm90_xmma_gemm")


class Plot(unittest.TestCase):
    def test_bars_follow_the_tools_of_the_json(self):
        data = load_canned()
        self.assertEqual([t for t, _, _ in plot.time_bars(data)], ["ours", "ours_fp16", "compile_tf32", "compile_fp16"])
        old = copy.deepcopy(data)
        old["tools"] = ["ours", "eager", "compile"]
        self.assertEqual([t for t, _, _ in plot.time_bars(old)], ["ours", "compile"])
        self.assertTrue(plot.tool_failed(data["workloads"][1], "compile_fp16"))
        self.assertFalse(plot.tool_failed(data["workloads"][1], "compile_tf32"))

    def test_geomean_line_leaves_out_a_tool_that_passed_nowhere(self):
        data = load_canned()
        bars = plot.time_bars(data)
        for r in data["workloads"]:
            r["tools"]["compile_fp16"]["ok"] = False
        line = plot.geomean_line(data["workloads"], bars)
        self.assertNotIn("nan", line)
        self.assertNotIn(dict((t, label) for t, label, _ in bars)["compile_fp16"] + " ", line)
        self.assertIn(dict((t, label) for t, label, _ in bars)["ours"] + " ", line)

    def test_times_plot_draws_a_png(self):
        try:
            import matplotlib
        except ImportError:
            self.skipTest("no matplotlib")
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "times.png")
            plot.plot_times(load_canned(), path, plt)
            with open(path, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
            self.assertGreater(os.path.getsize(path), 10_000)


if __name__ == "__main__":
    unittest.main(verbosity=1)
