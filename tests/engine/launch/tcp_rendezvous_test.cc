#include "engine/launch/tcp_rendezvous.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace sextant::engine::launch {
namespace {

// A port nobody listens on right now: bind port 0, read what the kernel chose, close.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t length = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length);
  ::close(fd);
  return ntohs(a.sin_port);
}

TEST(TcpRendezvous, FourRanksGetRankZerosBlobAndEveryLine) {
  // Rank 0 serves 128 bytes (an NCCL id's size); the others start first, so
  // they must retry until the master listens.
  constexpr int kWorld = 4;
  const int port = free_port();
  std::vector<std::byte> blob(128);
  for (std::size_t i = 0; i < blob.size(); ++i) blob[i] = static_cast<std::byte>(i * 7 + 1);
  std::vector<RendezvousResult> results(kWorld);
  std::vector<std::string> errors(kWorld);
  std::vector<std::thread> threads;
  for (int r = kWorld - 1; r >= 0; --r) {
    threads.emplace_back([&, r] {
      if (r == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
      RendezvousOptions o;
      o.master_port = port, o.rank = r, o.world_size = kWorld;
      o.timeout = std::chrono::seconds(20);
      try {
        results[r] = rendezvous(o, r == 0 ? blob : std::vector<std::byte>{}, "host" + std::to_string(r) + " " + std::to_string(r));
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kWorld; ++r) {
    EXPECT_EQ(errors[r], "") << "rank " << r;
    EXPECT_EQ(results[r].blob, blob) << "rank " << r;
    EXPECT_EQ(results[r].rank_lines,
              (std::vector<std::string>{"host0 0", "host1 1", "host2 2", "host3 3"}));
  }
}

TEST(TcpRendezvous, AMasterThatIsNotThereTimesOutNamingHostAndPort) {
  const int port = free_port();
  RendezvousOptions o;
  o.master_addr = "127.0.0.1", o.master_port = port, o.rank = 2, o.world_size = 4;
  o.timeout = std::chrono::milliseconds(500);
  try {
    rendezvous(o, {}, "me 0");
    FAIL() << "no error";
  } catch (const RendezvousError& e) {
    EXPECT_EQ(std::string(e.what()),
              "rank 2 could not reach the rendezvous master 127.0.0.1:" + std::to_string(port) +
                  " within 0.5 s: Connection refused (is rank 0 running? are MASTER_ADDR and "
                  "MASTER_PORT right?)");
  }
}

TEST(TcpRendezvous, AMasterWhoseRanksDoNotComeNamesTheMissingOnes) {
  const int port = free_port();
  RendezvousOptions o;
  o.master_port = port, o.rank = 0, o.world_size = 3;
  o.timeout = std::chrono::milliseconds(300);
  try {
    rendezvous(o, std::vector<std::byte>(4), "me 0");
    FAIL() << "no error";
  } catch (const RendezvousError& e) {
    EXPECT_EQ(std::string(e.what()), "rendezvous master on port " + std::to_string(port) +
                                         ": 1 of 3 ranks connected within 0.3 s; missing ranks 1, 2");
  }
}

TEST(TcpRendezvous, AnUnknownHostIsNamed) {
  RendezvousOptions o;
  o.master_addr = "no-such-host.invalid", o.rank = 1, o.world_size = 2;
  o.timeout = std::chrono::milliseconds(300);
  try {
    rendezvous(o, {}, "me 0");
    FAIL() << "no error";
  } catch (const RendezvousError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("rank 1: cannot resolve the rendezvous master "
                                          "no-such-host.invalid:29500: ", 0), 0u) << e.what();
  }
}

}  // namespace
}  // namespace sextant::engine::launch
