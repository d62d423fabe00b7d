#include "comm/schedule/verifier.h"

#include <fmt/format.h>

#include <deque>
#include <map>
#include <tuple>
#include <vector>

namespace braid::comm {
namespace {

// Symbolic element: how many times each rank's contribution is in it, plus how many times the
// finalize was applied. kGarbage marks never-written output.
struct Sym {
  std::vector<uint8_t> counts;  // nranks entries
  uint8_t finalized = 0;
  bool garbage = false;
  int64_t index = -1;  // which input element (same on every rank); -2 once mixed
};

Sym combine(const Sym& a, const Sym& b) {
  Sym r;
  r.garbage = a.garbage || b.garbage;
  r.counts.resize(a.counts.size());
  for (size_t i = 0; i < a.counts.size(); ++i) r.counts[i] = a.counts[i] + b.counts[i];
  r.finalized = a.finalized + b.finalized;
  r.index = a.index == b.index ? a.index : -2;
  return r;
}

std::string symText(const Sym& s) {
  if (s.garbage) return "garbage";
  std::string t = "{";
  for (size_t i = 0; i < s.counts.size(); ++i) {
    if (s.counts[i])
      t += fmt::format(
          "{}{}", t.size() > 1 ? "," : "",
          s.counts[i] > 1 ? fmt::format("{}x{}", s.counts[i], i) : fmt::format("{}", i));
  }
  t += fmt::format("}} of element {}", s.index);
  return t + (s.finalized ? fmt::format(" finalized {}", s.finalized) : "");
}

using Message = std::vector<Sym>;

struct RankState {
  std::vector<Sym> input, output;  // output aliases input for in-place (see bufferAt)
  bool inPlace = false;
  size_t outputBase = 0;  // in-place: output[0] is input[outputBase] (AG: input is output chunk)
  RankProgram program;
  std::vector<size_t> step, piece;
};

class Simulator {
 public:
  Simulator(const ScheduleSpec& spec, const std::vector<RankProgram>& programs,
            const VerifyOptions& options)
      : spec_(spec), options_(options), ranks_(spec.nranks) {
    perPiece_ = spec.elemsPerPiece ? spec.elemsPerPiece : SIZE_MAX;
    for (int r = 0; r < spec.nranks; ++r) ranks_[r].program = programs.at(r);
  }

  std::string run() {
    const int n = spec_.nranks;
    const size_t inCount = inputCount(spec_), outCount = outputCount(spec_);
    for (int r = 0; r < n; ++r) {
      RankState& rs = ranks_[r];
      Sym unit;
      unit.counts.assign(n, 0);
      unit.counts[r] = 1;
      Sym garbage;
      garbage.counts.assign(n, 0);
      garbage.garbage = true;
      // In place, one array holds both; reduce-scatter's output is chunk r of the input and
      // all-gather's input is chunk r of the output.
      rs.inPlace = spec_.inPlace;
      auto element = [&](size_t i) {
        Sym v = unit;
        v.index = static_cast<int64_t>(i);
        return v;
      };
      if (spec_.inPlace && inputIsOutputBlock()) {
        rs.output.assign(outCount, garbage);
        for (size_t i = 0; i < spec_.count; ++i) rs.output[r * spec_.count + i] = element(i);
      } else {
        for (size_t i = 0; i < inCount; ++i) rs.input.push_back(element(i));
        if (!spec_.inPlace) rs.output.assign(outCount, garbage);
      }
      if (spec_.inPlace && outputIsInputBlock()) rs.outputBase = r * spec_.count;
      rs.step.assign(rs.program.lanes.size(), 0);
      rs.piece.assign(rs.program.lanes.size(), 0);
    }
    // Round-robin until everyone finishes or nobody can move (deadlock).
    for (;;) {
      bool progressed = false, done = true;
      for (int r = 0; r < n; ++r) {
        RankState& rs = ranks_[r];
        for (size_t l = 0; l < rs.program.lanes.size(); ++l) {
          while (rs.step[l] < rs.program.lanes[l].steps.size()) {
            done = false;
            std::string err;
            if (!advance(r, l, &err)) {
              if (!err.empty()) return err;
              break;
            }
            progressed = true;
          }
        }
      }
      if (done) break;
      if (!progressed) return deadlockReport();
    }
    for (auto& [key, queue] : channels_) {
      if (!queue.empty()) {
        return fmt::format("{} message(s) from rank {} to rank {} on channel {} never received",
                           queue.size(), std::get<0>(key), std::get<1>(key), std::get<2>(key));
      }
    }
    return checkResults();
  }

 private:
  Sym& at(int r, Buf buf, size_t i) {
    RankState& rs = ranks_[r];
    if (!rs.inPlace) return buf == Buf::kInput ? rs.input.at(i) : rs.output.at(i);
    if (inputIsOutputBlock()) {
      return buf == Buf::kInput ? rs.output.at(r * spec_.count + i) : rs.output.at(i);
    }
    return buf == Buf::kInput ? rs.input.at(i) : rs.input.at(rs.outputBase + i);
  }
  // In place, all-gather's and gather's input is the rank's block of the output; reduce-scatter's
  // and scatter's output is the rank's block of the input; the others' output is the input.
  bool inputIsOutputBlock() const {
    return spec_.shape == Collective::kAllGather || spec_.shape == Collective::kGather;
  }
  bool outputIsInputBlock() const {
    return spec_.shape == Collective::kReduceScatter || spec_.shape == Collective::kScatter;
  }
  size_t bufSize(int r, Buf buf) const {
    return buf == Buf::kInput ? inputCount(spec_) : outputCount(spec_);
  }

  using Key = std::tuple<int, int, int>;  // from, to, channel
  std::deque<Message>& chan(int from, int to, int channel) {
    return channels_[{from, to, channel}];
  }

  // One piece of the current step of lane l on rank r; false when it must wait.
  bool advance(int r, size_t l, std::string* err) {
    RankState& rs = ranks_[r];
    const Step& s = rs.program.lanes[l].steps[rs.step[l]];
    const size_t pieces = s.count == 0 ? 0 : pieceCount(s.count, perPiece_);
    if (pieces == 0) {
      rs.step[l]++;
      return true;
    }
    const size_t p = rs.piece[l];
    const size_t begin = p * perPiece_;
    const size_t len = std::min(perPiece_, s.count - begin);
    auto where = [&] {
      return fmt::format("rank {} lane {} step {} ({}) piece {}", r, l, rs.step[l],
                         primName(s.prim), p);
    };
    auto checkRange = [&](BufRange range) {
      if (range.offset + begin + len > bufSize(r, range.buf)) {
        *err = fmt::format("{}: range {}+{} beyond buffer of {}", where(), range.offset,
                           begin + len, bufSize(r, range.buf));
        return false;
      }
      return true;
    };
    if (primReads(s.prim) && !checkRange(s.src)) return false;
    if (primWrites(s.prim) && !checkRange(s.dst)) return false;

    // Gather what is received.
    std::vector<int> sources;
    if (s.prim == Prim::kGatherReduce) {
      for (int q = 0; q < spec_.nranks; ++q)
        if (q != r) sources.push_back(q);
    } else if (primReceives(s.prim)) {
      sources.push_back(s.recvPeer);
    }
    for (int q : sources) {
      if (q < 0 || q >= spec_.nranks || q == r) {
        *err = fmt::format("{}: bad receive peer {}", where(), q);
        return false;
      }
      auto& queue = chan(q, r, s.channel);
      if (queue.empty()) return false;
      if (queue.front().size() != len) {
        *err = fmt::format("{}: expected {} elements from rank {}, message has {}", where(), len, q,
                           queue.front().size());
        return false;
      }
    }
    if (primSends(s.prim)) {
      if (s.sendPeer < 0 || s.sendPeer >= spec_.nranks || s.sendPeer == r) {
        *err = fmt::format("{}: bad send peer {}", where(), s.sendPeer);
        return false;
      }
      if (static_cast<int>(chan(r, s.sendPeer, s.channel).size()) >= options_.slots) return false;
    }

    Message slot, outMsg;
    const bool single = s.prim != Prim::kGatherReduce && sources.size() == 1;
    if (single) slot = std::move(chan(sources[0], r, s.channel).front());
    auto fin = [&](Sym v) {
      if (s.finalize) v.finalized++;
      return v;
    };
    for (size_t i = 0; i < len; ++i) {
      const size_t si = s.src.offset + begin + i, di = s.dst.offset + begin + i;
      switch (s.prim) {
        case Prim::kSend:
          outMsg.push_back(at(r, s.src.buf, si));
          break;
        case Prim::kRecv:
          at(r, s.dst.buf, di) = slot[i];
          break;
        case Prim::kRecvReduce:
          at(r, s.dst.buf, di) = fin(combine(slot[i], at(r, s.src.buf, si)));
          break;
        case Prim::kRecvReduceSend:
          outMsg.push_back(combine(slot[i], at(r, s.src.buf, si)));
          break;
        case Prim::kRecvReduceCopySend: {
          Sym v = fin(combine(slot[i], at(r, s.src.buf, si)));
          at(r, s.dst.buf, di) = v;
          outMsg.push_back(v);
          break;
        }
        case Prim::kRecvCopySend:
          at(r, s.dst.buf, di) = slot[i];
          outMsg.push_back(slot[i]);
          break;
        case Prim::kCopy:
          at(r, s.dst.buf, di) = fin(at(r, s.src.buf, si));
          break;
        case Prim::kGatherReduce: {
          Sym acc;
          for (int q = 0; q < spec_.nranks; ++q) {
            const Sym& v = q == r ? at(r, s.src.buf, si) : chan(q, r, s.channel).front()[i];
            acc = q == 0 ? v : combine(acc, v);
          }
          at(r, s.dst.buf, di) = fin(acc);
          break;
        }
      }
    }
    if (single) chan(sources[0], r, s.channel).pop_front();
    if (s.prim == Prim::kGatherReduce)
      for (int q : sources) chan(q, r, s.channel).pop_front();
    if (primSends(s.prim)) chan(r, s.sendPeer, s.channel).push_back(std::move(outMsg));
    if (++rs.piece[l] == pieces) {
      rs.piece[l] = 0;
      rs.step[l]++;
    }
    return true;
  }

  std::string deadlockReport() {
    std::string text = "deadlock:";
    for (int r = 0; r < spec_.nranks; ++r) {
      const RankState& rs = ranks_[r];
      for (size_t l = 0; l < rs.program.lanes.size(); ++l) {
        if (rs.step[l] < rs.program.lanes[l].steps.size()) {
          const Step& s = rs.program.lanes[l].steps[rs.step[l]];
          text += fmt::format(" [rank {} lane {} stuck at step {} {} recv<-{} send->{}]", r, l,
                              rs.step[l], primName(s.prim), s.recvPeer, s.sendPeer);
        }
      }
    }
    return text;
  }

  // What every output element must hold.
  std::string checkResults() {
    const int n = spec_.nranks;
    const size_t outCount = outputCount(spec_);
    for (int r = 0; r < n; ++r) {
      const bool rootOnly = spec_.shape == Collective::kReduce || spec_.shape == Collective::kGather;
      const bool hasResult = !(rootOnly && r != spec_.root);
      if (!hasResult) continue;
      for (size_t i = 0; i < outCount; ++i) {
        Sym want;
        want.counts.assign(n, 0);
        want.index = static_cast<int64_t>(i);
        switch (spec_.shape) {
          case Collective::kAllReduce:
          case Collective::kReduce:
            want.counts.assign(n, 1);
            want.finalized = 1;
            break;
          case Collective::kReduceScatter:
            want.counts.assign(n, 1);
            want.finalized = 1;
            want.index = static_cast<int64_t>(r * spec_.count + i);
            break;
          case Collective::kAllGather:
          case Collective::kGather:
            want.counts[i / spec_.count] = 1;
            want.index = static_cast<int64_t>(i % spec_.count);
            break;
          case Collective::kBroadcast:
            want.counts[spec_.root] = 1;
            break;
          case Collective::kAllToAll:  // rank q's block for r
            want.counts[i / spec_.count] = 1;
            want.index = static_cast<int64_t>(r * spec_.count + i % spec_.count);
            break;
          case Collective::kScatter:  // the root's block for r
            want.counts[spec_.root] = 1;
            want.index = static_cast<int64_t>(r * spec_.count + i);
            break;
          default:
            return fmt::format("no expected result for {}", collectiveName(spec_.shape));
        }
        const Sym& got = at(r, Buf::kOutput, i);
        if (got.garbage || got.counts != want.counts || got.finalized != want.finalized ||
            got.index != want.index) {
          return fmt::format("rank {} output element {}: expected {}, found {}", r, i,
                             symText(want), symText(got));
        }
      }
    }
    return "";
  }

  ScheduleSpec spec_;
  VerifyOptions options_;
  size_t perPiece_;
  std::vector<RankState> ranks_;
  std::map<Key, std::deque<Message>> channels_;
};

// No two lanes of a rank may share a (peer, channel, direction): their messages would interleave
// in one FIFO.
std::string laneConflicts(const ScheduleSpec& spec, const std::vector<RankProgram>& programs) {
  for (int r = 0; r < spec.nranks; ++r) {
    std::map<std::tuple<int, int, bool>, size_t> owner;  // (peer, channel, sends) -> lane
    const auto& lanes = programs[r].lanes;
    for (size_t l = 0; l < lanes.size(); ++l) {
      for (const Step& s : lanes[l].steps) {
        std::vector<std::tuple<int, int, bool>> uses;
        if (s.prim == Prim::kGatherReduce) {
          for (int q = 0; q < spec.nranks; ++q)
            if (q != r) uses.emplace_back(q, s.channel, false);
        } else if (primReceives(s.prim)) {
          uses.emplace_back(s.recvPeer, s.channel, false);
        }
        if (primSends(s.prim)) uses.emplace_back(s.sendPeer, s.channel, true);
        for (const auto& use : uses) {
          auto [it, fresh] = owner.emplace(use, l);
          if (!fresh && it->second != l) {
            return fmt::format("rank {}: lanes {} and {} both {} peer {} on channel {}", r,
                               it->second, l, std::get<2>(use) ? "send to" : "receive from",
                               std::get<0>(use), std::get<1>(use));
          }
        }
      }
    }
  }
  return "";
}

}  // namespace

std::string verifySchedule(const ScheduleSpec& spec, const VerifyOptions& options) {
  std::vector<RankProgram> programs;
  for (int r = 0; r < spec.nranks; ++r) {
    try {
      programs.push_back(buildProgram(spec, r));
    } catch (const std::exception& e) {
      return fmt::format("{} {} n={}: rank {}: generator failed: {}", algorithmName(spec.family),
                         collectiveName(spec.shape), spec.nranks, r, e.what());
    }
  }
  return verifyPrograms(spec, programs, options);
}

std::string verifyPrograms(const ScheduleSpec& spec, const std::vector<RankProgram>& programs,
                           const VerifyOptions& options) {
  if (spec.count == 0) return "";
  if (static_cast<int>(programs.size()) != spec.nranks) return "one program per rank needed";
  std::string result = laneConflicts(spec, programs);
  if (result.empty()) {
    Simulator sim(spec, programs, options);
    result = sim.run();
  }
  if (result.empty()) return result;
  return fmt::format("{} {} n={} count={} root={} lanes={} {}: {}", algorithmName(spec.family),
                     collectiveName(spec.shape), spec.nranks, spec.count, spec.root, spec.lanes,
                     spec.inPlace ? "in-place" : "out-of-place", result);
}

}  // namespace braid::comm
