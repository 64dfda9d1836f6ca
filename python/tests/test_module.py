"""The attnbwd module on a machine without a GPU or torch: kernels compile for an arch, errors carry the library's
message, the library is the one installed beside the module.

    python3 python/tests/test_module.py        (the installed package; ATTNBWD_LIBRARY names another library)

ctest runs it in a fresh virtual environment after `pip install .` (test_python_package)."""

import os
import sys
import tempfile
import unittest

import attnbwd
from attnbwd import binding

SM90 = "sm_90"


class Import(unittest.TestCase):
    def test_no_torch_needed(self):
        self.assertNotIn("torch", sys.modules, "import attnbwd must not import torch")

    def test_library_beside_the_module(self):
        if os.environ.get("ATTNBWD_LIBRARY"):
            self.skipTest("ATTNBWD_LIBRARY names the library")
        here = os.path.dirname(os.path.abspath(attnbwd.__file__))
        self.assertEqual(attnbwd.library().path, os.path.join(here, "libattnbwd.so"))
        self.assertFalse(os.environ.get("LD_LIBRARY_PATH"), "the library must load without LD_LIBRARY_PATH")

    def test_version_is_the_header_one(self):
        self.assertEqual(attnbwd.__version__, binding.ATTNBWD_VERSION_STRING)

    def test_torch_part_needs_torch(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            with self.assertRaises(ImportError):
                import attnbwd.torch  # noqa: F401
        else:
            self.skipTest("torch is installed")


class Compile(unittest.TestCase):
    def test_problem1_kernel_for_sm90(self):
        ctx = attnbwd.Context(arch=SM90, disk_cache=False)
        shape = attnbwd.softmax_dropout_shape(2, 16, 541, dropout=True)
        k = ctx.get_kernel(shape)
        self.assertEqual(k.info["arch"], SM90)
        self.assertEqual(k.info["origin"], "compile")
        self.assertTrue(k.info["name"].startswith("softmax_dropout_bwd_B2_H16_T541_d1"), k.info["name"])
        self.assertGreater(k.info["cubin_bytes"], 1000)
        self.assertEqual(k.info["shape"]["seq_len"], 541)
        self.assertIs(ctx.get_kernel(shape), k, "a second call returns the kernel held in memory")
        self.assertEqual(k.workspace_bytes, 0)
        ctx.close()

    def test_problem2_plan_and_source(self):
        ctx = attnbwd.Context(arch=SM90, disk_cache=False)
        source, tiles = ctx.generate(attnbwd.edit_attention_shape(2, 17, precision="fp16"))
        self.assertIn("__global__", source)
        self.assertIn("precision=2", tiles)
        self.assertEqual(ctx.info()["arch"], SM90)

    def test_disk_cache_hit_in_a_second_context(self):
        with tempfile.TemporaryDirectory() as d:
            shape = attnbwd.softmax_dropout_shape(1, 4, 17, dropout=False)
            with attnbwd.Context(arch=SM90, cache_dir=d) as first:
                self.assertEqual(first.get_kernel(shape).info["origin"], "compile")
                self.assertEqual(first.info()["cache_entries"], 1)
            with attnbwd.Context(arch=SM90, cache_dir=d) as second:
                self.assertEqual(second.get_kernel(shape).info["origin"], "disk")
                files, nbytes = second.cache_clear()
                self.assertGreaterEqual(files, 1)
                self.assertGreater(nbytes, 0)
                self.assertEqual(second.info()["cache_entries"], 0)

    def test_candidates_tiles_and_prewarm(self):
        ctx = attnbwd.Context(arch=SM90, disk_cache=False)
        shape = attnbwd.softmax_dropout_shape(1, 2, 64, dropout=True)
        candidates = ctx.candidates(shape)
        self.assertGreater(len(candidates), 1)
        other = ctx.get_kernel(shape, tiles=candidates[1])
        self.assertEqual(other.info["tiles"], candidates[1])
        events = []
        summary = ctx.prewarm([shape, attnbwd.softmax_dropout_shape(1, 2, 17, dropout=False)], threads=1,
                              progress=events.append)
        self.assertEqual(summary["compiled"] + summary["from_memory"], 2)
        self.assertEqual(summary["failed"], 0)
        self.assertEqual(sorted(e["index"] for e in events), [0, 1])

    def test_log_lines_reach_the_callback(self):
        lines = []
        ctx = attnbwd.Context(arch=SM90, disk_cache=False, log=lambda level, line: lines.append((level, line)),
                              log_level=binding.ATTNBWD_LOG_INFO)
        ctx.get_kernel(attnbwd.softmax_dropout_shape(1, 1, 5, dropout=False))
        self.assertTrue(any("compiled" in line for _, line in lines), lines)


class Errors(unittest.TestCase):
    def test_bad_arch(self):
        with self.assertRaises(attnbwd.Error) as e:
            attnbwd.Context(arch="sm_x", disk_cache=False)
        self.assertEqual(e.exception.status, binding.ATTNBWD_ERR_INVALID_ARGUMENT)
        self.assertEqual(e.exception.status_name, "ATTNBWD_ERR_INVALID_ARGUMENT")
        self.assertIn('options.arch = "sm_x"', e.exception.message)
        self.assertIn("ATTNBWD_ERR_INVALID_ARGUMENT", str(e.exception))

    def test_shape_past_a_limit(self):
        ctx = attnbwd.Context(arch=SM90, disk_cache=False)
        with self.assertRaises(attnbwd.Error) as e:
            ctx.get_kernel(attnbwd.edit_attention_shape(1, 1025))
        self.assertEqual(e.exception.status, binding.ATTNBWD_ERR_UNSUPPORTED)
        self.assertIn("T <= 1024", e.exception.message)

    def test_null_pointers_refused_before_any_launch(self):
        ctx = attnbwd.Context(arch=SM90, disk_cache=False)
        k = ctx.get_kernel(attnbwd.softmax_dropout_shape(1, 1, 8, dropout=False))
        with self.assertRaises(attnbwd.Error) as e:
            k.softmax_dropout_bwd(0, 0, 0, 0, 0.0, 0)
        self.assertEqual(e.exception.status, binding.ATTNBWD_ERR_INVALID_ARGUMENT)
        self.assertTrue(e.exception.message, "the library's message")

    def test_closed_context(self):
        ctx = attnbwd.Context(arch=SM90, disk_cache=False)
        ctx.close()
        with self.assertRaises(attnbwd.Error) as e:
            ctx.get_kernel(attnbwd.softmax_dropout_shape(1, 1, 8, dropout=False))
        self.assertIn("closed", e.exception.message)

    def test_unknown_precision(self):
        with self.assertRaises(ValueError):
            attnbwd.edit_attention_shape(1, 17, precision="bf16")


if __name__ == "__main__":
    unittest.main()
