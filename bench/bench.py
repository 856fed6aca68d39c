#!/usr/bin/python3
"""The bench's entry point: `sudo python3 bench/bench.py [--only a,b]`
is `python3 -m jankbench` run from bench/ (see jankbench/__main__.py)."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from jankbench.__main__ import entry  # noqa: E402

entry()
