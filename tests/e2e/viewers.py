"""Real readers for jankbpf's pictures, for the report tests: headless
Chromium (DOM and screenshot), protoc against Perfetto's schema, speedscope
served from localhost, and a PNG reader (zlib only) to tell a blank
screenshot from a drawn one."""
import http.server
import os
import shutil
import struct
import subprocess
import tempfile
import threading
import zlib

import pytest

from harness import BUILD, ROOT

PROTO_DIR = os.path.join(ROOT, "tests", "perfetto")
SPEEDSCOPE = os.path.join(BUILD, "test-deps", "speedscope", "node_modules", "speedscope", "dist", "release")


def need(ok, why):
    """A test that cannot run fails under CI and is skipped with its reason
    elsewhere (scripts/install-test-deps.sh installs what is missing)."""
    if ok:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"cannot run under CI: {why}")
    pytest.skip(why)


def chromium():
    path = shutil.which("chromium")
    need(path, "chromium is not installed (scripts/install-test-deps.sh)")
    return path


def _chromium(url, *extra, budget_ms=5000, timeout=120):
    with tempfile.TemporaryDirectory(prefix="jb-chromium-") as profile:
        args = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                "--no-first-run", f"--user-data-dir={profile}", f"--virtual-time-budget={budget_ms}",
                "--window-size=1400,1000", *extra, url]
        p = subprocess.run(args, capture_output=True, timeout=timeout)
    assert p.returncode == 0, p.stderr.decode(errors="replace")[-2000:]
    return p.stdout.decode(errors="replace")


def dump_dom(url, **kw):
    """The DOM after the page's scripts ran, as Chromium serializes it."""
    return _chromium(url, "--dump-dom", **kw)


def screenshot(url, path, *extra, **kw):
    _chromium(url, f"--screenshot={path}", *extra, **kw)
    return read_png(path)


def read_png(path):
    """(width, height, rows of (r, g, b) tuples) of an 8-bit RGB/RGBA PNG."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 0xff
            elif f == 2:
                line[i] = (line[i] + b) & 0xff
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xff
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xff
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(width)])
        prev = line
    return width, height, rows


def pixel_counts(png):
    """(non-white pixels, coloured pixels: channels apart by > 40)."""
    _, _, rows = png
    non_white = coloured = 0
    for row in rows:
        for r, g, b in row:
            if min(r, g, b) < 240:
                non_white += 1
            if max(r, g, b) - min(r, g, b) > 40:
                coloured += 1
    return non_white, coloured


def protoc_decode(path):
    """The trace as protoc's text format, decoded against Perfetto's schema."""
    protoc = shutil.which("protoc")
    need(protoc, "protoc is not installed (protobuf-compiler; scripts/install-test-deps.sh)")
    with open(path, "rb") as f:
        p = subprocess.run([protoc, f"--proto_path={PROTO_DIR}", "--decode=perfetto.protos.Trace",
                            os.path.join(PROTO_DIR, "perfetto_trace.proto")], stdin=f,
                           capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p.stdout.decode(errors="replace")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class LocalServer:
    """Serves a directory on 127.0.0.1 (an ephemeral port) from a thread."""

    def __init__(self, directory):
        handler = lambda *a, **kw: _Quiet(*a, directory=directory, **kw)
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
