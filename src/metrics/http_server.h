// A small HTTP/1.0 server for GET /metrics, on a thread of its own so a
// slow scraper never holds up the loop that drains the ring buffer.
//
// Hand-written rather than Debian's libmicrohttpd (0.9.75), because under
// the attacks this endpoint must survive the library did not (measured
// 2026-11-26 on the test VM, its strictest settings: epoll thread, 64
// connections, 3 s timeout, 16 KiB per connection): its timeout is an idle
// timeout that every byte resets, so 80 local clients trickling one header
// byte a second held all its connections and no scrape was answered in
// 12 s; and at EMFILE with no connection open it retries accept() at once,
// forever (1.27 M failed accepts in 3 s, 100 % of a CPU).
//
// What this one guarantees instead, each bounded by a constant:
//  * nonblocking everything, one poll() loop, up to 64 connections, and at
//    most a quarter of them per peer -- a local user by uid (see peer.h),
//    a remote one by address: a peer past its share evicts its own oldest
//    connection that has not finished its request, a full table the
//    oldest of the peer holding the most; so no one user's connections,
//    however many or however fast they come back, can take a scraper's;
//  * deadlines from the accept, not from the last byte: the request within
//    3 s, the answer written within 5 s, then closed;
//  * a request of at most 8 KiB (431 beyond), one answer per connection;
//  * the page rendered at most once a second, shared by every connection
//    answered in that second (memory and CPU do not grow with clients);
//  * accept() failing for descriptors (EMFILE, ENFILE) spends a spare
//    descriptor kept for that, else pauses accepting for 250 ms: no spin;
//  * a port that cannot be bound (taken, or an address not up yet) is
//    retried every 10 s instead of failing the whole run.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "metrics/listen_addr.h"
#include "metrics/peer.h"
#include "util/fd.h"

namespace jankbpf {

struct HttpLimits {
  size_t max_connections = 64;
  size_t max_per_peer = 16;
  size_t max_request = 8192;
  int read_ms = 3000;         // from the accept to the request's blank line
  int write_ms = 5000;        // from the request to the last byte of the answer
  int page_cache_ms = 1000;   // a page served is at most this old
  int bind_retry_ms = 10000;  // while the address cannot be bound
  int accept_pause_ms = 250;  // after accept() ran out of descriptors
};

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  using Page = std::shared_ptr<const std::string>;

  // Binds and listens now if it can. nullptr (with *error) only when no
  // socket can be made at all. A bind that fails (port taken, address not
  // up) still gives a server, *error saying why: its thread retries every
  // limits.bind_retry_ms and serves once bound.
  static std::unique_ptr<MetricsServer> start(const ListenAddr& where, Render render, std::string* error,
                                              HttpLimits limits = {});
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  std::string bound() const;  // e.g. "127.0.0.1:9477"; "" until bound
  uint64_t served() const { return served_; }
  uint64_t evicted() const { return evicted_; }         // connections closed to make room
  uint64_t accept_failures() const { return accept_failures_; }  // accept() out of descriptors
  uint64_t refused() const { return refused_; }  // closed at once: no slot could be freed for them

 private:
  struct Conn;
  MetricsServer(ListenAddr where, Fd stop, Render render, HttpLimits limits);
  bool try_bind(std::string* error);
  void run();
  void accept_some(std::vector<Conn>& conns, int64_t now);
  Page page(int64_t now);

  const ListenAddr where_;
  Fd listen_, stop_, spare_;
  Render render_;
  const HttpLimits limits_;
  mutable std::mutex bound_mu_;
  std::string bound_;
  Page cached_;
  int64_t cached_at_ = 0;
  int64_t accept_paused_until_ = 0;
  std::atomic<uint64_t> served_ = 0, evicted_ = 0, accept_failures_ = 0, refused_ = 0;
  PeerIdentity peers_;
  std::thread thread_;
};

// The answer to one request head (public for the unit tests): status line
// and headers, and the body (nullptr for HEAD and for answers that have
// none). `page` is called only for GET/HEAD /metrics.
struct HttpAnswer {
  std::string head;
  MetricsServer::Page body;
};
HttpAnswer http_answer(const std::string& request, const std::function<MetricsServer::Page()>& page);
// The same as one string, rendering with `render` (tests).
std::string http_response(const std::string& request, const MetricsServer::Render& render);

}  // namespace jankbpf
