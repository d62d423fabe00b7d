// The ucx transport's wire format (transport/ucx/wire.h) as a receiving rank meets it. The first
// input byte picks the reader:
//   even: an active message, as onControl() takes it: the next byte is the header's length, then
//         the header (decodeControlHeader()), then the payload: a hello (decodeHello()), a credit
//         (creditError()) or an abort reason.
//   odd:  a data message landing in a receive slot, as onRecvDone() checks it: arrived count,
//         slot count, slot index and length (8 bytes each), then the slot's SlotHeader.
// braid::Error is an expected refusal; anything else that escapes is a finding.
#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "fuzz/fixture.h"
#include "transport/ucx/wire.h"

namespace ucx = braid::transport::ucx;
namespace fz = braid::fuzz;

namespace {

void control(const char* data, size_t size) {
  if (size < 1) return;
  const size_t headerBytes = std::min<size_t>(static_cast<uint8_t>(data[0]), size - 1);
  const char* header = data + 1;
  const char* payload = header + headerBytes;
  const size_t bytes = size - 1 - headerBytes;
  std::string why;
  const auto h = ucx::decodeControlHeader(header, headerBytes, fz::kSize, &why);
  if (!h) return;
  if (h->rank < 0 || h->rank >= fz::kSize) fz::broken("control message from a rank out of range");
  switch (h->type) {
    case ucx::kHello: {
      const auto hello = ucx::decodeHello(payload, bytes, fz::kSize, fz::kRank, &why);
      if (hello && sizeof(ucx::Hello) + hello->jobId.size() + hello->secret.size() != bytes) {
        fz::broken("hello payload length");
      }
      break;
    }
    case ucx::kCredit:
      (void)ucx::creditError(*h, fz::kChannels, fz::kPosted);
      break;
    case ucx::kAbort:
      (void)std::string(payload, std::min<size_t>(bytes, ucx::kMaxAbortReason));
      break;
    default:
      break;
  }
}

uint64_t take64(const char*& data, size_t& size) {
  uint64_t v = 0;
  const size_t n = std::min<size_t>(sizeof v, size);
  std::memcpy(&v, data, n);
  data += n;
  size -= n;
  return v;
}

void dataMessage(const char* data, size_t size) {
  const uint64_t arrived = take64(data, size) >> 2;  // counters never near 2^64
  const uint64_t slots = take64(data, size) % ucx::kMaxSlots + 1;
  const uint64_t index = take64(data, size) % slots;
  const size_t length = take64(data, size);
  ucx::SlotHeader header;
  std::memcpy(&header, data, std::min(size, sizeof header));
  const uint64_t seq = ucx::expectedSeq(arrived, index, slots);
  // The slot's next use at or after `arrived`: the same slot, and less than a lap ahead.
  if (seq % slots != index || seq < arrived || seq - arrived >= slots) {
    fz::broken("expectedSeq names another slot");
  }
  (void)ucx::slotError(length, header, seq);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  const fz::Input in = fz::split(bytes, size);
  try {
    if (in.mode % 2 == 0) {
      control(in.data, in.size);
    } else {
      dataMessage(in.data, in.size);
    }
  } catch (const braid::Error&) {
  }
  return 0;
}
