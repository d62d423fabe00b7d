// Drives a stage's non-blocking sends to completion on a thread of its own.
//
// Why: braid runs queued point-to-point ops on a thread that waits for one (or on its progress
// thread, which runs at SCHED_IDLE and so gets no core while every core computes). A stage that
// posts its activation and goes on computing the next micro-batch would leave the send unstarted
// until its next wait, and the next stage idle meanwhile. The pump waits on each send as soon as
// it is posted, so the transfer moves while the caller computes (the wait sleeps on braid's
// doorbell when the receiver is not ready).
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <string>
#include <thread>

#include "braid/braid.hpp"

namespace braid::trainer {

class SendPump {
 public:
  /// Each wait has a deadline of `timeoutSeconds` from when the pump starts it.
  explicit SendPump(double timeoutSeconds);
  /// Stops the thread; sends still queued are left to their Request destructors.
  ~SendPump();
  SendPump(const SendPump&) = delete;
  SendPump& operator=(const SendPump&) = delete;

  /// Hands over a posted send; `context` names it in an error ("rank 1 sending ... to rank 2").
  void push(Request request, std::string context);
  /// Blocks until every pushed send has completed (bounded: each has its deadline). Rethrows the
  /// first failure as braid::Error with its context. Returns the seconds it blocked.
  double drain();

 private:
  void loop();

  struct Item {
    Request request;
    std::string context;
  };
  double timeoutSeconds_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  size_t inFlight_ = 0;  // items taken by the thread and not yet finished
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace braid::trainer
