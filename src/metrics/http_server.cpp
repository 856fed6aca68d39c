#include "metrics/http_server.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

namespace jankbpf {
namespace {

constexpr size_t kMaxRequest = 8192;
constexpr int kReadMs = 3000;
constexpr int kWriteMs = 5000;

std::string reply(const char* status, const std::string& type, const std::string& body, bool head) {
  std::string r = std::string("HTTP/1.0 ") + status + "\r\nContent-Type: " + type +
                  "\r\nContent-Length: " + std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n";
  if (!head) r += body;
  return r;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

std::string http_response(const std::string& request, const MetricsServer::Render& render) {
  const std::string text = "text/plain; charset=utf-8";
  size_t eol = request.find_first_of("\r\n");
  std::string line = request.substr(0, eol);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos || line.compare(sp2 + 1, 5, "HTTP/") != 0)
    return reply("400 Bad Request", text, "bad request\n", false);
  std::string method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  bool head = method == "HEAD";
  if (method != "GET" && !head) return reply("405 Method Not Allowed", text, "only GET and HEAD\n", false);
  std::string path = target.substr(0, target.find('?'));
  if (path == "/metrics")
    return reply("200 OK", "text/plain; version=0.0.4; charset=utf-8", render(), head);
  if (path == "/") return reply("200 OK", text, "jankbpf: metrics at /metrics\n", head);
  return reply("404 Not Found", text, "not found: try /metrics\n", head);
}

std::unique_ptr<MetricsServer> MetricsServer::start(const ListenAddr& where, Render render, std::string* error) {
  auto fail = [&](const char* what) -> std::unique_ptr<MetricsServer> {
    *error = std::string("--metrics ") + where.text + ": cannot " + what + ": " + strerror(errno);
    return nullptr;
  };
  Fd s(socket(where.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s) return fail("create a socket");
  int one = 1;
  setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (where.addr.ss_family == AF_INET6) setsockopt(s.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind(s.get(), reinterpret_cast<const sockaddr*>(&where.addr), where.len) != 0) return fail("bind");
  if (listen(s.get(), 16) != 0) return fail("listen");
  sockaddr_storage got{};
  socklen_t len = sizeof got;
  getsockname(s.get(), reinterpret_cast<sockaddr*>(&got), &len);
  Fd stop(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop) return fail("create an eventfd");
  return std::unique_ptr<MetricsServer>(
      new MetricsServer(std::move(s), std::move(stop), std::move(render), format_sockaddr(got)));
}

MetricsServer::MetricsServer(Fd listen, Fd stop, Render render, std::string bound)
    : listen_(std::move(listen)), stop_(std::move(stop)), render_(std::move(render)), bound_(std::move(bound)) {
  thread_ = std::thread([this] { run(); });
}

MetricsServer::~MetricsServer() {
  uint64_t one = 1;
  (void)!write(stop_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

void MetricsServer::run() {
  pollfd fds[2] = {{listen_.get(), POLLIN, 0}, {stop_.get(), POLLIN, 0}};
  while (true) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[1].revents) return;
    int conn = accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (conn < 0) continue;  // EAGAIN, a connection reset before accept, EMFILE: try again
    serve(conn);
    close(conn);
  }
}

// Nonblocking reads and writes against one deadline each: a client that
// trickles bytes gets no more time than one that sends nothing.
void MetricsServer::serve(int conn) {
  std::string req;
  char buf[2048];
  const int64_t read_end = now_ms() + kReadMs;
  while (req.find("\r\n\r\n") == std::string::npos && req.find("\n\n") == std::string::npos) {
    if (req.size() >= kMaxRequest) {
      std::string r = reply("431 Request Header Fields Too Large", "text/plain", "request too large\n", false);
      (void)!send(conn, r.data(), r.size(), MSG_NOSIGNAL);
      return;
    }
    int64_t left = read_end - now_ms();
    pollfd p{conn, POLLIN, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) return;  // too slow: hang up
    ssize_t n = recv(conn, buf, std::min(sizeof buf, kMaxRequest - req.size()), 0);
    if (n <= 0) {
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      return;
    }
    req.append(buf, static_cast<size_t>(n));
  }
  std::string r = http_response(req, render_);
  size_t off = 0;
  const int64_t write_end = now_ms() + kWriteMs;
  while (off < r.size()) {
    int64_t left = write_end - now_ms();
    pollfd p{conn, POLLOUT, 0};
    if (left <= 0 || poll(&p, 1, static_cast<int>(left)) <= 0) return;
    ssize_t n = send(conn, r.data() + off, r.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return;
    }
    off += static_cast<size_t>(n);
  }
  served_++;
}

}  // namespace jankbpf
