"""Compares python/attnbwd/binding.py with include/attnbwd.h as the C compiler and the header itself say.

    python3 tests/check_ctypes_layout.py PATH/TO/ctypes_layout [PATH/TO/attnbwd.h]

ctypes_layout (tests/ctypes_layout.c) prints each struct's size and its members' offsets in order, and every
constant's value; a binding whose members, order, offsets or size differ would hand libattnbwd.so a struct of
another shape (a field the header grew would be written past the end of the Python object). The header is read
too: every struct with a body and every constant it declares must be printed by ctypes_layout and bound, and every
function it declares (ATTNBWD_API) must have a prototype in the binding with as many arguments, so that the binding
stays the whole header. Exit 0 when all agree, 1 with the differences."""

import ctypes
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))
from attnbwd import binding as b  # noqa: E402


def c_layout(exe):
    structs, consts, strings, current = {}, {}, {}, None
    for line in subprocess.run([exe], check=True, capture_output=True, text=True).stdout.splitlines():
        kind, name, value = line.split(maxsplit=2)
        if kind == "struct":
            current = structs[name] = {"size": int(value), "fields": []}
        elif kind == "field":
            current["fields"].append((name, int(value)))
        elif kind == "string":
            strings[name] = value
        else:
            consts[name] = int(value)
    return structs, consts, strings


# An integer constant as the header writes one: 2, (-1), 1u, (UINT64_C(1) << 30).
INTEGER_MACRO = re.compile(r"\(?-?(?:\d+[uU]?|U?INT64_C\(\d+\))(?:\s*<<\s*\d+)?\)?")


def header_declarations(path):
    """(struct names with a body, integer constant names, string macro names, {function: argument count,
    returns void}) declared by the header."""
    text = re.sub(r"/\*.*?\*/", "", open(path).read(), flags=re.S)
    structs = re.findall(r"typedef struct (attnbwd_\w+) \{", text)
    consts = []
    for body in re.findall(r"typedef enum \w+ \{(.*?)\}", text, flags=re.S):
        consts += re.findall(r"(ATTNBWD_\w+)\s*(?:=[^,]*)?(?:,|$)", body.strip())
    strings = []
    for name, value in re.findall(r"#define (ATTNBWD_\w+)[ \t]+(.+)", text):
        if value.startswith('"'):
            strings.append(name)
        elif INTEGER_MACRO.fullmatch(value.strip()):
            consts.append(name)
    functions = {}
    for ret, name, params in re.findall(r"ATTNBWD_API\s+([^;(]*?)\s*\b(attnbwd_\w+)\s*\(([^;]*?)\)\s*;", text):
        params = params.strip()
        n = 0 if params in ("", "void") else params.count(",") + 1
        functions[name] = (n, ret.strip() == "void")
    return structs, consts, strings, functions


def compare_structs(structs, declared, problems):
    for name in declared:
        if name not in structs:
            problems.append(f"struct {name}: declared by the header, not printed by ctypes_layout")
        if name not in b.STRUCTS:
            problems.append(f"struct {name}: declared by the header, not in binding.STRUCTS")
    for name, cls in b.STRUCTS.items():
        c = structs.get(name)
        if c is None:
            problems.append(f"{name}: not printed by ctypes_layout")
            continue
        py = [(f[0], getattr(cls, f[0]).offset) for f in cls._fields_]
        if py != c["fields"]:
            problems.append(f"{name}: members and offsets\n  C:      {c['fields']}\n  ctypes: {py}")
        if ctypes.sizeof(cls) != c["size"]:
            problems.append(f"{name}: size {c['size']} in C, {ctypes.sizeof(cls)} in ctypes")


def compare_constants(consts, strings, declared, declared_strings, problems):
    for name in declared:
        if name not in consts:
            problems.append(f"{name}: declared by the header, not printed by ctypes_layout")
    for name, value in consts.items():
        if getattr(b, name, None) != value:
            problems.append(f"{name}: {value} in C, {getattr(b, name, None)} in the binding")
    for name in declared_strings:
        if strings.get(name) is None or getattr(b, name, None) != strings[name]:
            problems.append(f"{name}: {strings.get(name)!r} in C, {getattr(b, name, None)!r} in the binding")
    for name, label in (("ATTNBWD_FROM_COMPILE", "compile"), ("ATTNBWD_FROM_DISK", "disk"),
                        ("ATTNBWD_FROM_MEMORY", "memory")):
        if b.ORIGINS.get(consts.get(name)) != label:
            problems.append(f"{name} = {consts.get(name)}: ORIGINS says {b.ORIGINS.get(consts.get(name))!r}")


def compare_functions(functions, problems):
    for name, (n, returns_void) in functions.items():
        proto = b.PROTOTYPES.get(name)
        if proto is None:
            problems.append(f"{name}: declared by the header, no prototype in the binding")
            continue
        if len(proto[1]) != n:
            problems.append(f"{name}: {n} arguments in the header, {len(proto[1])} in the binding")
        if (proto[0] is None) != returns_void:
            problems.append(f"{name}: returns {'void' if returns_void else 'a value'} in the header, "
                            f"restype {proto[0]} in the binding")
    for name in b.PROTOTYPES:
        if name not in functions:
            problems.append(f"{name}: in the binding, not declared by the header")


def main():
    header = sys.argv[2] if len(sys.argv) > 2 else os.path.join(REPO, "include", "attnbwd.h")
    structs, consts, strings = c_layout(sys.argv[1])
    d_structs, d_consts, d_strings, functions = header_declarations(header)
    problems = []
    compare_structs(structs, d_structs, problems)
    compare_constants(consts, strings, d_consts, d_strings, problems)
    compare_functions(functions, problems)
    for p in problems:
        print(p)
    print(f"{len(b.STRUCTS)} structs, {len(consts) + len(strings)} constants and {len(functions)} functions "
          f"compared: {'ok' if not problems else str(len(problems)) + ' differences'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
