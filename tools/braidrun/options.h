// braidrun's command line.
#pragma once

#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace braid::braidrun {

/// --settle never.
inline constexpr double kSettleNever = std::numeric_limits<double>::infinity();

/// What to launch and how.
struct LaunchOptions {
  int ranks = 0;                       ///< -n: local ranks to start
  std::optional<std::string> timeout;  ///< --timeout: passed on as BRAID_TIMEOUT (seconds)
  bool prefix = true;                  ///< false with --no-prefix: ranks inherit stdio
  int port = 0;                        ///< --port: MASTER_PORT; 0 = pick a free one
  std::string hostAddr = "127.0.0.1";  ///< --host-addr: MASTER_ADDR
  double graceSeconds = 3;             ///< --grace: SIGTERM to SIGKILL when stopping ranks
  /// --settle: after a rank fails, seconds the others get to end on their own (braid tells them
  /// at once; they fail and write their flight-recorder dumps) before they are sent SIGTERM;
  /// kSettleNever (--settle never): they are not stopped, the job ends when they do.
  double settleSeconds = 1;
  /// --bind-to core|none: pin rank i to the i-th CPU braidrun may use. Unset: core when the
  /// ranks fit the CPUs (as mpirun does), none when they outnumber them.
  std::optional<bool> bindToCore;
  std::vector<std::string> command;  ///< COMMAND ARGS...
  bool help = false;                 ///< -h/--help was given
};

/// A command line braidrun cannot run; main prints the message and the usage, and exits 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Parses argv (argv[0] is skipped). Options stop at the first word that is not an option (or
/// after "--"); everything from there on is the command. Throws UsageError.
LaunchOptions parseArguments(int argc, const char* const* argv);

/// The usage text, ending in a newline.
std::string usageText();

}  // namespace braid::braidrun
