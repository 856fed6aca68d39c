"""Real jankbpf output against what fleets consume it with: the versioned
JSON Schema (schema/jankbpf-records.schema.json) and the OpenTelemetry
Collector filelog recipe (contrib/otel/jankbpf-filelog.yaml).

One run makes every record type: a spinning jank (on-CPU stacks), a
sleeping task long enough for a hang and then its jank (off-CPU stacks),
the target's exit, and the summary.
"""
import json
import os
import re

import pytest

from harness import ROOT, Jankbpf, need as need_or_skip
import target as target_mod

SCHEMA = os.path.join(ROOT, "schema", "jankbpf-records.schema.json")
RECIPE = os.path.join(ROOT, "contrib", "otel", "jankbpf-filelog.yaml")
UNIT = os.path.join(ROOT, "debian", "jankbpf.service")


def need(module):
    """Imports a test dependency, or skips (fails under CI) saying which."""
    try:
        return __import__(module)
    except ImportError:
        need_or_skip(False, f"python3 module {module} is missing (scripts/install-deps.sh installs it)")


@pytest.fixture(scope="module")
def lines(tmp_path_factory):
    """Raw JSON lines of one real run, as jankbpf wrote them to --output."""
    tmp = tmp_path_factory.mktemp("records")
    out = tmp / "janks.jsonl"
    argv = target_mod.command("spin:200,sleep:700", start_delay=3.5, truth=tmp / "truth.jsonl")
    jb = Jankbpf("--output", str(out), "--ignore-startup-time", "3", "--hang-threshold", "450",
                 "--trace-threshold", "5000", "--", *argv)
    rc = jb.wait(timeout=60)
    assert rc == 0, jb.stderr
    raw = out.read_text().splitlines()
    types = [json.loads(l)["type"] for l in raw]
    for kind in ("jank", "hang", "exit", "summary"):
        assert kind in types, f"the run made no {kind} record: {types}"
    return raw


# --- schema ------------------------------------------------------------------

def test_schema_is_valid_draft_2020_12():
    jsonschema = need("jsonschema")
    schema = json.load(open(SCHEMA))
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_schema_rejects_a_known_field_of_the_wrong_type():
    """The open schema still judges the fields it knows."""
    jsonschema = need("jsonschema")
    v = jsonschema.Draft202012Validator(json.load(open(SCHEMA)))
    exit_rec = {"type": "exit", "time": 1, "pid": 2, "bundle_name": "x", "exit_code": 0, "target": True}
    assert v.is_valid(exit_rec)
    assert v.is_valid({**exit_rec, "a_field_from_a_later_minor_version": [1]})
    assert not v.is_valid({**exit_rec, "pid": "2"})
    assert not v.is_valid({**exit_rec, "type": "nonsense"})
    summary = {k: 0 for k in v.schema["$defs"]["summary"]["required"]}
    summary.update(type="summary", schema_version="1.6", watchdog="timer", bpf=[])
    assert v.is_valid(summary)
    assert not v.is_valid({**summary, "features_missing": "bpf_timer"})  # an array of strings
    assert not v.is_valid({**summary, "janks": -1})


def test_real_records_validate_and_summary_names_the_schema_version(lines):
    jsonschema = need("jsonschema")
    schema = json.load(open(SCHEMA))
    v = jsonschema.Draft202012Validator(schema)
    unknown = set()
    for line in lines:
        rec = json.loads(line)
        errors = sorted(v.iter_errors(rec), key=lambda e: list(e.path))
        assert not errors, f"{rec['type']} record: " + "; ".join(
            f"{'/'.join(map(str, e.path))}: {e.message}" for e in errors[:5])
        known = schema["$defs"]["task"]["properties"] if rec["type"] in ("jank", "hang") \
            else schema["$defs"][rec["type"]]["properties"]
        unknown |= {f"{rec['type']}.{k}" for k in rec if k not in known}
    if unknown:
        # Allowed (the schema is open for minor additions) but worth a line.
        print(f"fields the schema does not list yet: {sorted(unknown)}")
    summary = json.loads(lines[-1])
    assert summary["type"] == "summary"
    assert summary["schema_version"] == schema["x-jankbpf-schema-version"]
    assert schema["$id"].endswith(":" + summary["schema_version"])


# --- OpenTelemetry filelog recipe ---------------------------------------------

FIELD = re.compile(r'^(attributes|resource)(?:\.([A-Za-z_][A-Za-z0-9_]*)|\["([^"]+)"\])$')


def field(spec):
    m = FIELD.match(spec)
    assert m, f"recipe field {spec!r}: this test knows attributes.x, attributes[\"x\"], resource[\"x\"]"
    return m.group(1), m.group(2) or m.group(3)


class Entry:
    """A log record as stanza operators see it."""

    def __init__(self, line):
        self.body = line
        self.maps = {"attributes": {}, "resource": {}}
        self.timestamp_ms = None
        self.severity = None

    def get(self, spec):
        where, key = field(spec)
        return self.maps[where].get(key)

    def pop(self, spec):
        where, key = field(spec)
        return self.maps[where].pop(key)

    def set(self, spec, value):
        where, key = field(spec)
        self.maps[where][key] = value


def condition_holds(entry, cond):
    """The one form of `if` the recipe may use: '<field> != nil'."""
    if cond is None:
        return True
    m = re.fullmatch(r"\s*(\S+)\s*!=\s*nil\s*", cond)
    assert m, f"recipe condition {cond!r}: this test knows only '<field> != nil'"
    return entry.get(m.group(1)) is not None


def apply_operator(entry, op):
    kind = op["type"]
    if not condition_holds(entry, op.get("if")):
        return
    if kind == "json_parser":
        assert op.get("parse_from", "body") == "body"
        entry.maps["attributes"].update(json.loads(entry.body))
        ts = op["timestamp"]
        assert ts["layout_type"] == "epoch"
        scale = {"ms": 1, "s": 1000}[ts["layout"]]
        entry.timestamp_ms = entry.get(ts["parse_from"]) * scale
        sev = op["severity"]
        value = entry.get(sev["parse_from"])
        for level, matches in sev["mapping"].items():
            if value in (matches if isinstance(matches, list) else [matches]):
                entry.severity = level.upper()
    elif kind == "move":
        entry.set(op["to"], entry.pop(op["from"]))
    elif kind == "add":
        entry.set(op["field"], op["value"])
    else:
        pytest.fail(f"the recipe uses operator {kind!r}, which this test cannot check")


def test_otel_recipe_maps_real_records(lines):
    yaml = need("yaml")
    recipe = yaml.safe_load(open(RECIPE))
    receiver = recipe["receivers"]["filelog/jankbpf"]
    # The recipe reads the file the packaged unit writes.
    unit = open(UNIT).read()
    for path in receiver["include"]:
        assert f"--output {path}" in unit, f"{path} is not where jankbpf.service writes"
    assert "filelog/jankbpf" in recipe["service"]["pipelines"]["logs"]["receivers"]

    want_severity = {"jank": "WARN", "hang": "ERROR", "exit": "INFO", "summary": "INFO"}
    resource_of = {"pid": "process.pid", "bundle_name": "process.executable.name",
                   "exe": "process.executable.path", "container_id": "container.id"}
    attribute_of = {"tid": "thread.id", "thread_name": "thread.name"}
    seen = set()
    for line in lines:
        rec = json.loads(line)
        entry = Entry(line)
        for op in receiver["operators"]:
            apply_operator(entry, op)
        seen.add(rec["type"])
        assert entry.timestamp_ms == rec["time"], rec["type"]
        assert entry.severity == want_severity[rec["type"]], rec["type"]
        res, attrs = entry.maps["resource"], entry.maps["attributes"]
        for src, dst in resource_of.items():
            assert res.get(dst) == rec.get(src), f"{rec['type']}: resource {dst}"
            assert src not in attrs
        for src, dst in attribute_of.items():
            assert attrs.get(dst) == rec.get(src), f"{rec['type']}: attribute {dst}"
        # Everything else stays an attribute, as jankbpf wrote it.
        moved = set(resource_of) | set(attribute_of)
        for k, v in rec.items():
            if k not in moved:
                assert attrs[k] == v, f"{rec['type']}: attribute {k}"
    assert seen == set(want_severity)
