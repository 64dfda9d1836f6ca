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


class Info(unittest.TestCase):
    def test_every_field_of_ctx_info(self):
        # The library fills the whole C struct: a binding shorter than it would be written past its end.
        with tempfile.TemporaryDirectory() as d:
            with attnbwd.Context(arch=SM90, cache_dir=d, gpu_model="h100") as ctx:
                info = ctx.info()
        self.assertEqual(info["gpu_model_from"], "options.gpu_model")
        self.assertIn("H100", info["gpu_model"])
        self.assertEqual(info["gpu_sm_count"], 132)
        self.assertEqual(info["tuning_table"], "lua/tuning_h100.lua")
        self.assertIn("tuning_h100", info["tuning_note"])
        self.assertEqual(info["cache_mode"], "read-write")
        self.assertEqual(info["cache_read"], 1)
        self.assertEqual(info["user_tuning_table"], "built-in")


class CacheTools(unittest.TestCase):
    def setUp(self):
        self._dirs = [tempfile.TemporaryDirectory() for _ in range(3)]
        self.cache, self.other, self.files = (t.name for t in self._dirs)
        self.shapes = [attnbwd.softmax_dropout_shape(1, 4, 17, dropout=False),
                       attnbwd.softmax_dropout_shape(1, 4, 33, dropout=True)]
        with attnbwd.Context(arch=SM90, cache_dir=self.cache) as ctx:
            self.keys = [ctx.get_kernel(s).info["cache_key"] for s in self.shapes]

    def tearDown(self):
        for t in self._dirs:
            t.cleanup()

    def test_stats_count_misses_hits_and_the_budget(self):
        with attnbwd.Context(arch=SM90, cache_dir=self.cache, cache_max_bytes=50 << 20) as ctx:
            self.assertEqual(ctx.get_kernel(self.shapes[0]).info["origin"], "disk")
            st = ctx.cache_stats()
        self.assertEqual(st["entries"], 2)
        self.assertGreater(st["bytes"], 1000)
        self.assertEqual(st["max_bytes"], 50 << 20)
        self.assertEqual(st["misses"], 2)
        self.assertEqual(st["hits"], 1)
        self.assertEqual(st["evicted"], 0)
        self.assertGreater(st["since"], 0)

    def test_list_tells_each_entry(self):
        with attnbwd.Context(arch=SM90, cache_dir=self.cache) as ctx:
            for verify in (False, True):
                entries = ctx.cache_list(verify=verify)
                self.assertEqual(sorted(e["key"] for e in entries), sorted(self.keys))
                by_key = {e["key"]: e for e in entries}
                e = by_key[self.keys[1]]
                self.assertIsNone(e["problem"])
                self.assertEqual(e["current"], 1)
                self.assertEqual(e["arch"], SM90)
                self.assertEqual(e["library_version"], attnbwd.__version__)
                self.assertEqual(e["shape"]["seq_len"], 33)
                self.assertEqual(e["shape"]["dropout"], 1)
                self.assertTrue(e["kernel"].startswith("softmax_dropout_bwd_B1_H4_T33_d1"), e["kernel"])
                self.assertIn("block=", e["tiles"])

    def test_list_names_a_damaged_entry(self):
        path = os.path.join(self.cache, self.keys[0] + ".atbc")
        with open(path, "r+b") as f:
            f.seek(-10, os.SEEK_END)
            byte = f.read(1)[0]
            f.seek(-10, os.SEEK_END)
            f.write(bytes([byte ^ 0xFF]))
        with attnbwd.Context(arch=SM90, cache_dir=self.cache) as ctx:
            problems = {e["key"]: e["problem"] for e in ctx.cache_list(verify=True)}
        self.assertTrue(problems[self.keys[0]], "a flipped byte is a problem under verify")
        self.assertIsNone(problems[self.keys[1]])

    def test_prune_to_a_budget(self):
        with attnbwd.Context(arch=SM90, cache_dir=self.cache) as ctx:
            files, nbytes = ctx.cache_prune(max_bytes=1)
            self.assertEqual(files, 2)
            self.assertGreater(nbytes, 1000)
            st = ctx.cache_stats()
            self.assertEqual((st["entries"], st["evicted"], st["evicted_bytes"]), (0, 2, nbytes))
            self.assertEqual(ctx.cache_list(), [])

    def test_export_and_import_one_entry(self):
        archive = os.path.join(self.files, "one.atba")
        with attnbwd.Context(arch=SM90, cache_dir=self.cache) as ctx:
            entries, nbytes = ctx.cache_export(archive, [self.keys[1][:8]])
            self.assertEqual(entries, 1)
            self.assertGreater(nbytes, 1000)
            with self.assertRaises(attnbwd.Error) as e:
                ctx.cache_export(os.path.join(self.files, "none.atba"), ["g"])
            self.assertEqual(e.exception.status, binding.ATTNBWD_ERR_INVALID_ARGUMENT)
        with attnbwd.Context(arch=SM90, cache_dir=self.other) as ctx:
            self.assertEqual(ctx.cache_import(archive)[0], 1)
            self.assertEqual([e["key"] for e in ctx.cache_list()], [self.keys[1]])
            self.assertEqual(ctx.get_kernel(self.shapes[1]).info["origin"], "disk")

    def test_import_refuses_what_is_not_an_archive(self):
        junk = os.path.join(self.files, "junk.atba")
        with open(junk, "wb") as f:
            f.write(b"not an archive" * 8)
        with attnbwd.Context(arch=SM90, cache_dir=self.other) as ctx:
            with self.assertRaises(attnbwd.Error) as e:
                ctx.cache_import(junk)
            self.assertIn("not an attnbwd cache archive", e.exception.message)
            self.assertEqual(ctx.cache_list(), [])

    def test_read_only_store_is_read_not_written(self):
        with attnbwd.Context(arch=SM90, cache_dir=self.cache, disk_cache="ro") as ctx:
            info = ctx.info()
            self.assertTrue(info["cache_mode"].startswith("read-only"), info["cache_mode"])
            self.assertEqual((info["cache_read"], info["disk_cache"]), (1, 0))
            self.assertEqual(ctx.get_kernel(self.shapes[0]).info["origin"], "disk")
            ctx.get_kernel(attnbwd.softmax_dropout_shape(1, 4, 9, dropout=False))
            with self.assertRaises(attnbwd.Error) as e:
                ctx.cache_prune(max_bytes=1)
            self.assertEqual(e.exception.status, binding.ATTNBWD_ERR_CACHE)
        self.assertEqual(len([n for n in os.listdir(self.cache) if n.endswith(".atbc")]), 2)


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
