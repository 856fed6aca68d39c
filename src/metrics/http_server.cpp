#include "metrics/http_server.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <string_view>
#include <vector>

#include "util/log.h"

namespace jankbpf {
namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch()).count();
}

MetricsServer::Page text_page(const char* s) { return std::make_shared<const std::string>(s); }

HttpAnswer reply(const char* status, const char* type, MetricsServer::Page body, bool head) {
  HttpAnswer a;
  a.head = std::string("HTTP/1.0 ") + status + "\r\nContent-Type: " + type +
           "\r\nContent-Length: " + std::to_string(body->size()) + "\r\nConnection: close\r\n\r\n";
  if (!head) a.body = std::move(body);
  return a;
}

bool out_of_descriptors(int err) { return err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM; }

}  // namespace

HttpAnswer http_answer(const std::string& request, const std::function<MetricsServer::Page()>& page) {
  const char* text = "text/plain; charset=utf-8";
  size_t eol = request.find_first_of("\r\n");
  std::string line = request.substr(0, eol);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string::npos || sp2 == std::string::npos || line.compare(sp2 + 1, 5, "HTTP/") != 0)
    return reply("400 Bad Request", text, text_page("bad request\n"), false);
  std::string method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  bool head = method == "HEAD";
  if (method != "GET" && !head) return reply("405 Method Not Allowed", text, text_page("only GET and HEAD\n"), false);
  std::string path = target.substr(0, target.find('?'));
  if (path == "/metrics") return reply("200 OK", "text/plain; version=0.0.4; charset=utf-8", page(), head);
  if (path == "/") return reply("200 OK", text, text_page("jankbpf: metrics at /metrics\n"), head);
  return reply("404 Not Found", text, text_page("not found: try /metrics\n"), head);
}

std::string http_response(const std::string& request, const MetricsServer::Render& render) {
  HttpAnswer a = http_answer(request, [&] { return std::make_shared<const std::string>(render()); });
  return a.body ? a.head + *a.body : a.head;
}

struct MetricsServer::Conn {
  Fd fd;
  std::string peer;
  int64_t accepted_ms = 0, deadline_ms = 0;
  std::string request;
  bool answering = false;
  std::string head;
  Page body;
  size_t sent = 0;  // of head, then of body
};

std::unique_ptr<MetricsServer> MetricsServer::start(const ListenAddr& where, Render render, std::string* error,
                                                    HttpLimits limits) {
  error->clear();
  Fd stop(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop) {
    *error = std::string("--metrics ") + where.text + ": cannot create an eventfd: " + strerror(errno);
    return nullptr;
  }
  std::unique_ptr<MetricsServer> s(new MetricsServer(where, std::move(stop), std::move(render), limits));
  if (!s->try_bind(error) && error->find("cannot create a socket") != std::string::npos) return nullptr;
  s->thread_ = std::thread([p = s.get()] { p->run(); });
  return s;
}

MetricsServer::MetricsServer(ListenAddr where, Fd stop, Render render, HttpLimits limits)
    : where_(std::move(where)), stop_(std::move(stop)), render_(std::move(render)), limits_(limits) {
  spare_.reset(fcntl(stop_.get(), F_DUPFD_CLOEXEC, 0));
}

MetricsServer::~MetricsServer() {
  uint64_t one = 1;
  (void)!write(stop_.get(), &one, sizeof one);
  if (thread_.joinable()) thread_.join();
}

std::string MetricsServer::bound() const {
  std::lock_guard lk(bound_mu_);
  return bound_;
}

bool MetricsServer::try_bind(std::string* error) {
  auto fail = [&](const char* what) {
    *error = std::string("--metrics ") + where_.text + ": cannot " + what + ": " + strerror(errno);
    return false;
  };
  Fd s(socket(where_.addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!s) return fail("create a socket");
  int one = 1;
  setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (where_.addr.ss_family == AF_INET6) setsockopt(s.get(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  if (bind(s.get(), reinterpret_cast<const sockaddr*>(&where_.addr), where_.len) != 0) return fail("bind");
  if (listen(s.get(), 64) != 0) return fail("listen");
  sockaddr_storage got{};
  socklen_t len = sizeof got;
  getsockname(s.get(), reinterpret_cast<sockaddr*>(&got), &len);
  listen_ = std::move(s);
  std::lock_guard lk(bound_mu_);
  bound_ = format_sockaddr(got);
  return true;
}

MetricsServer::Page MetricsServer::page(int64_t now) {
  if (!cached_ || now - cached_at_ >= limits_.page_cache_ms) {
    cached_ = std::make_shared<const std::string>(render_());
    cached_at_ = now;
  }
  return cached_;
}

// Takes what is waiting, a few per wake-up (so the connections that have
// sent their request are read between batches). Room for a peer past its
// share is made by evicting its own oldest connection that has not sent a
// whole request; room in a full table, by evicting the oldest such
// connection of the peer holding the most.
void MetricsServer::accept_some(std::vector<Conn>& conns, int64_t now) {
  for (size_t n = 0; n < 8; n++) {
    int fd = accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0 && out_of_descriptors(errno) && spare_) {
      // The spare descriptor's number is the one accept() needs.
      spare_.reset();
      fd = accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    }
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO || errno == EPERM) continue;
      if (out_of_descriptors(errno)) {
        if (accept_failures_++ % 1000 == 0)
          log::warn("metrics: cannot accept a connection: %s (pausing accepts for %d ms)", strerror(errno),
                    limits_.accept_pause_ms);
        accept_paused_until_ = now + limits_.accept_pause_ms;
      }
      return;  // EAGAIN: nothing more waiting
    }
    Conn c;
    c.fd.reset(fd);
    c.peer = peers_.of(fd);
    std::map<std::string_view, size_t> held;
    for (const auto& o : conns) held[o.peer]++;
    std::string_view from;
    if (held[c.peer] >= limits_.max_per_peer) from = c.peer;
    else if (conns.size() >= limits_.max_connections)
      from = std::max_element(held.begin(), held.end(), [](auto& a, auto& b) { return a.second < b.second; })->first;
    if (!from.empty() || conns.size() >= limits_.max_connections) {
      auto victim = conns.end();
      for (auto it = conns.begin(); it != conns.end(); ++it)
        if (!it->answering && it->peer == from && (victim == conns.end() || it->accepted_ms < victim->accepted_ms))
          victim = it;
      if (victim == conns.end()) {  // all of them are being answered: this one waits for none
        refused_++;
        continue;
      }
      conns.erase(victim);
      evicted_++;
    }
    c.accepted_ms = now;
    c.deadline_ms = now + limits_.read_ms;
    conns.push_back(std::move(c));
  }
}

void MetricsServer::run() {
  std::vector<Conn> conns;
  std::vector<pollfd> fds;
  int64_t next_bind = now_ms() + limits_.bind_retry_ms;
  char buf[4096];
  while (true) {
    int64_t now = now_ms();
    // Deadlines first: nobody keeps a slot past them.
    std::erase_if(conns, [&](const Conn& c) { return now >= c.deadline_ms; });
    if (!spare_) spare_.reset(fcntl(stop_.get(), F_DUPFD_CLOEXEC, 0));
    if (!listen_ && now >= next_bind) {
      std::string error;
      if (try_bind(&error)) log::status("metrics: http://%s/metrics (bound after retrying)", bound().c_str());
      else next_bind = now + limits_.bind_retry_ms;
    }

    int64_t wake = listen_ ? INT64_MAX : next_bind;
    for (const auto& c : conns) wake = std::min(wake, c.deadline_ms);
    const bool accepting = listen_ && now >= accept_paused_until_;
    if (listen_ && !accepting) wake = std::min(wake, accept_paused_until_);
    fds.clear();
    fds.push_back({stop_.get(), POLLIN, 0});
    fds.push_back({accepting ? listen_.get() : -1, POLLIN, 0});
    for (const auto& c : conns) fds.push_back({c.fd.get(), static_cast<short>(c.answering ? POLLOUT : POLLIN), 0});
    int timeout = wake == INT64_MAX ? -1 : static_cast<int>(std::clamp<int64_t>(wake - now, 0, 60000));
    if (poll(fds.data(), fds.size(), timeout) < 0) {
      if (errno == EINTR) continue;
      log::error("metrics: poll: %s; metrics are no longer served", strerror(errno));
      return;
    }
    if (fds[0].revents) return;
    now = now_ms();

    // Connections before new ones: a request that has arrived is read
    // (and so no longer evictable) before accepting can evict it.
    for (size_t i = 0; i < conns.size(); i++) {
      Conn& c = conns[i];
      short ev = fds[i + 2].revents;
      if (!ev) continue;
      bool done = false;
      if (!c.answering) {
        ssize_t n = recv(c.fd.get(), buf, std::min(sizeof buf, limits_.max_request - c.request.size()), 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          done = true;
        } else if (n > 0) {
          c.request.append(buf, static_cast<size_t>(n));
          bool complete = c.request.find("\r\n\r\n") != std::string::npos || c.request.find("\n\n") != std::string::npos;
          HttpAnswer a;
          if (complete) a = http_answer(c.request, [&] { return page(now); });
          else if (c.request.size() >= limits_.max_request)
            a = reply("431 Request Header Fields Too Large", "text/plain", text_page("request too large\n"), false);
          if (!a.head.empty()) {
            c.answering = true;
            c.head = std::move(a.head);
            c.body = std::move(a.body);
            c.request.clear();
            c.request.shrink_to_fit();
            c.deadline_ms = now + limits_.write_ms;
          }
        }
      }
      if (c.answering && !done) {
        // Head then body, as far as the socket takes them now.
        const size_t total = c.head.size() + (c.body ? c.body->size() : 0);
        while (c.sent < total) {
          iovec iov[2];
          int n_iov = 0;
          if (c.sent < c.head.size()) iov[n_iov++] = {c.head.data() + c.sent, c.head.size() - c.sent};
          if (c.body) {
            size_t off = c.sent > c.head.size() ? c.sent - c.head.size() : 0;
            iov[n_iov++] = {const_cast<char*>(c.body->data()) + off, c.body->size() - off};
          }
          msghdr msg{};
          msg.msg_iov = iov;
          msg.msg_iovlen = static_cast<size_t>(n_iov);
          ssize_t n = sendmsg(c.fd.get(), &msg, MSG_NOSIGNAL);
          if (n < 0) {
            if (errno == EINTR) continue;
            if (errno != EAGAIN) done = true;
            break;
          }
          c.sent += static_cast<size_t>(n);
        }
        if (c.sent >= total) {
          done = true;
          served_++;
          // What the client sent past its request (a pipelined one) is read
          // away first: closing with unread data would reset the connection,
          // and the client could lose the answer still on its way.
          for (int k = 0; k < 16 && recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT) > 0; k++) {
          }
        }
      }
      if (done) c.fd.reset();
    }
    std::erase_if(conns, [](const Conn& c) { return !c.fd; });
    if (fds[1].revents) accept_some(conns, now);
  }
}

}  // namespace jankbpf
