#include "trainer/train/scaling_log.h"

#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace braid::trainer {

namespace {

nlohmann::json shareJson(double share) {
  return share < 0 ? nlohmann::json(nullptr) : nlohmann::json(share);
}

std::string shareCell(double share) { return share < 0 ? "" : fmt::format("{:.6f}", share); }

}  // namespace

std::string scalingLogText(const std::vector<ScalingRow>& rows, bool json) {
  const std::vector<ScalingFigures> figures = scalingFigures(rows);
  if (json) {
    nlohmann::json doc = {{"scaling", nlohmann::json::array()}};
    for (size_t i = 0; i < rows.size(); ++i) {
      doc["scaling"].push_back({{"ranks", rows[i].ranks},
                                {"samples_per_s", rows[i].samplesPerSec},
                                {"speedup", figures[i].speedup},
                                {"efficiency", figures[i].efficiency},
                                {"comm_share", shareJson(rows[i].commShare)},
                                {"overlap_share", shareJson(rows[i].overlapShare)}});
    }
    return doc.dump(2) + "\n";
  }
  std::string out = "ranks,samples_per_s,speedup,efficiency,comm_share,overlap_share\n";
  for (size_t i = 0; i < rows.size(); ++i) {
    out += fmt::format("{},{:.1f},{:.6f},{:.6f},{},{}\n", rows[i].ranks, rows[i].samplesPerSec,
                       figures[i].speedup, figures[i].efficiency, shareCell(rows[i].commShare),
                       shareCell(rows[i].overlapShare));
  }
  return out;
}

void writeScalingLog(const std::string& path, const std::vector<ScalingRow>& rows) {
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  std::ofstream out(path, std::ios::trunc);
  out << scalingLogText(rows, json);
  out.flush();
  BRAID_ENFORCE(out.good(), ErrorCode::kSystemError, "cannot write the scaling log '{}'", path);
}

}  // namespace braid::trainer
