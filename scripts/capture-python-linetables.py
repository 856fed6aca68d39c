#!/usr/bin/env python3
"""Writes tests/fixtures/python/linetable-X.Y.json: real co_linetable bytes
of a few functions as this interpreter compiled them, with the line of every
code unit (co_positions), so the unit tests check jankbpf's location-table
decoder against CPython itself. Run with the python whose tables you want:
  /usr/bin/python3.11 scripts/capture-python-linetables.py
"""
import json
import os
import sys

SOURCE = '''
def simple(a, b):
    c = a + b
    return c

def branches(x):
    if x > 10:
        y = x * 2
    else:
        y = x - 1
    for i in range(3):
        y += i
    return y

def far(x):
    z = x
''' + "\n" * 300 + '''
    z += 1
    try:
        z = z / 0
    except ZeroDivisionError:
        z = -1
    return [k for k in range(z)]
'''

ns = {}
exec(compile(SOURCE, "fixture.py", "exec"), ns)
out = {"version": list(sys.version_info[:3]), "functions": []}
for name in ("simple", "branches", "far"):
    co = ns[name].__code__
    lines = [p[0] if p[0] is not None else 0 for p in co.co_positions()]
    out["functions"].append({"name": name, "firstlineno": co.co_firstlineno,
                             "linetable": co.co_linetable.hex(), "unit_lines": lines})
here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "..", "tests", "fixtures", "python",
                    "linetable-%d.%d.json" % sys.version_info[:2])
with open(path, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print(path)
