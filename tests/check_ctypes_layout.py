"""Compares bench/attnbwd_ctypes.py's structs with the C compiler's layout of include/attnbwd.h.

    python3 tests/check_ctypes_layout.py PATH/TO/ctypes_layout

ctypes_layout (tests/ctypes_layout.c) prints each struct's size and its members' offsets in order; a binding
whose members, order, offsets or size differ would hand libattnbwd.so a struct of another shape (a field the
header grew would be written past the end of the Python object). Exit 0 when all agree, 1 with the
differences."""

import ctypes
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import attnbwd_ctypes as b  # noqa: E402

BINDING = {"attnbwd_options": b.Options, "attnbwd_shape": b.Shape, "attnbwd_kernel_info": b.KernelInfo,
           "attnbwd_edit_attention_args": b.EditAttentionArgs}
CONSTS = {"ATTNBWD_OK": b.ATTNBWD_OK, "ATTNBWD_SOFTMAX_DROPOUT_BWD": b.ATTNBWD_SOFTMAX_DROPOUT_BWD,
          "ATTNBWD_EDIT_ATTENTION_BWD": b.ATTNBWD_EDIT_ATTENTION_BWD}
ORIGIN_NAMES = {"ATTNBWD_FROM_COMPILE": "compile", "ATTNBWD_FROM_DISK": "disk", "ATTNBWD_FROM_MEMORY": "memory"}


def c_layout(exe):
    structs, consts, current = {}, {}, None
    for line in subprocess.run([exe], check=True, capture_output=True, text=True).stdout.splitlines():
        kind, name, value = line.split()
        if kind == "struct":
            current = structs[name] = {"size": int(value), "fields": []}
        elif kind == "field":
            current["fields"].append((name, int(value)))
        else:
            consts[name] = int(value)
    return structs, consts


def main():
    structs, consts = c_layout(sys.argv[1])
    problems = []
    for name, cls in BINDING.items():
        c = structs.get(name)
        if c is None:
            problems.append(f"{name}: not printed by {sys.argv[1]}")
            continue
        py = [(f[0], getattr(cls, f[0]).offset) for f in cls._fields_]
        if py != c["fields"]:
            problems.append(f"{name}: members and offsets\n  C:      {c['fields']}\n  ctypes: {py}")
        if ctypes.sizeof(cls) != c["size"]:
            problems.append(f"{name}: size {c['size']} in C, {ctypes.sizeof(cls)} in ctypes")
    for name, value in CONSTS.items():
        if consts.get(name) != value:
            problems.append(f"{name}: {consts.get(name)} in C, {value} in ctypes")
    for name, label in ORIGIN_NAMES.items():
        if b.ORIGINS.get(consts.get(name)) != label:
            problems.append(f"{name} = {consts.get(name)}: ORIGINS says {b.ORIGINS.get(consts.get(name))!r}")
    for p in problems:
        print(p)
    print(f"{len(BINDING)} structs and {len(CONSTS) + len(ORIGIN_NAMES)} constants compared: "
          f"{'ok' if not problems else str(len(problems)) + ' differences'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
