#include "comm/exec/host_pieces.h"

#include <optional>
#include <string>

#include "common/env.h"
#include "common/error.h"
#include "kernels/kernels.h"

namespace braid::comm {

SlotStreaming slotStreamingFromEnv() {
  const std::optional<std::string> v = envString("BRAID_STREAM_SLOTS");
  if (!v || v->empty() || *v == "auto") return SlotStreaming::kAuto;
  if (*v == "0") return SlotStreaming::kNever;
  if (*v == "1") return SlotStreaming::kAlways;
  fail(ErrorCode::kInvalidUsage, "BRAID_STREAM_SLOTS='{}': expected auto, 0 or 1", *v);
}

bool HostPieces::streamsSlot(const Piece& p) const {
  if (p.out == nullptr) return false;
  switch (slotStreaming_) {
    case SlotStreaming::kNever:
      return false;
    case SlotStreaming::kAlways:
      return true;
    case SlotStreaming::kAuto:
      break;
  }
  return p.bytes >= kStreamSlotMinBytes && p.receiverLineNanos > kFarLineNanos;
}

void HostPieces::moveStreamingSlot(const Piece& p, const ExecArgs& args) {
  const size_t len = p.len, bytes = p.bytes;
  const char* payload = nullptr;  // what goes into the slot, in cache
  switch (p.prim) {
    case Prim::kSend:
      payload = p.src;
      break;
    case Prim::kRecvCopySend:
      payload = static_cast<const char*>(p.slot);
      break;
    default: {  // the reducing senders (kRecvReduceSend, kRecvReduceCopySend): into scratch first
      if (scratch_.size() < bytes) scratch_.resize(bytes);
      kernels::reduce(scratch_.data(), p.slot, p.src, len, args.dtype, args.op);
      if (p.divisor > 1)
        kernels::divide(scratch_.data(), scratch_.data(), len, args.dtype, p.divisor);
      payload = scratch_.data();
      break;
    }
  }
  kernels::copyStreaming(p.out, payload, bytes);  // ends with a store fence: before the post
  if (p.prim == Prim::kRecvCopySend || p.prim == Prim::kRecvReduceCopySend) {
    if (args.streamOutput) {
      kernels::copyStreaming(p.dst, payload, bytes);
    } else {
      kernels::copy(p.dst, payload, bytes);
    }
  }
}

void HostPieces::move(const Piece& p, const ExecArgs& args) {
  if (streamsSlot(p)) {
    moveStreamingSlot(p, args);
    return;
  }
  const size_t len = p.len, bytes = p.bytes;
  const bool avg = p.divisor > 1;
  const bool stream = args.streamOutput;
  const char* src = p.src;
  char* dst = p.dst;
  void* out = p.out;
  // Streaming stores skip the read-for-ownership of output lines nobody reads soon; results are
  // formed in cache (the outgoing slot, or scratch) and then streamed out.
  auto writeOut = [&](const void* from) {
    if (stream) {
      kernels::copyStreaming(dst, from, bytes);
    } else {
      kernels::copy(dst, from, bytes);
    }
  };
  char* scratch = nullptr;
  if (stream && (p.prim == Prim::kRecvReduce || p.prim == Prim::kGatherReduce)) {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    scratch = scratch_.data();
  }
  switch (p.prim) {
    case Prim::kSend:
      kernels::copy(out, src, bytes);
      break;
    case Prim::kRecv:
      writeOut(p.slot);
      break;
    case Prim::kRecvReduce: {
      char* result = stream ? scratch : dst;
      kernels::reduce(result, p.slot, src, len, args.dtype, args.op);
      if (avg) kernels::divide(result, result, len, args.dtype, p.divisor);
      if (stream) writeOut(result);
      break;
    }
    case Prim::kRecvReduceSend:
      kernels::reduce(out, p.slot, src, len, args.dtype, args.op);
      break;
    case Prim::kRecvReduceCopySend:
      if (avg || stream) {
        kernels::reduce(out, p.slot, src, len, args.dtype, args.op);
        if (avg) kernels::divide(out, out, len, args.dtype, p.divisor);
        writeOut(out);
      } else {
        kernels::reduceCopy(dst, out, p.slot, src, len, args.dtype, args.op);
      }
      break;
    case Prim::kRecvCopySend:
      kernels::copy(out, p.slot, bytes);
      writeOut(p.slot);
      break;
    case Prim::kCopy:
      if (avg) {
        kernels::divide(dst, src, len, args.dtype, p.divisor);
      } else if (dst != src) {
        writeOut(src);
      }
      break;
    case Prim::kGatherReduce: {
      char* result = stream ? scratch : dst;
      kernels::reduceMany(result, p.gatherSrcs, p.gatherCount, len, args.dtype, args.op);
      if (avg) kernels::divide(result, result, len, args.dtype, p.divisor);
      if (stream) writeOut(result);
      break;
    }
  }
}

}  // namespace braid::comm
