// The Java end-to-end target (tests/e2e/test_java_frames.py), run with no
// JVM flag: the JDK's own HttpServer, whose dispatcher thread
// ("HTTP-Dispatcher") is a selector loop that runs the handlers itself,
// and a plain NIO selector loop on a thread named "nio-loop". A client
// thread starts, after the delay given (ms), the handlers that block each
// loop -- first cold (the handler interpreted), then again after warming
// it up (compiled, Handlers.report inlined into Handlers.serve) -- and a GC
// planted on the dispatcher (System.gc() over a large live heap). Each slow
// handler prints {"what", "begin_ns", "end_ns"} (System.nanoTime(),
// CLOCK_MONOTONIC) on stderr; the process exits when the client is done.
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.InetSocketAddress;
import java.net.URL;
import java.nio.ByteBuffer;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

public class LoopServer {
  // A StringBuilder, not `+`: javac compiles `+` to an invokedynamic whose
  // first call spins method handles (tens of ms of the JDK's own class
  // loading on a cold machine), inside the cold handler's task.
  static void truth(String what, long begin, long end) {
    StringBuilder s = new StringBuilder("{\"what\":\"").append(what).append("\",\"thread\":\"");
    s.append(Thread.currentThread().getName()).append("\",\"begin_ns\":").append(begin);
    System.err.println(s.append(",\"end_ns\":").append(end).append('}').toString());
  }

  static final class ReportHandler implements HttpHandler {
    public void handle(HttpExchange ex) throws IOException {
      long ms = Long.parseLong(ex.getRequestURI().getQuery());
      long b = System.nanoTime();
      double r = Handlers.serve(ms);
      long e = System.nanoTime();
      truth("report", b, e);
      reply(ex, Double.toString(r));
    }
  }

  // Runs the report's code many times, quickly: the JIT compiles it.
  static final class WarmHandler implements HttpHandler {
    public void handle(HttpExchange ex) throws IOException {
      long n = Long.parseLong(ex.getRequestURI().getQuery());
      double r = 0;
      for (long i = 0; i < n; i++) r += Handlers.serve(0);
      reply(ex, Double.toString(r));
    }
  }

  static final class GcHandler implements HttpHandler {
    public void handle(HttpExchange ex) throws IOException {
      long b = System.nanoTime();
      Handlers.collect();
      long e = System.nanoTime();
      truth("gc", b, e);
      reply(ex, "ok");
    }
  }

  static void reply(HttpExchange ex, String text) throws IOException {
    byte[] body = text.getBytes(StandardCharsets.UTF_8);
    ex.sendResponseHeaders(200, body.length);
    ex.getResponseBody().write(body);
    ex.close();
  }

  // A selector loop of its own: one command a line, served on the loop.
  static final class NioLoop implements Runnable {
    final Selector selector;
    final ServerSocketChannel server;

    NioLoop() throws IOException {
      selector = Selector.open();
      server = ServerSocketChannel.open();
      server.bind(new InetSocketAddress("127.0.0.1", 0));
      server.configureBlocking(false);
      server.register(selector, SelectionKey.OP_ACCEPT);
    }

    public void run() {
      ByteBuffer buf = ByteBuffer.allocate(256);
      try {
        for (;;) {
          selector.select();
          Iterator<SelectionKey> it = selector.selectedKeys().iterator();
          while (it.hasNext()) {
            SelectionKey k = it.next();
            it.remove();
            if (k.isAcceptable()) {
              SocketChannel c = server.accept();
              c.configureBlocking(false);
              c.register(selector, SelectionKey.OP_READ);
            } else if (k.isReadable()) {
              SocketChannel c = (SocketChannel) k.channel();
              buf.clear();
              if (c.read(buf) < 0) {
                k.cancel();
                c.close();
                continue;
              }
              serve(new String(buf.array(), 0, buf.position(), StandardCharsets.UTF_8).trim(), c);
            }
          }
        }
      } catch (Exception e) {
        e.printStackTrace();
        System.exit(3);
      }
    }

    static void serve(String cmd, SocketChannel c) throws Exception {
      String[] w = cmd.split(" ");
      long ms = Long.parseLong(w[1]);
      long b = System.nanoTime();
      if (w[0].equals("lookup")) Handlers.lookup(ms);
      else Handlers.render(ms);
      long e = System.nanoTime();
      truth("nio-" + w[0], b, e);
      c.write(ByteBuffer.wrap("ok\n".getBytes(StandardCharsets.UTF_8)));
    }
  }

  static String get(int port, String path) throws IOException {
    HttpURLConnection c = (HttpURLConnection) new URL("http://127.0.0.1:" + port + path).openConnection();
    try (InputStream in = c.getInputStream()) {
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  static void nio(SocketChannel c, String cmd) throws IOException {
    c.write(ByteBuffer.wrap((cmd + "\n").getBytes(StandardCharsets.UTF_8)));
    ByteBuffer r = ByteBuffer.allocate(16);
    while (r.position() == 0 || r.get(r.position() - 1) != '\n') {
      if (c.read(r) < 0) throw new IOException("nio loop closed");
    }
  }

  public static void main(String[] args) throws Exception {
    long delay = Long.parseLong(args[0]);
    int liveMb = args.length > 1 ? Integer.parseInt(args[1]) : 200;
    Handlers.retain(liveMb);
    HttpServer http = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 16);
    http.createContext("/report", new ReportHandler());
    http.createContext("/warm", new WarmHandler());
    http.createContext("/gc", new GcHandler());
    http.start();  // its dispatcher runs the handlers itself (no executor)
    NioLoop loop = new NioLoop();
    Thread nio = new Thread(loop, "nio-loop");
    nio.setDaemon(true);
    nio.start();
    int port = http.getAddress().getPort();
    Thread client = new Thread(() -> {
      try {
        Thread.sleep(delay);
        SocketChannel c = SocketChannel.open(loop.server.getLocalAddress());
        // The server's first exchange loads the JDK's request and reply
        // classes (headers, the Date header's locale data): done here, by a
        // request that runs none of the handlers' code, so the cold report
        // below is the handler's interpreted code, not the JDK's first use.
        get(port, "/warm?0");
        get(port, "/report?300");  // cold: interpreted handler frames
        nio(c, "lookup 300");      // off the CPU in Thread.sleep on the loop
        nio(c, "render 300");
        for (int i = 0; i < 4; i++) get(port, "/warm?20000");  // compiled from here
        Thread.sleep(1000);
        get(port, "/report?300");  // warm
        get(port, "/gc");
        c.close();
        http.stop(0);
        System.exit(0);
      } catch (Exception e) {
        e.printStackTrace();
        System.exit(2);
      }
    }, "client");
    client.start();
    client.join();
  }
}

final class Handlers {
  static volatile double sink;
  static List<long[]> live = new ArrayList<>();

  // A live heap for the GC to trace (many small objects).
  static void retain(int mb) {
    for (int i = 0; i < mb * 1024 * 1024 / 64; i++) live.add(new long[4]);
  }

  // The report handler's own code; once warm, compiled with report() inlined.
  static double serve(long ms) {
    return report(ms) * 2;
  }

  // Small: its compiled caller inlines it.
  static double report(long ms) {
    return render(ms) + 1;
  }

  // Spins for ms: too big to inline (C2's FreqInlineSize is 325 bytes).
  static double render(long ms) {
    long end = System.nanoTime() + ms * 1_000_000L;
    double a = 1, b = 2, c = 3, d = 4;
    while (System.nanoTime() < end) {
      for (int i = 0; i < 1000; i++) {
        a += Math.sqrt(b + i); b += c * 0.5; c += Math.sqrt(d + a); d += a * 0.25;
        a *= 0.999; b *= 0.998; c *= 0.997; d *= 0.996;
        a += Math.sqrt(c + i); b += d * 0.5; c += Math.sqrt(a + b); d += b * 0.25;
        a *= 0.995; b *= 0.994; c *= 0.993; d *= 0.992;
        a += Math.sqrt(d + i); b += a * 0.5; c += Math.sqrt(b + d); d += c * 0.25;
        a *= 0.991; b *= 0.990; c *= 0.989; d *= 0.988;
        a += Math.sqrt(b + c); b += c * 0.75; c += Math.sqrt(d + i); d += a * 0.125;
        a *= 0.987; b *= 0.986; c *= 0.985; d *= 0.984;
        a += Math.sqrt(a + d); b += b * 0.0625; c += Math.sqrt(c + i); d += d * 0.03125;
        a *= 0.983; b *= 0.982; c *= 0.981; d *= 0.980;
      }
    }
    sink = a + b + c + d;
    return sink;
  }

  // A blocking call on the loop (a slow lookup).
  static void lookup(long ms) throws InterruptedException {
    Thread.sleep(ms);
  }

  // Full collections on the loop thread for at least 250 ms: one of the
  // 300 MB live heap takes 80 ms on the idle test VM and 300 ms on a
  // loaded one, and the task must pass the run's 100 ms threshold.
  static void collect() {
    long end = System.nanoTime() + 250_000_000L;
    do {
      System.gc();
    } while (System.nanoTime() < end);
  }
}
