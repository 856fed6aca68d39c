// Who is at the other end of an accepted TCP connection, so that the
// metrics server can give each peer a share of its connections: a peer on
// this host is the user owning its socket, asked of the kernel with the
// connection's exact addresses (NETLINK_SOCK_DIAG: the peer's socket is in
// our network namespace's table); any other peer is its address. Every
// local connection comes from 127.0.0.1 or one of the host's addresses,
// so without the uid one local user's connections could not be told from
// the scraper's.
#pragma once

#include <cstdint>
#include <string>

#include "util/fd.h"

namespace jankbpf {

class PeerIdentity {
 public:
  PeerIdentity();  // the netlink socket; without one, every peer is its address
  // "uid 1000" for a local peer, else "10.0.0.5" or "2001:db8::1".
  std::string of(int conn_fd);
  bool knows_uids() const { return nl_.valid(); }

 private:
  Fd nl_;
  uint32_t seq_ = 0;
};

}  // namespace jankbpf
