#!/usr/bin/env python3
"""Writes tests/fuzz/corpus/fuzz_hotspot_frames/one_compiled_frame.bin: a
small JVM in fuzz_hotspot_frames.cpp's input layout (its jdk17() offsets)
-- one code heap and its segment map, an nmethod whose PcDesc at the
sample's pc names com.example.App.handle at App.java:42 (its scopes, its
metadata, the Method, ConstMethod and line table, constant pool, Klass
and symbols), and a stack returning into the call stub -- so the fuzzer
starts from a walk that reaches every decoder."""
import os
import struct

BASE, SP = 0x7F0000000000, 0x7FFD00000000
N = 12288
mem = bytearray(N)
stack = bytearray(N)


def put(buf, off, fmt, *v):
    struct.pack_into("<" + fmt, buf, off, *v)


def sym(off, text):
    put(mem, off + 4, "H", len(text))
    mem[off + 6:off + 6 + len(text)] = text


CALL_STUB_RET = BASE + 0x3800
# Statics: heaps, code bounds, the interpreter's StubQueue, the call stub's return, threads, version.
put(mem, 0x000, "QQQQQQi", BASE + 0x200, BASE + 0x1000, BASE + 0x3000, BASE + 0x300, CALL_STUB_RET, 0, 17)
put(mem, 0x200, "iiQ", 1, 1, BASE + 0x220)  # GrowableArray<CodeHeap*>: len, max, data
put(mem, 0x220, "Q", BASE + 0x400)
put(mem, 0x300 + 8, "Q", BASE + 0x3400)  # StubQueue: the interpreter at [0x3400, 0x3500)
put(mem, 0x300 + 20, "i", 0x100)
# CodeHeap: _memory (high_boundary, low), _segmap (low), log2 segment size 6.
put(mem, 0x400 + 8 + 8, "Q", BASE + 0x3000)
put(mem, 0x400 + 8 + 16, "Q", BASE + 0x1000)
put(mem, 0x400 + 120 + 16, "Q", BASE + 0x700)
put(mem, 0x400 + 256, "i", 6)
mem[0x600:0x608] = b"nmethod\0"
for i in range(0x720 // 64 + 1):  # the block at 0x1000: hops back to its first segment
    mem[0x700 + i] = min(i, 0xFE)
put(mem, 0x1000 + 8, "B", 1)  # HeapBlock: used
BLOB = 0x1010
put(mem, BLOB + 12, "iiiii", 0x700, 0, 0x10, 0x6F0, 4)  # size, header, frame complete, data, frame size
put(mem, BLOB + 32, "QQ", BASE + 0x1200, BASE + 0x1400)  # code begin, end
put(mem, BLOB + 96, "Q", BASE + 0x600)  # name
put(mem, BLOB + 112, "QQQ", BASE + 0x800, BASE + 0x1500, 0)  # method, scopes data, deopt handler
put(mem, BLOB + 260, "i", 0x680)  # metadata
put(mem, BLOB + 268, "ii", 0x600, 0x620)  # scopes pcs, their end
put(mem, BLOB + 300, "ii", -1, 7)  # orig pc offset, compile id
put(mem, BLOB + 0x600, "iiii", -1, 0, 0, 0)  # PcDescs: the sentinel, then pc 0x100 at scope 1
put(mem, BLOB + 0x610, "iiii", 0x100, 1, 0, 0)
mem[0x1501:0x1504] = bytes([0, 1, 6])  # scope: no sender, metadata 1, bci 5
put(mem, BLOB + 0x680, "Q", BASE + 0x800)
put(mem, 0x800 + 8, "Q", BASE + 0x900)  # Method: ConstMethod
put(mem, 0x800 + 40, "I", 0x9)
put(mem, 0x900 + 8, "Q", BASE + 0xA00)  # ConstMethod: pool, flags, code size, name index
put(mem, 0x900 + 28, "HxxHH", 1, 10, 1)
mem[0x930 + 10:0x930 + 15] = bytes([0xFF, 0, 84, (5 << 3) | 1, 0])  # lines: (0, 42), (5, 43)
put(mem, 0xA00 + 24, "Q", BASE + 0xB00)  # ConstantPool: holder, source file index, length
put(mem, 0xA00 + 54, "H", 2)
put(mem, 0xA00 + 60, "i", 3)
put(mem, 0xA48 + 8, "QQ", BASE + 0xC00, BASE + 0xC40)
put(mem, 0xB00 + 24, "Q", BASE + 0xC80)
sym(0xC00, b"handle")
sym(0xC40, b"App.java")
sym(0xC80, b"com/example/App")
# The stack: the compiled frame (4 words), returning into the call stub,
# whose frame (at fp) holds the call wrapper, whose anchor is empty.
FP = SP + 0x100
put(stack, 16, "QQ", FP, CALL_STUB_RET)
put(stack, 0x100 - 48, "Q", BASE + 0xD00)
put(stack, 0x108, "Q", 0x401234)
regs = struct.pack("<QQQQQQ", BASE + 0x1280, 0, 0x100, 0, 0, 1)
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_hotspot_frames",
                   "one_compiled_frame.bin")
with open(out, "wb") as f:
    f.write(regs + bytes(stack) + bytes(mem))
print(out)
