"""End-to-end tests of JavaScript frames (issue 13): a Node.js HTTP server
started with no flag at all, whose handlers hashPassword (crypto.pbkdf2Sync)
and renderReport (a Math.sin loop) each block the loop, must give janks
whose stacks name the handlers with their file, line and column -- read from
V8's own objects through the v8dbg_* constants the node binary exports --
and whose runnable_name is the handler."""
import json
import os
import re
import shutil

import pytest

from harness import need, run_jankbpf

IGNORE = "3"
NODE = shutil.which("node")

# The server asks itself, once jankbpf's startup grace is over: each
# request is one task of the main thread, as a real client's would be.
SERVER = '''\
const http = require('http');
const crypto = require('crypto');
function hashPassword(pw) {
  return crypto.pbkdf2Sync(pw, 'salt', 600000, 64, 'sha512').toString('hex');
}
function renderReport(n) {
  let s = 0;
  for (let i = 0; i < n; i++) s += Math.sin(i) * Math.sqrt(i);
  return String(s);
}
const server = http.createServer((req, res) => {
  const b = process.hrtime.bigint();
  let body = 'ok';
  if (req.url === '/login') body = hashPassword('hunter2');
  else if (req.url === '/report') body = renderReport(8e6);
  else if (req.url === '/warm') body = renderReport(4e6);
  const e = process.hrtime.bigint();
  console.error(JSON.stringify({url: req.url, begin_ns: Number(b), end_ns: Number(e)}));
  res.end(body);
});
function get(path) {
  return new Promise((ok) => http.get({port: server.address().port, host: '127.0.0.1', path},
                                      (r) => { r.resume(); r.on('end', ok); }));
}
server.listen(0, '127.0.0.1', () => setTimeout(async () => {
  await get('/warm');  // the first long task: its sampling starts then
  await get('/login');
  await get('/report');
  server.close();
}, 3500));
'''


def _require_node():
    need(NODE, "node is not installed")


def _line_col(src, needle):
    at = src.index(needle)
    line = src.count("\n", 0, at) + 1
    return line, at - (src.rfind("\n", 0, at) + 1) + 1


def test_node_server_handlers_are_named_without_flags(tmp_path):
    _require_node()
    script = tmp_path / "server.js"
    script.write_text(SERVER)
    rc, records, err = run_jankbpf("-v", "--ignore-startup-time", IGNORE, "--log-type", "1", "--dev",
                                   "--report-times-per-app", "3", "--log-dir", str(tmp_path / "logs"),
                                   "--", NODE, str(script), timeout=90)
    assert rc == 0, err[-3000:]
    assert re.search(r"pid \d+: /\S*node: V8: reading JavaScript frames", err), err[-3000:]
    truth = {t["url"]: t for t in (json.loads(l) for l in err.splitlines() if l.startswith("{"))}
    assert set(truth) == {"/warm", "/login", "/report"}, err[-3000:]
    janks = [r for r in records if r.get("type") == "jank"]

    def jank_of(url):
        t = truth[url]
        ours = [j for j in janks if j["begin_monotonic_ns"] <= t["begin_ns"] and
                j["begin_monotonic_ns"] + j["duration_ms"] * 1e6 >= t["end_ns"]]
        assert len(ours) == 1, (url, [(j["duration_ms"], j["heaviest_stack"][:300]) for j in janks])
        return ours[0]

    logs_checked = 0
    for url, handler, opening in (("/login", "hashPassword", "function hashPassword("),
                                  ("/report", "renderReport", "function renderReport(")):
        j = jank_of(url)
        line, col = _line_col(SERVER, opening)
        col += len(opening) - 1  # V8's position of a function: its parameter list
        lines = j["heaviest_stack"].splitlines()
        here = f"at {handler} ({script}:{line}:{col})"
        assert any(l.endswith(here) for l in lines), (here, j["heaviest_stack"])
        # Its caller, the anonymous request handler, and Node's own frames
        # (named, in node: files) rootward of it.
        i = next(k for k, l in enumerate(lines) if l.endswith(here))
        assert re.search(r"at \(anonymous\) \(" + re.escape(str(script)) + r":\d+:\d+\)$", lines[i + 1]), lines
        assert any(re.search(r"at \w+ \(node:_http_server\)$", l) for l in lines[i:]), lines
        assert not any("[js: unreadable]" in l for l in lines), lines
        js = [f for f in j["stack"] if f.get("runtime") == "js" and not f["file"].startswith("node:")]
        assert js[0]["symbol"] == handler, j["stack"][:8]
        assert js[0]["file"] == f"{script}:{line}" and js[0]["module_index"] == -1
        # Named after the application's function, not Node's pbkdf2Sync
        # wrapper that ran inside it.
        assert j["runnable_name"] == handler, (j["runnable_name"], lines)
        # The stack log (while the day's quota lasts) in the seed's JS form.
        for log in [p for p in j.get("external_log", []) if "/stack-" in p]:
            assert re.search(r"^\s*\d+ #\d+ " + re.escape(here) + "$", open(log).read(), re.M)
            logs_checked += 1
    assert logs_checked >= 1, [(x["duration_ms"], x.get("external_log")) for x in janks]
    # The hash's leaf is native (OpenSSL under node::crypto), the loop's
    # V8's own sin: native and JS frames interleave in one stack, and the
    # native walk goes on through the JS frames to V8's entry and beyond.
    login = jank_of("/login")["heaviest_stack"].splitlines()
    i = next(k for k, l in enumerate(login) if " at hashPassword " in l)
    assert any(re.search(r"PBKDF2|pbkdf2|EVP_|HMAC|SHA512|sha512|OPENSSL", l, re.I) for l in login[:i]), \
        "\n".join(login)
    report = jank_of("/report")["heaviest_stack"].splitlines()
    i = next(k for k, l in enumerate(report) if " at renderReport " in l)
    assert re.search(r"ieee754|sin|cos", report[0]), report
    assert any("Builtins_JSEntry" in l for l in report[i:]), "\n".join(report)
    assert any("uv__io_poll" in l for l in report[i:]), "\n".join(report)
    summary = [r for r in records if r.get("type") == "summary"][0]
    assert summary["runtime_frames"]["read"] > 0, summary
    # A few frames read after their task ended may be refused; not most.
    assert summary["runtime_frames"]["unreadable"] <= summary["runtime_frames"]["read"] // 10, summary


def test_node_jit_frames_unnamed_when_reads_are_refused(tmp_path):
    """With the reads turned off (JANKBPF_TEST_NO_RUNTIME_READ), JS frames
    say [js: unreadable] rather than guess, and nothing else changes."""
    _require_node()
    script = tmp_path / "loop.js"
    script.write_text(
        "function spin(ms) { const end = Date.now() + ms; let x = 0;\n"
        "  while (Date.now() < end) x += Math.sqrt(x + 1); return x; }\n"
        "setTimeout(() => spin(300), 3400);\n")
    rc, records, err = run_jankbpf("--ignore-startup-time", IGNORE, "--log-type", "1", "--log-dir",
                                   str(tmp_path / "logs"), "--", NODE, str(script),
                                   env={**os.environ, "JANKBPF_TEST_NO_RUNTIME_READ": "1"})
    assert rc == 0, err[-3000:]
    janks = [r for r in records if r.get("type") == "jank"]
    assert len(janks) == 1, err[-3000:]
    text = janks[0]["heaviest_stack"]
    assert "[js: unreadable]" in text and "at spin" not in text, text
    assert janks[0].get("runnable_name", "") == "", janks[0].get("runnable_name")
