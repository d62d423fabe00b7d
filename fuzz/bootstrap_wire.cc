// The bootstrap store's wire protocol (comm/bootstrap/wire.h) where it meets untrusted bytes. The
// first input byte picks the reader:
//   mode % 3 == 0: a client's handshake, read like the store's lobby does (helloBytesWanted()
//                  into the fixed buffer, then decodeHello()); mode & 4: one byte per read.
//   mode % 3 == 1: what a client sends after it: frames split and decoded like the server's
//                  processFrames(), set and add applied to a map like execute() does.
//   mode % 3 == 2: a reply body, decoded like TcpStore::call().
// wire::ParseError and braid::Error are the refusals braid promises; anything else is a finding.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>

#include "comm/bootstrap/counter.h"
#include "comm/bootstrap/wire.h"
#include "common/error.h"
#include "fuzz/fixture.h"

namespace wire = braid::bootstrap::wire;
using braid::fuzz::broken;

namespace {

void handshake(const char* data, size_t size, bool byteAtATime) {
  // The lobby's buffer, on the heap so ASan sees a read past it.
  constexpr size_t kBuffer = wire::kHandshakeBytes + wire::kMaxSecretBytes;
  std::unique_ptr<char[]> buffer(new char[kBuffer]);
  size_t have = 0;
  while (true) {
    const size_t want = wire::helloBytesWanted(buffer.get(), have);
    if (want == 0) break;
    if (have + want > kBuffer) broken("helloBytesWanted asks past the lobby's buffer");
    if (size == 0) return;  // the client went quiet
    const size_t n = std::min({want, size, byteAtATime ? size_t{1} : size});
    std::memcpy(buffer.get() + have, data, n);
    data += n;
    size -= n;
    have += n;
  }
  wire::ClientHello hello = wire::decodeHello(buffer.get(), have);
  if (have != wire::kHandshakeBytes + hello.secret.size()) broken("handshake length");
}

void frames(const char* data, size_t size) {
  std::map<std::string, std::string> values;
  while (auto len = wire::completeFrame(data, size)) {
    const wire::Request request = wire::decodeRequest(data + 4, *len);
    // What the client sent must survive re-encoding.
    const std::string again = wire::encodeRequest(request);
    const wire::Request back = wire::decodeRequest(again.data() + 4, again.size() - 4);
    if (back.op != request.op || back.timeoutMs != request.timeoutMs ||
        back.delta != request.delta || back.strings != request.strings) {
      broken("request does not survive encodeRequest");
    }
    data += 4 + *len;
    size -= 4 + *len;
    switch (request.op) {
      case wire::Op::kSet:
        values[request.strings.at(0)] = request.strings.at(1);
        break;
      case wire::Op::kAdd: {
        std::string& text = values[request.strings.at(0)];
        int64_t sum = 0;
        std::string why;
        if (braid::bootstrap::addToCounter(text, request.delta, &sum, &why)) {
          text = std::to_string(sum);
        }
        break;
      }
      case wire::Op::kGet:
      case wire::Op::kWait:
        for (const auto& key : request.strings) (void)values.count(key);
        break;
    }
  }
}

void reply(const char* data, size_t size) {
  const wire::Reply r = wire::decodeReply(data, size);
  if (r.text.size() > braid::bootstrap::kMaxValueBytes) broken("reply text over the limit");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const braid::fuzz::Input in = braid::fuzz::split(bytes, size);
  try {
    switch (in.mode % 3) {
      case 0:
        handshake(in.data, in.size, (in.mode & 4) != 0);
        break;
      case 1:
        frames(in.data, in.size);
        break;
      default:
        reply(in.data, in.size);
    }
  } catch (const wire::ParseError&) {
  } catch (const braid::Error&) {
  }
  return 0;
}
