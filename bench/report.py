"""What bench/bench.py and bench/markdown.py both read out of a result record: a value of one tool's run, its
verdict under the public rule, and a number formatted or "-". Standard library only."""


def fmt(v, spec):
    return format(v, spec) if v is not None else "-"


def tool_value(rec, tool, key):
    t = rec["tools"].get(tool)
    return t.get(key) if t else None


def tool_check(rec, tool):
    """The tool's verdict under the public rule: pass, FAIL, ERROR (did not run), n/c (not checked) or -."""
    t = rec["tools"].get(tool)
    if t is None:
        return "-"
    if not t.get("ok") and "check" not in t:
        return "ERROR"
    if "check" not in t:
        return "n/c"
    return "pass" if t["check"]["pass"] else "FAIL"
