// Where --metrics listens: "PORT", "IPV4:PORT", "[IPV6]:PORT" or
// "localhost:PORT". Numeric addresses only (no name lookups at start-up):
// a service should not wait on DNS to come up, nor listen where a resolver
// says.
#pragma once

#include <sys/socket.h>

#include <optional>
#include <string>

namespace jankbpf {

struct ListenAddr {
  sockaddr_storage addr{};
  socklen_t len = 0;
  std::string text;  // as given, for messages
};

// nullopt with *error naming what is allowed when `spec` is not one of the
// forms above or the port is not 0..65535 (0: any free port).
std::optional<ListenAddr> parse_listen_addr(const std::string& spec, std::string* error);

// "127.0.0.1:9477", "[::1]:9477": the address a bound socket has.
std::string format_sockaddr(const sockaddr_storage& addr);

}  // namespace jankbpf
