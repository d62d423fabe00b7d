// Writes the seed corpora, fuzz/corpus/<target>/, from braid's own encoders: real handshakes and
// frames, real checkpoints, graphs written by formatGraph(), nccl-tests command lines, plus a few
// edge cases each. The example topology files are copied by fuzz/README.md's command.
//   fuzz_make_corpus DIR     (DIR = fuzz/corpus; existing seeds of the same name are replaced)
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "comm/bootstrap/wire.h"
#include "fuzz/fixture.h"
#include "topology/topology.h"
#include "trainer/train/checkpoint.h"
#include "transport/tcp/wire.h"
#include "transport/ucx/wire.h"

namespace fz = braid::fuzz;
namespace wire = braid::bootstrap::wire;
namespace tcp = braid::transport::tcp;
namespace ucx = braid::transport::ucx;

namespace {

std::string root;

void seed(const std::string& target, const std::string& name, const std::string& bytes) {
  const std::string dir = root + "/" + target;
  ::mkdir(dir.c_str(), 0755);
  std::ofstream(dir + "/" + name, std::ios::binary) << bytes;
}

std::string mode(uint8_t m, const std::string& rest) { return std::string(1, char(m)) + rest; }

template <typename T>
std::string raw(const T& value) {
  return std::string(reinterpret_cast<const char*>(&value), sizeof value);
}

std::string storeHello(uint32_t magic, uint32_t version, uint32_t world,
                       const std::string& secret) {
  wire::Writer w;
  w.u32(magic);
  w.u32(version);
  w.u32(world);
  w.str(secret);
  return w.bytes();
}

void bootstrapSeeds() {
  const std::string t = "bootstrap_wire";
  seed(t, "hello", mode(0, storeHello(wire::kMagic, wire::kVersion, 4, "admission-secret-42")));
  seed(t, "hello_bytewise", mode(4, storeHello(wire::kMagic, wire::kVersion, 0, "")));
  seed(t, "hello_then_frame",
       mode(0, storeHello(wire::kMagic, wire::kVersion, 2, "s") +
                   wire::encodeRequest({wire::Op::kGet, 5, 0, {"k"}})));
  seed(t, "hello_bad_magic", mode(0, storeHello(0x47455420, wire::kVersion, 4, "GET /")));
  seed(t, "hello_long_secret",
       mode(0, storeHello(wire::kMagic, wire::kVersion, 4,
                          std::string(wire::kMaxSecretBytes + 1, 's'))));
  std::string session =
      wire::encodeRequest({wire::Op::kSet, 0, 0, {"rank0/addr", "10.0.0.1:29500"}});
  session += wire::encodeRequest({wire::Op::kAdd, 0, 1, {"barrier/0"}});
  session += wire::encodeRequest({wire::Op::kAdd, 0, -3, {"barrier/0"}});
  session += wire::encodeRequest({wire::Op::kGet, 30000, 0, {"rank0/addr"}});
  session += wire::encodeRequest({wire::Op::kWait, 1000, 0, {"rank0/addr", "barrier/0"}});
  seed(t, "frames", mode(1, session));
  seed(t, "frames_add_text",
       mode(1, wire::encodeRequest({wire::Op::kSet, 0, 0, {"k", "12x"}}) +
                   wire::encodeRequest({wire::Op::kAdd, 0, 1, {"k"}})));
  std::string truncated = wire::encodeRequest({wire::Op::kSet, 0, 0, {"key", "value"}});
  seed(t, "frames_truncated", mode(1, truncated.substr(0, truncated.size() - 2)));
  wire::Writer oversized;
  oversized.u32(1u << 30);
  seed(t, "frames_oversized", mode(1, oversized.bytes()));
  wire::Writer reply;
  reply.u8(0);
  reply.u8(0);
  reply.u8(0);
  reply.u8(0);
  reply.i64(7);
  reply.str("value");
  seed(t, "reply", mode(2, reply.bytes()));
}

void tcpSeeds() {
  const std::string t = "tcp_wire";
  seed(t, "hello", mode(0, tcp::encodeHello(fz::kSize, 3, fz::kRank, fz::kJob, fz::kSecret)));
  seed(t, "hello_wrong_secret", mode(0, tcp::encodeHello(fz::kSize, 0, fz::kRank, fz::kJob, "x")));
  seed(t, "hello_connected_peer",
       mode(0, tcp::encodeHello(fz::kSize, fz::kConnectedPeer, fz::kRank, fz::kJob, fz::kSecret)));
  auto frame = [](uint32_t type, uint32_t channel, uint64_t length) {
    tcp::FrameHeader h;
    h.type = type;
    h.channel = channel;
    h.length = length;
    h.meta.words[0] = 42;
    return raw(h);
  };
  std::string stream = frame(tcp::kData, 0, 16) + std::string(16, 'd');
  stream += frame(tcp::kCredit, 1, 1);
  stream += frame(tcp::kData, 1, 0);
  stream += frame(tcp::kData, 0, fz::kSlotBytes) + std::string(fz::kSlotBytes, 'e');
  stream += frame(tcp::kCredit, 1, fz::kPosted);
  stream += frame(tcp::kAbort, 0, 4) + "boom";
  seed(t, "frames", mode(1, stream));
  seed(t, "frames_too_big", mode(1, frame(tcp::kData, 0, fz::kSlotBytes + 1)));
  seed(t, "frames_credit_back", mode(1, frame(tcp::kCredit, 0, 2) + frame(tcp::kCredit, 0, 1)));
  std::string full;
  for (int i = 0; i < 6; ++i) full += frame(tcp::kData, 1, 1) + "x";
  seed(t, "frames_full", mode(1, full));
}

void ucxSeeds() {
  const std::string t = "ucx_wire";
  auto control = [](uint32_t type, int32_t rank, uint32_t channel, uint64_t value,
                    const std::string& payload) {
    ucx::ControlHeader h;
    h.type = type;
    h.rank = rank;
    h.channel = channel;
    h.value = value;
    return std::string(1, char(sizeof h)) + raw(h) + payload;
  };
  ucx::Hello hello;
  hello.size = fz::kSize;
  hello.target = fz::kRank;
  hello.jobIdBytes = static_cast<uint32_t>(std::strlen(fz::kJob));
  hello.secretBytes = static_cast<uint32_t>(std::strlen(fz::kSecret));
  hello.pid = 4242;
  hello.hostId = 0x1234;
  seed(t, "hello", mode(0, control(ucx::kHello, 1, 0, 0, raw(hello) + fz::kJob + fz::kSecret)));
  seed(t, "hello_short", mode(0, control(ucx::kHello, 1, 0, 0, raw(hello))));
  seed(t, "credit", mode(0, control(ucx::kCredit, 2, 1, fz::kPosted, "")));
  seed(t, "credit_beyond", mode(0, control(ucx::kCredit, 2, 1, fz::kPosted + 1, "")));
  seed(t, "abort", mode(0, control(ucx::kAbort, 7, 0, 0, "rank 7 aborted: out of memory")));
  seed(t, "header_short", mode(0, std::string(1, char(8)) + std::string(8, 'h')));
  auto data = [](uint64_t arrived, uint64_t slots, uint64_t index, uint64_t length, uint64_t bytes,
                 uint64_t seq) {
    ucx::SlotHeader h;
    h.bytes = bytes;
    h.seq = seq;
    return raw(arrived << 2) + raw(slots - 1) + raw(index) + raw(length) + raw(h);
  };
  seed(t, "data", mode(1, data(5, 4, 1, 64 + 100, 100, 5)));
  seed(t, "data_wrong_seq", mode(1, data(5, 4, 1, 64 + 100, 100, 9)));
  seed(t, "data_short", mode(1, data(0, 4, 0, 10, 0, 0)));
}

void topologySeeds() {
  const std::string t = "topology_file";
  seed(t, "uniform_2x2", braid::topology::formatGraph(braid::topology::uniformGraph(2, 2)));
  seed(t, "placed",
       "braid-topology 1\n"
       "link shm bw=20GB/s lat=0.3us overhead=0.1us\n"
       "link gpu bw=150GB/s lat=3us\n"
       "link net bw=100Gbit/s lat=5us  # between nodes\n"
       "node gpu[00-01] ranks=2 gpus=2 nics=1 nic=200Gbit/s l3=32M host=h%20x\n"
       "device gpu[00-01] kind=gpu name=H100 pci=0000:17:00.0 numa=0\n"
       "device gpu00 kind=nic name=mlx5_0 speed=25GB/s\n"
       "rank 0-1 node=gpu00 gpu=0 numa=0 cpus=0-7\n"
       "rank 3,2 node=gpu01 gpu=1\n");
  seed(t, "bad_range", "braid-topology 1\nnode n[3-1] ranks=1\n");
  braid::topology::RankDescriptor d;
  d.host = "host-a";
  d.hostname = "node 1";
  d.cpus = "0,1,2,3";
  d.numa = 0;
  d.packages = 1;
  d.cores = 4;
  d.pus = 8;
  d.l3Bytes = 32 << 20;
  braid::topology::Device nic;
  nic.kind = braid::topology::DeviceKind::kNic;
  nic.name = "eth0";
  nic.gbps = 12.5;
  d.devices = {nic};
  seed(t, "descriptor", braid::topology::serializeDescriptor(d));
}

void checkpointSeeds() {
  const std::string t = "checkpoint";
  // As tests/trainer/train/checkpoint_test.cc's sampleState(), with fewer parameters.
  braid::trainer::CheckpointState s;
  s.fingerprint = {0x1234abcdull, "mlp", 2, 64, "adam", 7, 384};
  s.step = 12;
  s.sampler = {1, 3};
  for (int i = 0; i < 16; ++i) s.params.push_back(0.001f * static_cast<float>(i) - 0.3f);
  s.buffers = {1.0f, 2.0f, -3.5f};
  s.optimizer = {'o', 'p', 't', '\0', 'x'};
  auto bytes = [](const braid::trainer::CheckpointState& state) {
    std::vector<char> v = braid::trainer::encodeCheckpoint(state);
    return std::string(v.begin(), v.end());
  };
  seed(t, "file", mode(0, bytes(s)));
  seed(t, "body", mode(1, bytes(s)));
  s.lossScale = braid::trainer::CheckpointLossScale{65536.0f, 10, 2};
  seed(t, "file_fp16", mode(0, bytes(s)));
  seed(t, "body_fp16", mode(1, bytes(s)));
  seed(t, "file_truncated", mode(0, bytes(s).substr(0, 60)));
}

void benchSeeds() {
  const std::string t = "bench_args";
  seed(t, "sweep", "-b 8 -e 128M -f 2 -g 1");
  seed(t, "long_flags", "--minbytes=1K --maxbytes=1G --stepbytes 1M -d all -o all -n 5 -w 1");
  seed(t, "everything",
       "-r all -z 1 -a 2 -c 0 -J out.json --algo ring --transport tcp --baseline none --seed 7 "
       "-t 1 -m 1 -p 0 -G 0 -C 1");
  seed(t, "nul_separated",
       std::string("-b\0"
                   "64K\0"
                   "-e8M\0"
                   "-f\0"
                   "0x10",
                   20));
  seed(t, "help", "-h --help");
  seed(t, "bad_value", "-b 8 -e 4 -n 0");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR (fuzz/corpus)\n", argv[0]);
    return 2;
  }
  root = argv[1];
  ::mkdir(root.c_str(), 0755);
  bootstrapSeeds();
  tcpSeeds();
  ucxSeeds();
  topologySeeds();
  checkpointSeeds();
  benchSeeds();
  return 0;
}
