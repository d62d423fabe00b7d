// The host engine's slot streaming (comm/exec/host_pieces.h): when a piece's slot payload is
// streamed, and that a streamed piece leaves the slot and the output exactly as the ordinary
// path does, for every sending prim, dtype and reduction, at odd lengths and unaligned addresses.
#include "comm/exec/host_pieces.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "common/error.h"
#include "kernels/kernels.h"

namespace braid::comm {
namespace {

Piece sendingPiece(size_t bytes, uint32_t lineNanos) {
  static char slot[1];
  Piece p;
  p.prim = Prim::kSend;
  p.out = slot;
  p.bytes = bytes;
  p.len = bytes;
  p.receiverLineNanos = lineNanos;
  return p;
}

TEST(SlotStreaming, AutoStreamsLargePiecesToAFarReceiverOnly) {
  HostPieces autoPieces(false, SlotStreaming::kAuto);
  EXPECT_FALSE(autoPieces.streamsSlot(sendingPiece(64 << 10, 0)));  // unknown
  EXPECT_FALSE(autoPieces.streamsSlot(sendingPiece(64 << 10, kFarLineNanos)));
  EXPECT_TRUE(autoPieces.streamsSlot(sendingPiece(64 << 10, kFarLineNanos + 1)));
  EXPECT_TRUE(autoPieces.streamsSlot(sendingPiece(kStreamSlotMinBytes, 300)));
  EXPECT_FALSE(autoPieces.streamsSlot(sendingPiece(kStreamSlotMinBytes - 1, 300)));
  Piece recv = sendingPiece(64 << 10, 300);
  recv.prim = Prim::kRecv;
  recv.out = nullptr;  // nothing sent: nothing to stream
  EXPECT_FALSE(autoPieces.streamsSlot(recv));

  HostPieces always(false, SlotStreaming::kAlways);
  EXPECT_TRUE(always.streamsSlot(sendingPiece(8, 0)));
  EXPECT_FALSE(always.streamsSlot(recv));
  HostPieces never(false, SlotStreaming::kNever);
  EXPECT_FALSE(never.streamsSlot(sendingPiece(64 << 10, 1000)));
}

TEST(SlotStreaming, EnvironmentIsParsedAndBadValuesAreNamed) {
  ::setenv("BRAID_STREAM_SLOTS", "1", 1);
  EXPECT_EQ(slotStreamingFromEnv(), SlotStreaming::kAlways);
  ::setenv("BRAID_STREAM_SLOTS", "0", 1);
  EXPECT_EQ(slotStreamingFromEnv(), SlotStreaming::kNever);
  ::setenv("BRAID_STREAM_SLOTS", "auto", 1);
  EXPECT_EQ(slotStreamingFromEnv(), SlotStreaming::kAuto);
  ::setenv("BRAID_STREAM_SLOTS", "yes", 1);
  try {
    slotStreamingFromEnv();
    ADD_FAILURE() << "BRAID_STREAM_SLOTS=yes accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("BRAID_STREAM_SLOTS='yes'"), std::string::npos)
        << e.what();
  }
  ::unsetenv("BRAID_STREAM_SLOTS");
  EXPECT_EQ(slotStreamingFromEnv(), SlotStreaming::kAuto);
}

// Buffers for one piece at a byte offset (unaligned), filled with element values that every
// dtype and op keep finite.
struct PieceBuffers {
  std::vector<char> src, slot, out, dst;
  PieceBuffers(DataType type, size_t len, size_t offset, uint32_t seed) {
    const size_t bytes = len * dataTypeSize(type) + offset;
    src.assign(bytes, 0);
    slot.assign(bytes, 0);
    out.assign(bytes, 0x5a);
    dst.assign(bytes, 0x5a);
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> value(1, 9);
    for (size_t i = 0; i < len; ++i) {
      kernels::storeElement(type, src.data() + offset, i, value(rng));
      kernels::storeElement(type, slot.data() + offset, i, value(rng));
    }
  }
};

TEST(SlotStreaming, StreamedPiecesMatchTheOrdinaryPathForEverySendingPrim) {
  const Prim prims[] = {Prim::kSend, Prim::kRecvReduceSend, Prim::kRecvReduceCopySend,
                        Prim::kRecvCopySend};
  const DataType types[] = {DataType::kInt8,    DataType::kUint8,    DataType::kInt32,
                            DataType::kUint32,  DataType::kInt64,    DataType::kUint64,
                            DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                            DataType::kFloat64};
  const RedOp ops[] = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin, RedOp::kAvg};
  HostPieces ordinary(false, SlotStreaming::kNever);
  HostPieces streamed(false, SlotStreaming::kAlways);
  int checked = 0;
  for (Prim prim : prims) {
    for (DataType type : types) {
      for (RedOp op : ops) {
        for (size_t len : {size_t{1}, size_t{7}, size_t{1021}, size_t{16411}}) {
          for (bool streamOutput : {false, true}) {
            const size_t offset = 3;  // unaligned on purpose
            PieceBuffers a(type, len, offset, 17), b(type, len, offset, 17);
            ExecArgs args;
            args.dtype = type;
            args.op = op == RedOp::kAvg ? RedOp::kSum : op;  // avg: a sum, then the divisor
            args.streamOutput = streamOutput;
            auto run = [&](HostPieces& engine, PieceBuffers& m) {
              Piece p;
              p.prim = prim;
              p.slot = m.slot.data() + offset;
              p.src = m.src.data() + offset;
              p.out = m.out.data() + offset;
              p.dst = m.dst.data() + offset;
              p.len = len;
              p.bytes = len * dataTypeSize(type);
              p.divisor = op == RedOp::kAvg && prim == Prim::kRecvReduceCopySend ? 3 : 1;
              engine.move(p, args);
            };
            run(ordinary, a);
            run(streamed, b);
            ASSERT_EQ(a.out, b.out) << primName(prim) << " " << dataTypeName(type) << " "
                                    << redOpName(op) << " len " << len;
            ASSERT_EQ(a.dst, b.dst) << primName(prim) << " " << dataTypeName(type) << " "
                                    << redOpName(op) << " len " << len;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_EQ(checked, 4 * 10 * 5 * 4 * 2);
}

}  // namespace
}  // namespace braid::comm
