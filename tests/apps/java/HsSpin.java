// The live HotSpot unit tests' target (tests/unit/test_hotspot_frames.cpp):
// a thread named "hs-spin" spinning in work() <- helper() <- middle() <-
// outer(); it writes one byte to stdout when it has spun for the
// ms given. Compiled, helper() is inlined into middle() (or both into outer()'s
// loop compiled on the stack, if C2 does that first), and work() is too big to
// be (C2's FreqInlineSize: 325 bytes of bytecode): a call of its own whose
// return address has the inlined frames in its debug info. (Lines are tested.)
public class HsSpin {
  static volatile long sink;

  static long work(long x) {
    long a = x, b = x + 1, c = x + 2, d = x + 3;
    for (int i = 0; i < 2000; i++) {
      a += b ^ i; b += c * 3; c += d ^ a; d += a * 7;
      a ^= b >>> 3; b ^= c << 5; c ^= d >>> 7; d ^= a << 11;
      a += c ^ 13; b += d * 5; c += a ^ b; d += b * 9;
      a ^= d >>> 5; b ^= a << 3; c ^= b >>> 9; d ^= c << 13;
      a += d ^ 17; b += a * 11; c += b ^ d; d += c * 13;
      a ^= c >>> 2; b ^= d << 7; c ^= a >>> 11; d ^= b << 17;
      a += b ^ 19; b += c * 15; c += d ^ a; d += a * 17;
      a ^= b >>> 4; b ^= c << 9; c ^= d >>> 13; d ^= a << 19;
      a += c ^ 23; b += d * 19; c += a ^ b; d += b * 21;
      a ^= d >>> 6; b ^= a << 5; c ^= b >>> 15; d ^= c << 21;
    }
    return a + b + c + d;
  }

  static long helper(long x) {
    return work(x) + 1;
  }

  static void middle() {
    sink += helper(sink);
  }

  static void outer() {
    for (;;) middle();
  }

  public static void main(String[] args) throws Exception {
    Thread t = new Thread(HsSpin::outer, "hs-spin");
    t.setDaemon(true);
    t.start();
    Thread.sleep(args.length > 0 ? Long.parseLong(args[0]) : 0);
    System.out.print("r");
    System.out.flush();
    Thread.sleep(600_000);
  }
}
