#!/usr/bin/python3
"""A GTK 4 app for jankbpf's frame tests (issue 28): a drawing area redrawn
every frame by GTK's own frame clock (a tick callback), whose draw handler
spins in slow_paint() on planted frames. Software rendering
(GSK_RENDERER=cairo) on Wayland.

    gtk_frames.py [--frames N] [--warmup-ms MS] [--slow I:MS,...]

Ground truth on stdout, one JSON object per line: per drawn frame
{"frame", "draw_ns", "draw_ms", "planted_ms"} (CLOCK_MONOTONIC), then
{"done": true}.
"""
import json
import os
import sys
import time

os.environ.setdefault("GSK_RENDERER", "cairo")
os.environ.setdefault("GDK_BACKEND", "wayland")

import gi  # noqa: E402

gi.require_version("Gtk", "4.0")
from gi.repository import GLib, Gtk  # noqa: E402


def slow_paint(ms):
    """The planted slow frame's work: the Python function its stacks must name."""
    end = time.monotonic_ns() + ms * 1_000_000
    x = 0
    while time.monotonic_ns() < end:
        for i in range(200):
            x += i * i
    return x


class App:
    def __init__(self, frames, warmup_ms, slow):
        self.frames = frames
        self.slow = slow
        self.warmup_end = time.monotonic_ns() + warmup_ms * 1_000_000
        self.n = -1
        self.app = Gtk.Application(application_id=None)
        self.app.connect("activate", self.activate)

    def activate(self, app):
        win = Gtk.ApplicationWindow(application=app, title="gtk_frames")
        win.set_default_size(160, 120)
        self.area = Gtk.DrawingArea()
        self.area.set_draw_func(self.draw)
        win.set_child(self.area)
        # GTK's frame clock drives the redraws: one per frame it paints.
        self.area.add_tick_callback(self.tick)
        win.present()

    def tick(self, widget, clock):
        widget.queue_draw()
        return GLib.SOURCE_CONTINUE

    def draw(self, area, cr, width, height):
        start = time.monotonic_ns()
        if self.n < 0 and start >= self.warmup_end:
            self.n = 0
        planted = self.slow.get(self.n, 0) if self.n >= 0 else 0
        if planted:
            slow_paint(planted)
        shade = (self.n % 50) / 50.0 if self.n >= 0 else 0.2
        cr.set_source_rgb(shade, 0.3, 1.0 - shade)
        cr.paint()
        if self.n >= 0:
            print(json.dumps({"frame": self.n, "draw_ns": start,
                              "draw_ms": (time.monotonic_ns() - start) / 1e6,
                              "planted_ms": planted}), flush=True)
            self.n += 1
            if self.n >= self.frames:
                print(json.dumps({"done": True}), flush=True)
                self.app.quit()

    def run(self):
        return self.app.run([sys.argv[0]])


def main():
    frames, warmup_ms, slow = 200, 3500, {}
    args = sys.argv[1:]
    while args:
        opt, val = args[0], args[1]
        args = args[2:]
        if opt == "--frames":
            frames = int(val)
        elif opt == "--warmup-ms":
            warmup_ms = int(val)
        elif opt == "--slow":
            for part in val.split(","):
                i, ms = part.split(":")
                slow[int(i)] = int(ms)
        else:
            sys.exit(f"gtk_frames: unknown option {opt}")
    print(json.dumps({"pid": os.getpid()}), flush=True)
    sys.exit(App(frames, warmup_ms, slow).run())


if __name__ == "__main__":
    main()
