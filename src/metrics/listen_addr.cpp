#include "metrics/listen_addr.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstring>

namespace jankbpf {
namespace {

constexpr const char* kAllowed =
    "allowed: PORT (on 127.0.0.1), IPV4:PORT, [IPV6]:PORT or localhost:PORT, with PORT 0..65535 "
    "(0: any free port, printed at start); e.g. 127.0.0.1:9477";

std::optional<int> parse_port(const std::string& s) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  int port = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    port = port * 10 + (c - '0');
  }
  if (port > 65535) return std::nullopt;
  return port;
}

}  // namespace

std::optional<ListenAddr> parse_listen_addr(const std::string& spec, std::string* error) {
  auto fail = [&](const std::string& what) -> std::optional<ListenAddr> {
    *error = "--metrics: \"" + spec + "\" " + what + "; " + kAllowed;
    return std::nullopt;
  };
  std::string host, port_text;
  if (!spec.empty() && spec[0] == '[') {
    size_t close = spec.find(']');
    if (close == std::string::npos || close + 1 >= spec.size() || spec[close + 1] != ':')
      return fail("is not [IPV6]:PORT");
    host = spec.substr(1, close - 1);
    port_text = spec.substr(close + 2);
  } else if (size_t colon = spec.rfind(':'); colon != std::string::npos) {
    host = spec.substr(0, colon);
    port_text = spec.substr(colon + 1);
    if (host.find(':') != std::string::npos) return fail("has an IPv6 address without [brackets]");
  } else {
    host = "127.0.0.1";
    port_text = spec;
  }
  auto port = parse_port(port_text);
  if (!port) return fail("has no valid port");
  ListenAddr out;
  out.text = spec;
  if (host == "localhost") host = "127.0.0.1";
  if (auto* v4 = reinterpret_cast<sockaddr_in*>(&out.addr); inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(*port));
    out.len = sizeof(sockaddr_in);
    return out;
  }
  out.addr = {};
  if (auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.addr); inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(*port));
    out.len = sizeof(sockaddr_in6);
    return out;
  }
  return fail("has no numeric address (\"" + host + "\")");
}

std::string format_sockaddr(const sockaddr_storage& addr) {
  char buf[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET) {
    auto* v4 = reinterpret_cast<const sockaddr_in*>(&addr);
    inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(ntohs(v4->sin_port));
  }
  auto* v6 = reinterpret_cast<const sockaddr_in6*>(&addr);
  inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof buf);
  return "[" + std::string(buf) + "]:" + std::to_string(ntohs(v6->sin6_port));
}

}  // namespace jankbpf
