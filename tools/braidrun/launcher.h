// Starts the ranks, relays their output, and decides braidrun's exit code.
#pragma once

#include "tools/braidrun/options.h"

namespace braid::braidrun {

/// Runs options.ranks copies of options.command to completion and returns braidrun's exit code:
/// 0 when every rank exited 0; else the first failing rank's code (128+signal for a signal),
/// after stopping the other ranks (SIGTERM, SIGKILL after the grace period); 127 when the
/// command cannot be executed (126 when it is not executable). Forwards SIGINT/SIGTERM/SIGHUP to
/// the ranks (a second one sends SIGKILL). Throws braid::Error on a system failure.
int launch(const LaunchOptions& options);

}  // namespace braid::braidrun
