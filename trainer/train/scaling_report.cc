#include "trainer/train/scaling_report.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "trainer/train/scaling_log.h"

extern char** environ;

namespace braid::trainer {
namespace {

namespace fs = std::filesystem;

/// Flags the report sets for its runs (or that are its own), each taking a value but --quiet.
bool reportOwnsFlag(const std::string& name) {
  return name == "--report" || name == "--report-ranks" || name == "--braidrun" ||
         name == "--log" || name == "--log-steps";
}

/// argv[1..] without the report's own flags (as "--flag value" or "--flag=value") and --quiet.
std::vector<std::string> trainingArgs(int argc, const char* const* argv) {
  std::vector<std::string> out;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string name = arg.substr(0, arg.find('='));
    if (arg == "--quiet") continue;
    if (reportOwnsFlag(name)) {
      if (name == arg) ++i;  // its value is the next argument
      continue;
    }
    out.push_back(arg);
  }
  return out;
}

std::string readFile(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

/// The last `lines` lines of `text`.
std::string tail(const std::string& text, int lines) {
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (int n = 0; n < lines && pos > 0; ++n) {
    pos = text.rfind('\n', pos - 1);
    if (pos == std::string::npos) return text;
  }
  return text.substr(pos + 1);
}

/// The launcher: --braidrun, or braidrun beside this binary, or in ../tools/ (the build tree).
fs::path findBraidrun(const std::string& flag, const fs::path& self) {
  if (!flag.empty()) {
    BRAID_ENFORCE(::access(flag.c_str(), X_OK) == 0, ErrorCode::kInvalidUsage,
                  "--braidrun '{}' is not an executable file", flag);
    return flag;
  }
  const fs::path dir = self.parent_path();
  for (const fs::path& p : {dir / "braidrun", dir / ".." / "tools" / "braidrun"}) {
    if (::access(p.c_str(), X_OK) == 0) return p.lexically_normal();
  }
  throw Error(
      ErrorCode::kInvalidUsage,
      fmt::format("--report scaling needs braidrun: not found as {} or {}; name it with "
                  "--braidrun PATH",
                  (dir / "braidrun").string(), (dir / ".." / "tools" / "braidrun").string()));
}

/// Runs `args` with stdout and stderr going to the two files; the exit status as waitpid gives.
int runToFiles(const std::vector<std::string>& args, const fs::path& outFile,
               const fs::path& errFile) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, outFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, errFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<char*> cargs;
  for (const std::string& a : args) cargs.push_back(const_cast<char*>(a.c_str()));
  cargs.push_back(nullptr);
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, cargs[0], &actions, nullptr, cargs.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  BRAID_ENFORCE(rc == 0, ErrorCode::kSystemError, "cannot start '{}': {}", args[0],
                std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    BRAID_ENFORCE(errno == EINTR, ErrorCode::kSystemError, "waitpid: {}", std::strerror(errno));
  }
  return status;
}

std::string describeStatus(int status) {
  if (WIFEXITED(status)) return fmt::format("exit status {}", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return fmt::format("killed by signal {}", WTERMSIG(status));
  return fmt::format("wait status {}", status);
}

/// A private scratch directory, removed with the object.
struct ScratchDir {
  fs::path path;
  ScratchDir() {
    std::string pattern = (fs::temp_directory_path() / "braid-scaling-XXXXXX").string();
    BRAID_ENFORCE(::mkdtemp(pattern.data()) != nullptr, ErrorCode::kSystemError,
                  "cannot create a directory like '{}': {}", pattern, std::strerror(errno));
    path = pattern;
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
};

}  // namespace

ScalingRow scalingRowFromLog(const std::string& jsonText, int ranks, const std::string& logName) {
  const nlohmann::json doc = nlohmann::json::parse(jsonText, nullptr, /*allow_exceptions=*/false);
  BRAID_ENFORCE(doc.is_object() && doc.contains("epochs") && doc["epochs"].is_array() &&
                    !doc["epochs"].empty(),
                ErrorCode::kInvalidUsage, "the log '{}' of the {}-rank run holds no epoch", logName,
                ranks);
  double samples = 0, seconds = 0, stepSeconds = 0, wait = 0, overlap = 0;
  bool timed = true;
  for (const nlohmann::json& e : doc["epochs"]) {
    BRAID_ENFORCE(e.value("samples_per_s", nlohmann::json()).is_number() &&
                      e.value("seconds", nlohmann::json()).is_number(),
                  ErrorCode::kInvalidUsage,
                  "the log '{}' of the {}-rank run has an epoch without samples_per_s or seconds",
                  logName, ranks);
    samples += e["samples_per_s"].get<double>() * e["seconds"].get<double>();
    seconds += e["seconds"].get<double>();
    if (!e.value("step_seconds", nlohmann::json()).is_number()) {
      timed = false;
      continue;
    }
    stepSeconds += e["step_seconds"].get<double>();
    wait += e["comm_wait_seconds"].get<double>();
    overlap += e["overlap_seconds"].get<double>();
  }
  ScalingRow row;
  row.ranks = ranks;
  row.samplesPerSec = seconds > 0 ? samples / seconds : 0.0;
  if (timed && stepSeconds > 0) {
    row.commShare = wait / stepSeconds;
    row.overlapShare = overlap / stepSeconds;
  }
  return row;
}

std::vector<ScalingFigures> scalingFigures(const std::vector<ScalingRow>& rows) {
  std::vector<ScalingFigures> out;
  for (const ScalingRow& r : rows) {
    const ScalingRow& base = rows.front();
    ScalingFigures f;
    f.speedup = base.samplesPerSec > 0 ? r.samplesPerSec / base.samplesPerSec : 0.0;
    f.efficiency = f.speedup * base.ranks / r.ranks;
    out.push_back(f);
  }
  return out;
}

std::string formatScalingTable(const std::vector<ScalingRow>& rows) {
  std::string out =
      fmt::format("{:>5}  {:>10}  {:>8}  {:>10}  {:>10}  {:>13}\n", "ranks", "samples/s", "speedup",
                  "efficiency", "comm share", "overlap share");
  const auto percent = [](double share) {
    return share < 0 ? std::string("-") : fmt::format("{:.1f}%", 100 * share);
  };
  const std::vector<ScalingFigures> figures = scalingFigures(rows);
  for (size_t i = 0; i < rows.size(); ++i) {
    const ScalingRow& r = rows[i];
    out += fmt::format("{:>5}  {:>10.0f}  {:>7.2f}x  {:>10}  {:>10}  {:>13}\n", r.ranks,
                       r.samplesPerSec, figures[i].speedup, percent(figures[i].efficiency),
                       percent(r.commShare), percent(r.overlapShare));
  }
  return out;
}

void runScalingReport(int argc, const char* const* argv, const TrainOptions& o, std::FILE* out) {
  for (int n : o.reportRanks) {
    try {
      validateForWorld(o, n);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("--report scaling on {} rank(s): {}", n, e.what()));
    }
  }
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  BRAID_ENFORCE(!ec, ErrorCode::kSystemError, "cannot find braid-train's own path: {}",
                ec.message());
  const fs::path braidrun = findBraidrun(o.braidrun, self);
  const std::vector<std::string> training = trainingArgs(argc, argv);
  if (!o.logPath.empty()) writeScalingLog(o.logPath, {});  // unwritable: fail before the runs
  ScratchDir scratch;
  std::vector<ScalingRow> rows;
  for (int n : o.reportRanks) {
    const fs::path log = scratch.path / fmt::format("ranks{}.json", n);
    std::vector<std::string> args = {braidrun.string(), "-n", std::to_string(n), self.string()};
    args.insert(args.end(), training.begin(), training.end());
    args.insert(args.end(), {"--quiet", "--log", log.string()});
    if (out) {
      fmt::print(out, "braid-train: --report scaling: {} rank(s)...\n", n);
      std::fflush(out);
    }
    const fs::path err = scratch.path / fmt::format("ranks{}.err", n);
    const int status = runToFiles(args, scratch.path / fmt::format("ranks{}.out", n), err);
    BRAID_ENFORCE(WIFEXITED(status) && WEXITSTATUS(status) == 0, ErrorCode::kRemoteError,
                  "--report scaling: the {}-rank run failed ({}); the end of its stderr:\n{}", n,
                  describeStatus(status), tail(readFile(err), 15));
    rows.push_back(scalingRowFromLog(readFile(log), n, log.string()));
  }
  if (out) {
    fmt::print(out, "{}", formatScalingTable(rows));
    std::fflush(out);
  }
  if (!o.logPath.empty()) writeScalingLog(o.logPath, rows);
}

}  // namespace braid::trainer
