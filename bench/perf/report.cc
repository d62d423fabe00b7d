#include "bench/perf/report.h"

#include <cerrno>
#include <ctime>
#include <fstream>

#include "bench/format/names.h"
#include "common/error.h"

namespace braid::bench {
namespace {

nlohmann::json measurementJson(const Measurement& m) {
  nlohmann::json out;
  out["time_us"] = m.timeUs;
  out["algbw"] = m.algBw;
  out["busbw"] = m.busBw;
  out["wrong"] = m.checked ? nlohmann::json(m.wrong) : nlohmann::json(nullptr);
  return out;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : ",") + part;
  return out;
}

}  // namespace

const char* placementClass(double roundTripNs) {
  if (roundTripNs < 0) return "n/a";
  if (roundTripNs >= 2000) return "sharing a CPU";  // a bounce waits for the scheduler
  return roundTripNs < 150 ? "same L3" : "apart";
}

nlohmann::json makeReport(const RunInfo& info, const std::vector<ReportRow>& rows,
                          int64_t wrongTotal, double avgBusBw) {
  const BenchArgs& a = info.args;
  nlohmann::json doc;
  doc["collective"] = info.collective;
  doc["ranks"] = info.ranks;
  std::vector<std::string> types, ops;
  for (DataType t : a.types) types.emplace_back(dataTypeName(t));
  for (RedOp o : a.ops) ops.emplace_back(redOpName(o));
  doc["dtype"] = joined(types);
  doc["op"] = joined(ops);
  doc["algo"] = info.algo;
  doc["transport"] = info.transport;
  doc["host"] = info.host;
  doc["date"] = info.date;
  doc["launcher"] = info.launcher;
  doc["params"] = {
      {"minbytes", a.minBytes},
      {"maxbytes", a.maxBytes},
      {"stepbytes", a.stepBytes},
      {"stepfactor", a.stepFactor},
      {"iters", a.iters},
      {"warmup_iters", a.warmupIters},
      {"check", a.check},
      {"blocking", a.blocking},
      {"average", static_cast<int>(a.average)},
      {"root", a.root == BenchArgs::kAllRoots ? nlohmann::json("all") : nlohmann::json(a.root)},
      {"baseline", a.baselineMpi ? "mpi" : "none"},
      {"seed", a.seed},
      {"nthreads", a.threads},
  };
  auto ns = [](double v) { return v >= 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  doc["placement"] = {{"cpus", {info.placement.cpu0, info.placement.cpu1}},
                      {"round_trip_ns_start", ns(info.placement.startNs)},
                      {"round_trip_ns_end", ns(info.placement.endNs)},
                      {"class", placementClass(info.placement.startNs)}};
  nlohmann::json jrows = nlohmann::json::array();
  for (const ReportRow& r : rows) {
    nlohmann::json jr;
    jr["size"] = r.row.bytes;
    jr["count"] = r.row.count;
    jr["type"] = r.row.type;
    jr["redop"] = r.row.op;
    jr["root"] = r.row.root;
    jr["algo"] = r.algoChosen;
    jr["out_of_place"] = measurementJson(r.row.outOfPlace);
    jr["in_place"] = measurementJson(r.row.inPlace);
    if (r.row.baseline && r.row.baseline->available) {
      const Baseline& b = *r.row.baseline;
      jr["baseline"] = {
          {"name", "mpi"},
          {"time_us", b.timeUs},
          {"busbw", b.busBw},
          {"ratio", r.row.outOfPlace.timeUs > 0 ? b.timeUs / r.row.outOfPlace.timeUs : 0.0}};
    } else {
      jr["baseline"] = nullptr;
    }
    jr["placement_ns"] = {{"before", ns(r.placementBeforeNs)},
                          {"after", ns(r.placementAfterNs)},
                          {"class", placementClass(r.placementBeforeNs)}};
    jrows.push_back(std::move(jr));
  }
  doc["rows"] = std::move(jrows);
  doc["wrong_total"] = wrongTotal;
  doc["avg_busbw"] = avgBusBw;
  return doc;
}

void writeReport(const std::string& path, const nlohmann::json& doc) {
  std::ofstream out(path);
  if (!out) failErrno(fmt::format("bench: cannot open JSON output file '{}'", path), errno);
  out << doc.dump(2) << "\n";
  out.close();
  if (!out) failErrno(fmt::format("bench: cannot write JSON output file '{}'", path), errno);
}

std::string utcNow() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace braid::bench
