#include "metrics/peer.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

namespace jankbpf {
namespace {

std::string address(const sockaddr_storage& a) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (a.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, text, sizeof text);
  else if (a.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, text, sizeof text);
  return text;
}

// Port and address of one end, as inet_diag_sockid wants them (network order).
void fill(const sockaddr_storage& a, __be16* port, __be32* addr) {
  if (a.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(a);
    *port = in.sin_port;
    std::memcpy(addr, &in.sin_addr, 4);
  } else {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(a);
    *port = in6.sin6_port;
    std::memcpy(addr, &in6.sin6_addr, 16);
  }
}

}  // namespace

PeerIdentity::PeerIdentity() {
  nl_.reset(socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (nl_) {
    timeval tv{0, 100'000};  // the kernel answers at once; never wait long
    setsockopt(nl_.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
}

std::string PeerIdentity::of(int conn) {
  sockaddr_storage peer{}, self{};
  socklen_t pl = sizeof peer, sl = sizeof self;
  if (getpeername(conn, reinterpret_cast<sockaddr*>(&peer), &pl) != 0 ||
      getsockname(conn, reinterpret_cast<sockaddr*>(&self), &sl) != 0)
    return "?";
  if (!nl_ || (peer.ss_family != AF_INET && peer.ss_family != AF_INET6)) return address(peer);
  // The peer's own socket: its local end is our remote one.
  struct {
    nlmsghdr nlh;
    inet_diag_req_v2 req;
  } msg{};
  msg.nlh.nlmsg_len = sizeof msg;
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST;
  msg.nlh.nlmsg_seq = ++seq_;
  msg.req.sdiag_family = static_cast<__u8>(peer.ss_family);
  msg.req.sdiag_protocol = IPPROTO_TCP;
  msg.req.idiag_states = ~0u;
  fill(peer, &msg.req.id.idiag_sport, msg.req.id.idiag_src);
  fill(self, &msg.req.id.idiag_dport, msg.req.id.idiag_dst);
  msg.req.id.idiag_cookie[0] = msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
  if (send(nl_.get(), &msg, sizeof msg, 0) != static_cast<ssize_t>(sizeof msg)) return address(peer);
  alignas(nlmsghdr) char buf[8192];
  for (int tries = 0; tries < 4; tries++) {
    ssize_t got = recv(nl_.get(), buf, sizeof buf, 0);
    if (got <= 0) break;
    int len = static_cast<int>(got);
    for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
      if (h->nlmsg_seq != seq_) continue;  // a late answer to an earlier question
      if (h->nlmsg_type == SOCK_DIAG_BY_FAMILY && h->nlmsg_len >= NLMSG_LENGTH(sizeof(inet_diag_msg)))
        return "uid " + std::to_string(static_cast<const inet_diag_msg*>(NLMSG_DATA(h))->idiag_uid);
      return address(peer);  // NLMSG_ERROR (ENOENT): not a socket of this host
    }
  }
  return address(peer);
}

}  // namespace jankbpf
