// The stuck-rank report's reach across hosts. A status board (status_board.h) is shared by one
// host's ranks only; so every process whose communicator spans hosts runs one small TCP server (a
// thread, a listening socket on the address other hosts reach it at, a port the kernel picks,
// published in the store at init) that answers "job J's lines of host H" from the board of a live
// communicator of that job on that host. A rank writing a report asks, for each other host, that
// host's ranks in order until one answers (each bounded by a short deadline): a frozen or dead
// process costs only its deadline, and a host none of whose ranks answers is named as such. The
// server reads shared memory and writes a socket; it never touches a communicator's transports,
// so it answers while the ranks it speaks for are stuck, or stopped (another process of the host
// answers for them).
//
// Who may ask: the server sends a fresh nonce, the client answers with secretProof(job secret,
// job id + nonce); lines go only to a client that holds the job secret. One client at a time,
// each bounded by 2 s; requests and answers are bounded in size. Internal to comm/.
#pragma once

#include <string>
#include <vector>

#include "braid/deadline.hpp"
#include "comm/detail/status_board.h"

namespace braid::comm {

/// Starts this process's server on IPv4 address `ip` (once per address; later calls return the
/// same). Returns "ip:port", or "" with *why when it could not listen.
std::string startStatusServer(const std::string& ip, std::string* why);

/// Asks the server at `address` ("ip:port") for job `jobId`'s lines of host `host`, by
/// `deadline`. False with *why when it could not (no answer, refused, no such job there).
bool askStatus(const std::string& address, const std::string& jobId, const std::string& host,
               const std::string& secret, Deadline deadline, std::vector<StatusLine>* lines,
               std::string* why);

}  // namespace braid::comm
