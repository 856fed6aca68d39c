// A tiny HTTP/1.0 server for GET /metrics, on a thread of its own so a slow
// scraper never holds up the loop that drains the ring buffer. One
// connection at a time, each bounded: a request of at most 8 KB, read
// within 3 s, the answer written within 5 s, then closed.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "metrics/listen_addr.h"
#include "util/fd.h"

namespace jankbpf {

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  // Binds and listens now (so a taken port fails the start, not a scrape
  // later), then serves until destroyed. nullptr with *error on failure.
  static std::unique_ptr<MetricsServer> start(const ListenAddr& where, Render render, std::string* error);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  const std::string& bound() const { return bound_; }  // e.g. "127.0.0.1:9477"
  uint64_t served() const { return served_; }

 private:
  MetricsServer(Fd listen, Fd stop, Render render, std::string bound);
  void run();
  void serve(int conn);

  Fd listen_, stop_;
  Render render_;
  std::string bound_;
  std::atomic<uint64_t> served_ = 0;
  std::thread thread_;
};

// The answer to one request (public for the unit tests): status line,
// headers and body, given the request head and the page to serve.
std::string http_response(const std::string& request, const MetricsServer::Render& render);

}  // namespace jankbpf
