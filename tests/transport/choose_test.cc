// transport::chooseKinds: the backend per peer that comm asks for (BRAID_TRANSPORT forcing, else
// shm > ofi (hardware provider) > ucx > tcp; device buffers: cuda_ipc), and the backend registry
// behind it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "transport/transport.h"

namespace braid::transport {
namespace {

const std::vector<std::string> kHosts = {"a", "a", "b"};  // ranks 0, 1 share a host

TEST(ChooseKinds, BestAvailablePerPeer) {
  // ofi only where its provider is a hardware one (describeBackends says so), then ucx, then tcp.
  const bool ofiByDefault = describeBackends().find("ofi: available, picked by default") !=
                            std::string::npos;
  const Kind between = ofiByDefault              ? Kind::kOfi
                       : kindAvailable(Kind::kUcx) ? Kind::kUcx
                                                   : Kind::kTcp;
  EXPECT_EQ(chooseKinds(0, kHosts, ""), (std::vector<Kind>{Kind::kSelf, Kind::kShm, between}));
  EXPECT_EQ(chooseKinds(2, kHosts, ""), (std::vector<Kind>{between, between, Kind::kSelf}));
}

TEST(ChooseKinds, ForcedKindForEveryPeer) {
  EXPECT_EQ(chooseKinds(1, kHosts, "tcp"),
            (std::vector<Kind>{Kind::kTcp, Kind::kSelf, Kind::kTcp}));
  if (kindAvailable(Kind::kUcx)) {
    EXPECT_EQ(chooseKinds(1, kHosts, "ucx"),
              (std::vector<Kind>{Kind::kUcx, Kind::kSelf, Kind::kUcx}));
  } else {
    try {
      chooseKinds(1, kHosts, "ucx");
      ADD_FAILURE() << "ucx forced without UCX";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
      EXPECT_NE(std::string(e.what()).find("is not available: this build has no UCX"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(chooseKinds(1, {"a", "a"}, "shm"), (std::vector<Kind>{Kind::kShm, Kind::kSelf}));
}

TEST(ChooseKinds, ShmToAnotherHostIsAUsageError) {
  try {
    chooseKinds(0, kHosts, "shm");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
    EXPECT_NE(std::string(e.what()).find(
                  "rank 0: BRAID_TRANSPORT=shm, but peer rank 2 is on another host (b vs a)"),
              std::string::npos)
        << e.what();
  }
}

TEST(ChooseKinds, UnknownNameIsAUsageError) {
  try {
    chooseKinds(0, kHosts, "ib");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("unknown transport 'ib'"), std::string::npos) << e.what();
  }
}

TEST(ChooseKinds, CheckForcedKind) {
  EXPECT_EQ(checkForcedKind(""), "");
  EXPECT_EQ(checkForcedKind("auto"), "");
  EXPECT_EQ(checkForcedKind("tcp"), "tcp");
  EXPECT_EQ(chooseKinds(0, kHosts, "auto"), chooseKinds(0, kHosts, ""));
  EXPECT_THROW(checkForcedKind("self"), Error);
}

TEST(ChooseKinds, ParseKindKnowsEveryBackend) {
  Kind kind;
  for (const char* name : {"shm", "tcp", "ucx", "cuda_ipc"}) {
    EXPECT_TRUE(parseKind(name, &kind)) << name;
    EXPECT_STREQ(kindName(kind), name);
  }
  EXPECT_FALSE(parseKind("self", &kind));
  EXPECT_TRUE(kindAvailable(Kind::kShm));
  EXPECT_TRUE(kindAvailable(Kind::kTcp));
}

TEST(ChooseKinds, CudaIpcCarriesDeviceBuffersOnly) {
  try {
    checkForcedKind("cuda_ipc");
    FAIL() << "cuda_ipc forced for host buffers";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
    EXPECT_NE(std::string(e.what()).find("carries device buffers only"), std::string::npos)
        << e.what();
  }
  for (Kind k : chooseKinds(0, kHosts, "")) EXPECT_NE(k, Kind::kCudaIpc) << "host buffers";
}

TEST(ChooseKinds, DeviceBuffersTakeCudaIpcOnOneHost) {
  std::string why;
  if (kindAvailable(Kind::kCudaIpc, &why)) {
    EXPECT_EQ(chooseKinds(1, {"a", "a", "a"}, "", /*deviceMemory=*/true),
              (std::vector<Kind>{Kind::kCudaIpc, Kind::kSelf, Kind::kCudaIpc}));
  } else {
    EXPECT_NE(why.find("no CUDA IPC"), std::string::npos) << why;
  }
  // Nothing carries device buffers to another host; the error says what was tried.
  try {
    chooseKinds(0, {"a", "b"}, "", /*deviceMemory=*/true);
    FAIL() << "device buffers to another host";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidUsage);
    const std::string what = e.what();
    EXPECT_NE(what.find("no transport for device buffers reaches peer rank 1"), std::string::npos)
        << what;
  }
  EXPECT_THROW(chooseKinds(0, {"a", "a"}, "shm", /*deviceMemory=*/true), Error)
      << "host transports cannot be forced for device buffers";
}

}  // namespace
}  // namespace braid::transport
