#include "comm/detail/status_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "comm/bootstrap/net.h"
#include "comm/bootstrap/secret.h"
#include "comm/detail/live_comms.h"
#include "comm/detail/state.h"
#include "common/log.h"

namespace braid::comm {
namespace {

namespace net = bootstrap::net;

constexpr char kHello[] = "braid-status-1";
constexpr uint32_t kMaxFrame = 1u << 20;  // an answer: at most ~1 MiB of lines
constexpr double kClientSeconds = 2.0;    // what the server gives one client

// A frame: 4 bytes of length (little-endian), then the bytes.
bool sendFrame(int fd, const std::string& body, Deadline deadline, std::string* why) {
  const uint32_t n = static_cast<uint32_t>(body.size());
  const char len[4] = {char(n), char(n >> 8), char(n >> 16), char(n >> 24)};
  int err = 0;
  if (net::sendAll(fd, len, 4, deadline, &err) != net::Io::kOk ||
      net::sendAll(fd, body.data(), body.size(), deadline, &err) != net::Io::kOk) {
    *why = err != 0 ? "send: " + net::errnoText(err) : "send: no progress by the deadline";
    return false;
  }
  return true;
}

bool recvFrame(int fd, size_t limit, Deadline deadline, std::string* body, std::string* why) {
  unsigned char len[4];
  int err = 0;
  net::Io io = net::recvAll(fd, reinterpret_cast<char*>(len), 4, deadline, &err);
  if (io == net::Io::kOk) {
    const uint32_t n = len[0] | len[1] << 8 | len[2] << 16 | uint32_t(len[3]) << 24;
    if (n > limit) {
      *why = fmt::format("a frame of {} bytes (at most {})", n, limit);
      return false;
    }
    body->assign(n, '\0');
    io = net::recvAll(fd, body->data(), n, deadline, &err);
  }
  if (io == net::Io::kOk) return true;
  *why = io == net::Io::kTimeout  ? "no answer by the deadline"
         : io == net::Io::kClosed ? "the other end closed the connection"
                                  : "receive: " + net::errnoText(err);
  return false;
}

// Lines as text: rank, known, progress, text; tab-separated, one per line.
std::string encode(const std::vector<StatusLine>& lines) {
  std::string out;
  for (const StatusLine& l : lines) {
    std::string text = l.text;
    for (char& c : text) {
      if (c == '\t' || c == '\n') c = ' ';
    }
    out += fmt::format("{}\t{}\t{}\t{}\n", l.rank, l.known ? 1 : 0, l.progress, text);
  }
  return out;
}

bool decode(const std::string& body, std::vector<StatusLine>* lines) {
  size_t at = 0;
  while (at < body.size()) {
    const size_t end = body.find('\n', at);
    if (end == std::string::npos) return false;
    const std::string row = body.substr(at, end - at);
    at = end + 1;
    StatusLine l;
    int known = 0;
    unsigned long long progress = 0;
    int used = 0;
    if (std::sscanf(row.c_str(), "%d\t%d\t%llu\t%n", &l.rank, &known, &progress, &used) != 3) {
      return false;
    }
    l.known = known != 0;
    l.progress = progress;
    l.text = row.substr(static_cast<size_t>(used));
    lines->push_back(std::move(l));
  }
  return true;
}

// The answer for (job, host) from a live communicator of this process, or an error text.
std::string answer(const std::string& jobId, const std::string& host, const std::string& nonce,
                   const std::string& proof) {
  for (const auto& s : liveComms()) {
    if (s->jobId != jobId || s->rank >= int(s->hosts.size()) || s->hosts[s->rank] != host) {
      continue;
    }
    if (!bootstrap::secretsEqual(proof, bootstrap::secretProof(s->secret, jobId + nonce))) {
      return "error\nwrong job secret";
    }
    if (!s->board) return "error\nno status board on that host: " + s->boardWhy;
    return "ok\n" + encode(s->board->lines(s->hosts));
  }
  return "error\nno communicator of job " + jobId + " on host " + host + " in this process";
}

void serveOne(int fd) {
  const Deadline deadline = Deadline::after(kClientSeconds);
  std::string hello, request, why;
  if (!recvFrame(fd, 64, deadline, &hello, &why) || hello != kHello) return;
  const std::string nonce = bootstrap::randomSecret(16);
  if (!sendFrame(fd, nonce, deadline, &why) || !recvFrame(fd, 4096, deadline, &request, &why)) {
    return;
  }
  // job id, host, proof: one per line.
  const size_t a = request.find('\n'), b = a == std::string::npos ? a : request.find('\n', a + 1);
  if (b == std::string::npos) return;
  sendFrame(fd,
            answer(request.substr(0, a), request.substr(a + 1, b - a - 1), nonce,
                   request.substr(b + 1)),
            deadline, &why);
}

struct Server {
  std::mutex mutex;
  std::map<std::string, std::string> addressOf;  // ip -> "ip:port"
  std::vector<int> listeners;
  int wake[2] = {-1, -1};  // a new listener joins the poll
  bool running = false;
};

Server& server() {
  static Server* s = new Server;  // never destroyed: its thread outlives main()
  return *s;
}

void serve() {
  Server& s = server();
  for (;;) {
    std::vector<pollfd> fds;
    {
      std::lock_guard<std::mutex> lock(s.mutex);
      fds.push_back({s.wake[0], POLLIN, 0});
      for (int fd : s.listeners) fds.push_back({fd, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) {
      char buf[16];
      [[maybe_unused]] ssize_t n = ::read(s.wake[0], buf, sizeof buf);
    }
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int fd = ::accept4(fds[i].fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) continue;
      net::setNoDelay(fd);
      serveOne(fd);
      ::close(fd);
    }
  }
}

// A forked child has no server thread; its inherited sockets are closed, it starts over.
void forgetAfterFork() {
  Server& s = server();
  for (int fd : s.listeners) ::close(fd);
  if (s.wake[0] >= 0) ::close(s.wake[0]);
  if (s.wake[1] >= 0) ::close(s.wake[1]);
  s.listeners.clear();
  s.addressOf.clear();
  s.wake[0] = s.wake[1] = -1;
  s.running = false;
}

}  // namespace

std::string startStatusServer(const std::string& ip, std::string* why) {
  Server& s = server();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (auto it = s.addressOf.find(ip); it != s.addressOf.end()) return it->second;
  sockaddr_in addr{};
  try {
    addr = net::ipv4Sockaddr(ip, 0);
  } catch (const Error& e) {
    *why = e.what();
    return "";
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, 16) != 0 || ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *why = fmt::format("listening on {}: {}", ip, std::strerror(errno));
    if (fd >= 0) ::close(fd);
    return "";
  }
  if (!s.running) {
    static const bool atfork = ::pthread_atfork(nullptr, nullptr, forgetAfterFork) == 0;
    (void)atfork;
    if (::pipe2(s.wake, O_CLOEXEC | O_NONBLOCK) != 0) {
      *why = fmt::format("pipe: {}", std::strerror(errno));
      ::close(fd);
      return "";
    }
    std::thread(serve).detach();
    s.running = true;
  }
  s.listeners.push_back(fd);
  const char byte = 1;
  [[maybe_unused]] ssize_t n = ::write(s.wake[1], &byte, 1);
  const std::string address = net::endpointText(addr);
  s.addressOf[ip] = address;
  return address;
}

bool askStatus(const std::string& address, const std::string& jobId, const std::string& host,
               const std::string& secret, Deadline deadline, std::vector<StatusLine>* lines,
               std::string* why) {
  const size_t colon = address.rfind(':');
  sockaddr_in addr{};
  try {
    if (colon == std::string::npos) throw Error(ErrorCode::kInvalidUsage, "no port");
    addr = net::ipv4Sockaddr(address.substr(0, colon), std::stoi(address.substr(colon + 1)));
  } catch (const std::exception& e) {
    *why = fmt::format("bad status address '{}': {}", address, e.what());
    return false;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *why = fmt::format("socket: {}", std::strerror(errno));
    return false;
  }
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 &&
      errno != EINPROGRESS) {
    *why = fmt::format("connect to {}: {}", address, std::strerror(errno));
    return false;
  }
  pollfd p{fd, POLLOUT, 0};
  int err = 0;
  socklen_t len = sizeof err;
  if (::poll(&p, 1, deadline.millisLeft()) <= 0 ||
      ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
    *why = err != 0 ? fmt::format("connect to {}: {}", address, std::strerror(err))
                    : fmt::format("connect to {}: no answer by the deadline", address);
    return false;
  }
  net::setNoDelay(fd);
  std::string nonce, body;
  if (!sendFrame(fd, kHello, deadline, why) || !recvFrame(fd, 64, deadline, &nonce, why) ||
      !sendFrame(fd,
                 jobId + "\n" + host + "\n" + bootstrap::secretProof(secret, jobId + nonce),
                 deadline, why) ||
      !recvFrame(fd, kMaxFrame, deadline, &body, why)) {
    *why = fmt::format("{}: {}", address, *why);
    return false;
  }
  if (body.rfind("ok\n", 0) == 0) {
    if (decode(body.substr(3), lines)) return true;
    *why = fmt::format("{}: an answer braid cannot read", address);
    return false;
  }
  *why = fmt::format("{}: {}", address,
                     body.rfind("error\n", 0) == 0 ? body.substr(6) : "an unknown answer");
  return false;
}

}  // namespace braid::comm
