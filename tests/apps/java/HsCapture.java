// The aarch64 fixture's target (scripts/capture-aarch64-fixtures.sh --jvm):
// an arm64 JVM run under qemu-aarch64 cannot be stopped with ptrace for
// its guest registers, so a thread takes its own sample: a native method
// (hs_capture.c) writes its registers and 16 KB of its stack, as a perf
// sample carries them, then blocks until the recorder has read the JVM's
// memory. The thread "hs-capture" calls it from work() <- helper() <-
// middle() <- outer(), compiled (after a warm-up; helper() inlined) unless
// run with -Xint.
public class HsCapture {
  static volatile long sink;

  static native void capture(String path);

  static long work(long x, String path) {
    long s = x;
    for (int i = 0; i < 200; i++) s += (s ^ i) * 31;
    if (path != null) capture(path);
    return s;
  }

  static long helper(long x, String path) {
    return work(x, path) + 1;
  }

  static void middle(String path) {
    sink += helper(sink, path);
  }

  static void outer(int warm, String path) {
    for (int i = 0; i < warm; i++) middle(null);
    middle(path);
  }

  public static void main(String[] args) throws Exception {
    System.load(args[0]);
    int warm = Integer.parseInt(args[1]);
    String path = args[2];
    Thread t = new Thread(() -> outer(warm, path), "hs-capture");
    t.start();
    t.join();
  }
}
