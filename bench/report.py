"""What bench/bench.py and bench/markdown.py both read out of a result record: a value of one tool's run, its
verdict under the public rule, a number formatted or "-", and the geometric mean of the known values. Standard
library only."""
import math


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


def geomean(values):
    """The geometric mean of the positive finite values (None and others left out); None where there are none."""
    values = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not values:
        return None
    return math.exp(sum(math.log(v) for v in values) / len(values))
