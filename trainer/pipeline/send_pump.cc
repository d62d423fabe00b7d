#include "trainer/pipeline/send_pump.h"

#include <chrono>

#include "common/error.h"

namespace braid::trainer {

SendPump::SendPump(double timeoutSeconds)
    : timeoutSeconds_(timeoutSeconds), thread_([this] { loop(); }) {}

SendPump::~SendPump() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void SendPump::push(Request request, std::string context) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back({std::move(request), std::move(context)});
  }
  cv_.notify_all();
}

double SendPump::drain() {
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [this] { return queue_.empty() && inFlight_ == 0; });
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void SendPump::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    Item item = std::move(queue_.front());
    queue_.pop_front();
    ++inFlight_;
    lock.unlock();
    std::exception_ptr failure;
    try {
      item.request.wait(Deadline::after(timeoutSeconds_));
    } catch (const Error& e) {
      failure = std::make_exception_ptr(Error(e.code(), item.context + ": " + e.what()));
    }
    lock.lock();
    if (failure && !error_) error_ = failure;
    --inFlight_;
    cv_.notify_all();
  }
}

}  // namespace braid::trainer
