#!/usr/bin/env python3
"""The machine code of every kernel a user gets, as one list to compare.

Compiles (for sm_90, no GPU needed) every kernel that the shipped tuning tables
and the heuristic give the public workloads, once for each GPU model whose
table the runtime consults (ATTNBWD_GPU_MODEL picks it, runtime/api.c's
configure_tuning) and once for a model with no table (the heuristic alone),
and prints one line per kernel function:

    CONFIG KERNEL BYTES SHA256-PREFIX

KERNEL is the name of a cubin's `.text.KERNEL` section: the kernel's
extern "C" name, which the plan gives it (shape and role, e.g.
edit_attention_bwd_B16_T176_p0_grad_query), so it stays the same when template
parameters change; the hash covers that section's bytes only. Whole cubins are
not compared: -lineinfo writes source paths and line numbers into them.

    cubin_text.py --cli build/attnbwd SUITE...                 print the list
    cubin_text.py --cli build/attnbwd --check LIST SUITE...    compare, exit 1 on a difference

The list (tests/cubin_text.list) changes only in a commit that says which
kernel changed and why.
"""
import argparse
import concurrent.futures
import hashlib
import os
import struct
import subprocess
import sys
import tempfile

# The GPU models whose tables are shipped (lua/tuning_*.lua's `gpu`), and one
# that matches no table.
CONFIGS = [
    ("h200", "NVIDIA H200"),
    ("h100", "NVIDIA H100 80GB HBM3"),
    ("heuristic", "no tuning table"),
]


def text_sections(cubin):
    """{name: bytes} of an ELF64 little-endian file's `.text.NAME` sections."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2 or cubin[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)

    def header(i):  # sh_name, sh_offset, sh_size
        name, _, _, _, offset, size = struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize)
        return name, offset, size

    _, strtab, _ = header(shstrndx)
    out = {}
    for i in range(shnum):
        name_at, offset, size = header(i)
        name = cubin[strtab + name_at:cubin.index(b"\0", strtab + name_at)].decode()
        if name.startswith(".text."):
            out[name[len(".text."):]] = cubin[offset:offset + size]
    return out


def compile_config(cli, model, suites, threads, work):
    """Dumps every kernel of the suites compiled with `model`'s table; returns the dump folder."""
    dump = os.path.join(work, "dump")
    os.makedirs(dump)
    env = dict(os.environ, ATTNBWD_GPU_MODEL=model, ATTNBWD_DUMP_DIR=dump,
               ATTNBWD_CACHE_DIR=os.path.join(work, "cache"))
    for switch in ("ATTNBWD_DETERMINISTIC", "ATTNBWD_LUA_DIR"):  # the shipped scripts' own tiles
        env.pop(switch, None)
    cmd = [cli, "prewarm", "--arch", "sm_90", "--no-cache", "-q", "--threads", str(threads)] + suites
    run = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if run.returncode != 0:
        raise RuntimeError("%s (ATTNBWD_GPU_MODEL=%r) failed:\n%s" % (" ".join(cmd), model, run.stdout))
    return dump


def listing(cli, suites):
    """The lines of the list, sorted."""
    cores = os.cpu_count() or 1
    threads = max(1, -(-cores // len(CONFIGS)))  # the three prewarms share the cores
    lines = []
    with tempfile.TemporaryDirectory(prefix="attnbwd-cubin-text-") as work, \
            concurrent.futures.ThreadPoolExecutor(len(CONFIGS)) as pool:
        jobs = {}
        for config, model in CONFIGS:
            folder = os.path.join(work, config)
            jobs[config] = pool.submit(compile_config, cli, model, suites, threads, folder)
        for config, _ in CONFIGS:
            dump = jobs[config].result()
            seen = {}
            for name in sorted(os.listdir(dump)):
                if not name.endswith(".cubin"):
                    continue
                with open(os.path.join(dump, name), "rb") as f:
                    sections = text_sections(f.read())
                for kernel, code in sections.items():
                    if kernel in seen:
                        raise RuntimeError("%s: kernel %s in both %s and %s" % (config, kernel, seen[kernel], name))
                    seen[kernel] = name
                    lines.append("%s %s %d %s" % (config, kernel, len(code), hashlib.sha256(code).hexdigest()[:16]))
            if not seen:
                raise RuntimeError("%s: no kernel was compiled (%s is empty)" % (config, dump))
    return sorted(lines)


def check(lines, path):
    with open(path) as f:
        want = [l.rstrip("\n") for l in f if l.strip() and not l.startswith("#")]
    got_keys = {" ".join(l.split()[:2]): l for l in lines}
    want_keys = {" ".join(l.split()[:2]): l for l in want}
    bad = 0
    for key in sorted(set(got_keys) | set(want_keys)):
        g, w = got_keys.get(key), want_keys.get(key)
        if g == w:
            continue
        bad += 1
        if g is None:
            print("missing now:   %s" % w)
        elif w is None:
            print("new kernel:    %s" % g)
        else:
            print("changed:       %s\n  listed:      %s" % (g, w))
    if bad:
        print("%d of %d kernels differ from %s: the machine code users run changed. If that is meant, "
              "regenerate the list (tests/cubin_text.py --cli build/attnbwd suites/*.jsonl > %s) in a commit "
              "that says which kernel changed and why." % (bad, len(want_keys), path, path))
        return 1
    print("%d kernels, the same .text bytes as %s" % (len(lines), path))
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cli", required=True, help="the attnbwd tool")
    p.add_argument("--check", metavar="LIST", help="compare with this list instead of printing")
    p.add_argument("suites", nargs="+", help="workload suites (.jsonl files or shipped names)")
    a = p.parse_args()
    try:
        lines = listing(a.cli, a.suites)
    except (RuntimeError, ValueError, OSError) as e:
        print("cubin_text.py: %s" % e, file=sys.stderr)
        return 2
    if a.check:
        return check(lines, a.check)
    print("# tests/cubin_text.py's list: CONFIG KERNEL .text-BYTES SHA256-PREFIX (see its docstring)")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
