#include "engine/launch/tcp_rendezvous.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <thread>

namespace sextant::engine::launch {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint32_t kMagic = 0x53585256;  // "SXRV"
constexpr std::uint32_t kMaxLineBytes = 4096;
constexpr std::uint32_t kMaxBlobBytes = 1 << 20;

// Closes its descriptor.
class Socket {
 public:
  explicit Socket(int fd = -1) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept {
    std::swap(fd_, other.fd_);
    return *this;
  }
  int fd() const { return fd_; }

 private:
  int fd_;
};

std::string seconds(std::chrono::milliseconds t) {
  std::ostringstream out;
  out << std::chrono::duration<double>(t).count() << " s";
  return out.str();
}

std::string address(const RendezvousOptions& o) {
  return o.master_addr + ":" + std::to_string(o.master_port);
}

// Waits until `fd` is readable (or writable) or `deadline` passes.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return false;
  }
}

// Reads exactly `bytes`; false on timeout or a closed connection.
bool read_all(int fd, void* data, std::size_t bytes, Clock::time_point deadline) {
  auto* p = static_cast<std::byte*>(data);
  while (bytes > 0) {
    if (!wait_for(fd, POLLIN, deadline)) return false;
    const ssize_t n = ::recv(fd, p, bytes, 0);
    if (n <= 0) {
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      return false;
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

bool write_all(int fd, const void* data, std::size_t bytes, Clock::time_point deadline) {
  const auto* p = static_cast<const std::byte*>(data);
  while (bytes > 0) {
    if (!wait_for(fd, POLLOUT, deadline)) return false;
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      return false;
    }
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

// A message is a sequence of u32 (network order) and length-prefixed byte strings.
void put_u32(std::string& out, std::uint32_t v) {
  const std::uint32_t n = htonl(v);
  out.append(reinterpret_cast<const char*>(&n), 4);
}
void put_bytes(std::string& out, const void* data, std::size_t bytes) {
  put_u32(out, static_cast<std::uint32_t>(bytes));
  out.append(static_cast<const char*>(data), bytes);
}
bool get_u32(int fd, std::uint32_t& v, Clock::time_point deadline) {
  if (!read_all(fd, &v, 4, deadline)) return false;
  v = ntohl(v);
  return true;
}
bool get_bytes(int fd, std::string& out, std::uint32_t limit, Clock::time_point deadline) {
  std::uint32_t n = 0;
  if (!get_u32(fd, n, deadline) || n > limit) return false;
  out.resize(n);
  return n == 0 || read_all(fd, out.data(), n, deadline);
}

RendezvousResult serve(const RendezvousOptions& o, const std::vector<std::byte>& blob,
                       const std::string& line) {
  const auto deadline = Clock::now() + o.timeout;
  Socket listener(::socket(AF_INET, SOCK_STREAM, 0));
  const int on = 1;
  ::setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  any.sin_port = htons(static_cast<std::uint16_t>(o.master_port));
  if (::bind(listener.fd(), reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 ||
      ::listen(listener.fd(), 128) != 0)
    throw RendezvousError("rendezvous master (rank 0) cannot listen on port " +
                          std::to_string(o.master_port) + ": " + std::strerror(errno) +
                          " (another job on this port? set MASTER_PORT)");
  std::vector<Socket> peers(o.world_size);
  std::vector<std::string> lines(o.world_size);
  lines[0] = line;
  int connected = 1;
  while (connected < o.world_size) {
    if (!wait_for(listener.fd(), POLLIN, deadline)) {
      std::string missing;
      for (int r = 1; r < o.world_size; ++r)
        if (peers[r].fd() < 0) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
      throw RendezvousError("rendezvous master on port " + std::to_string(o.master_port) + ": " +
                            std::to_string(connected) + " of " + std::to_string(o.world_size) +
                            " ranks connected within " + seconds(o.timeout) +
                            "; missing ranks " + missing);
    }
    Socket peer(::accept(listener.fd(), nullptr, nullptr));
    if (peer.fd() < 0) continue;
    // A hello that is late, malformed or from an unknown rank is dropped, not fatal:
    // it may be a stray connection to the port.
    const auto hello_deadline = std::min(deadline, Clock::now() + std::chrono::seconds(10));
    std::uint32_t magic = 0, rank = 0, world = 0;
    std::string rank_line;
    if (!get_u32(peer.fd(), magic, hello_deadline) || magic != kMagic ||
        !get_u32(peer.fd(), rank, hello_deadline) || !get_u32(peer.fd(), world, hello_deadline) ||
        !get_bytes(peer.fd(), rank_line, kMaxLineBytes, hello_deadline))
      continue;
    if (static_cast<int>(world) != o.world_size)
      throw RendezvousError("rendezvous master on port " + std::to_string(o.master_port) +
                            ": rank " + std::to_string(rank) + " says the world has " +
                            std::to_string(world) + " ranks, rank 0 says " +
                            std::to_string(o.world_size));
    if (rank == 0 || static_cast<int>(rank) >= o.world_size || peers[rank].fd() >= 0)
      throw RendezvousError("rendezvous master on port " + std::to_string(o.master_port) +
                            ": a second rank " + std::to_string(rank) + " (or one out of range)");
    lines[rank] = rank_line;
    peers[rank] = std::move(peer);
    ++connected;
  }
  std::string reply;
  put_bytes(reply, blob.data(), blob.size());
  put_u32(reply, static_cast<std::uint32_t>(o.world_size));
  for (const std::string& l : lines) put_bytes(reply, l.data(), l.size());
  for (int r = 1; r < o.world_size; ++r)
    if (!write_all(peers[r].fd(), reply.data(), reply.size(), deadline))
      throw RendezvousError("rendezvous master on port " + std::to_string(o.master_port) +
                            ": could not send the id to rank " + std::to_string(r));
  return {blob, lines};
}

// Connects to the master, retrying while it is not up yet.
Socket connect_to_master(const RendezvousOptions& o, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(o.master_port);
  if (const int rc = ::getaddrinfo(o.master_addr.c_str(), port.c_str(), &hints, &found); rc != 0)
    throw RendezvousError("rank " + std::to_string(o.rank) + ": cannot resolve the rendezvous master " +
                          address(o) + ": " + ::gai_strerror(rc));
  std::string last_error = "no attempt";
  for (;;) {
    Socket s(::socket(found->ai_family, found->ai_socktype, found->ai_protocol));
    // Non-blocking, so a host that drops packets costs the deadline, not the
    // kernel's two-minute SYN retries.
    const int flags = ::fcntl(s.fd(), F_GETFL, 0);
    ::fcntl(s.fd(), F_SETFL, flags | O_NONBLOCK);
    int error = 0;
    if (::connect(s.fd(), found->ai_addr, found->ai_addrlen) != 0) {
      error = errno;
      if (error == EINPROGRESS) {
        error = ETIMEDOUT;
        if (wait_for(s.fd(), POLLOUT, deadline)) {
          socklen_t length = sizeof error;
          ::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &error, &length);
        }
      }
    }
    if (error == 0) {
      ::fcntl(s.fd(), F_SETFL, flags);
      ::freeaddrinfo(found);
      return s;
    }
    last_error = std::strerror(error);
    if (Clock::now() + std::chrono::milliseconds(100) >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::freeaddrinfo(found);
  throw RendezvousError("rank " + std::to_string(o.rank) + " could not reach the rendezvous master " +
                        address(o) + " within " + seconds(o.timeout) + ": " + last_error +
                        " (is rank 0 running? are MASTER_ADDR and MASTER_PORT right?)");
}

RendezvousResult join(const RendezvousOptions& o, const std::string& line) {
  const auto deadline = Clock::now() + o.timeout;
  Socket s = connect_to_master(o, deadline);
  std::string hello;
  put_u32(hello, kMagic);
  put_u32(hello, static_cast<std::uint32_t>(o.rank));
  put_u32(hello, static_cast<std::uint32_t>(o.world_size));
  put_bytes(hello, line.data(), std::min<std::size_t>(line.size(), kMaxLineBytes));
  if (!write_all(s.fd(), hello.data(), hello.size(), deadline))
    throw RendezvousError("rank " + std::to_string(o.rank) + ": could not send to the rendezvous master " +
                          address(o));
  RendezvousResult out;
  std::string blob;
  std::uint32_t count = 0;
  if (!get_bytes(s.fd(), blob, kMaxBlobBytes, deadline) || !get_u32(s.fd(), count, deadline) ||
      static_cast<int>(count) != o.world_size)
    throw RendezvousError("rank " + std::to_string(o.rank) + ": connected to the rendezvous master " +
                          address(o) + " but got no id within " + seconds(o.timeout) +
                          " (the other ranks did not all arrive, or the master failed)");
  out.blob.resize(blob.size());
  std::memcpy(out.blob.data(), blob.data(), blob.size());
  out.rank_lines.resize(count);
  for (std::string& l : out.rank_lines)
    if (!get_bytes(s.fd(), l, kMaxLineBytes, deadline))
      throw RendezvousError("rank " + std::to_string(o.rank) + ": the rendezvous master " +
                            address(o) + " sent a truncated reply");
  return out;
}

}  // namespace

RendezvousResult rendezvous(const RendezvousOptions& options, const std::vector<std::byte>& blob,
                            const std::string& rank_line) {
  if (options.world_size == 1) return {blob, {rank_line}};
  return options.rank == 0 ? serve(options, blob, rank_line) : join(options, rank_line);
}

}  // namespace sextant::engine::launch
