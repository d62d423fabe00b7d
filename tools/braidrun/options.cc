#include "tools/braidrun/options.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace braid::braidrun {
namespace {

int parseInt(const std::string& flag, const std::string& text, int low, int high) {
  errno = 0;
  char* end = nullptr;
  long value = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || errno != 0 || *end != '\0' || value < low || value > high) {
    throw UsageError(flag + " needs an integer in " + std::to_string(low) + ".." +
                     std::to_string(high) + ", got '" + text + "'");
  }
  return static_cast<int>(value);
}

double parsePositive(const std::string& flag, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || errno != 0 || *end != '\0' || !(value > 0) || !std::isfinite(value)) {
    throw UsageError(flag + " needs a positive number of seconds, got '" + text + "'");
  }
  return value;
}

}  // namespace

std::string usageText() {
  return "usage: braidrun -n N [--timeout S] [--no-prefix] [--port P] [--host-addr A] "
         "[--grace S] [--settle S] [--bind-to core|none] COMMAND [ARGS...]\n"
         "Starts N local ranks of COMMAND with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE,\n"
         "GROUP_RANK, MASTER_ADDR, MASTER_PORT and a fresh BRAID_SECRET set.\n"
         "  -n, --np N       number of ranks (>= 1)\n"
         "  --timeout S      set BRAID_TIMEOUT=S for the ranks (seconds)\n"
         "  --no-prefix      let ranks write to this terminal directly (no \"[rank] \" prefix)\n"
         "  --port P         MASTER_PORT (default: a free port)\n"
         "  --host-addr A    MASTER_ADDR (default 127.0.0.1)\n"
         "  --grace S        seconds between SIGTERM and SIGKILL when stopping ranks (3)\n"
         "  --settle S       after a rank fails, seconds the others get to end by themselves\n"
         "                   (and write BRAID_DUMP_DIR dumps) before SIGTERM (1; 0: at once;\n"
         "                   never: they are not stopped, e.g. braid-train --strategy ps\n"
         "                   --mode async, whose job goes on without a dead worker)\n"
         "  --bind-to B      core: pin rank i to the i-th usable CPU; none: no pinning\n"
         "                   (default: core when N <= usable CPUs, else none, like mpirun)\n"
         "If a rank fails, the others are stopped (not with --settle never) and braidrun\n"
         "exits with its code (128+signal when it was killed by a signal).\n";
}

LaunchOptions parseArguments(int argc, const char* const* argv) {
  LaunchOptions options;
  bool sawRanks = false;
  int i = 1;
  // The value of an option: "--flag=value", "-nVALUE" or the next word.
  auto valueOf = [&](const std::string& arg, const std::string& flag) -> std::string {
    if (arg.size() > flag.size()) {
      size_t skip = arg[flag.size()] == '=' ? flag.size() + 1 : flag.size();
      return arg.substr(skip);
    }
    if (i + 1 >= argc) throw UsageError(flag + " needs a value");
    return argv[++i];
  };
  auto matches = [](const std::string& arg, const std::string& flag, bool shortForm) {
    if (arg == flag) return true;
    if (arg.rfind(flag + "=", 0) == 0) return true;
    return shortForm && arg.rfind(flag, 0) == 0 && arg.size() > flag.size();
  };
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;
    if (arg == "-h" || arg == "--help") {
      options.help = true;
      return options;
    } else if (matches(arg, "--np", false)) {
      options.ranks = parseInt("-n", valueOf(arg, "--np"), 1, 4096);
      sawRanks = true;
    } else if (matches(arg, "-n", true)) {
      options.ranks = parseInt("-n", valueOf(arg, "-n"), 1, 4096);
      sawRanks = true;
    } else if (matches(arg, "--timeout", false)) {
      std::string text = valueOf(arg, "--timeout");
      parsePositive("--timeout", text);
      options.timeout = text;
    } else if (arg == "--no-prefix") {
      options.prefix = false;
    } else if (matches(arg, "--port", false)) {
      options.port = parseInt("--port", valueOf(arg, "--port"), 1, 65535);
    } else if (matches(arg, "--host-addr", false)) {
      options.hostAddr = valueOf(arg, "--host-addr");
      if (options.hostAddr.empty()) throw UsageError("--host-addr needs a non-empty address");
    } else if (matches(arg, "--grace", false)) {
      options.graceSeconds = parsePositive("--grace", valueOf(arg, "--grace"));
    } else if (matches(arg, "--settle", false)) {
      const std::string text = valueOf(arg, "--settle");
      options.settleSeconds = text == "never" ? kSettleNever
                              : text == "0"   ? 0.0
                                              : parsePositive("--settle", text);
    } else if (matches(arg, "--bind-to", false)) {
      std::string how = valueOf(arg, "--bind-to");
      if (how != "core" && how != "none") {
        throw UsageError("--bind-to must be core or none, not '" + how + "'");
      }
      options.bindToCore = how == "core";
    } else {
      throw UsageError("unknown option '" + arg + "'");
    }
  }
  if (!sawRanks) throw UsageError("missing -n N (the number of ranks)");
  for (; i < argc; ++i) options.command.push_back(argv[i]);
  if (options.command.empty()) throw UsageError("missing the command to run");
  return options;
}

}  // namespace braid::braidrun
