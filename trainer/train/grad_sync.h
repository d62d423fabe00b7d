// Bucketed gradient all-reduce overlapped with backward, and per-bucket optimizer steps.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "braid/braid.hpp"
#include "trainer/nn/optimizer.h"
#include "trainer/train/loss_scaler.h"
#include "trainer/train/seconds.h"
#include "trainer/train/step_times.h"

namespace braid::trainer {

/// One contiguous slice [begin, end) of the flat gradient buffer, all-reduced as one message.
struct Bucket {
  size_t begin = 0;
  size_t end = 0;
};

/// Splits [0, numParams) into buckets of at most `bucketElems` elements, from the end of the
/// buffer towards its start (the order backward produces gradients): bucket 0 ends at numParams.
/// Buckets hold whole parameters (`paramOffsets`: each parameter's first element, ascending,
/// the first 0): a bucket is closed before a parameter that would overflow it, and a parameter
/// larger than `bucketElems` is cut into bucket-sized pieces of its own. So a bucket is complete
/// as soon as backward has passed its lowest parameter, and the all-reduce of the last layers
/// overlaps the backward of the first.
std::vector<Bucket> makeBuckets(const std::vector<size_t>& paramOffsets, size_t numParams,
                                size_t bucketElems);
/// The same with the whole buffer as one parameter: plain slices of `bucketElems`.
std::vector<Bucket> makeBuckets(size_t numParams, size_t bucketElems);

/// Drives one step's gradient synchronisation, DDP-style. arm() before the backward of the last
/// micro-batch; onGradReady() (from Sequential's grad-ready hook) starts every bucket whose
/// gradients are final with allReduceAsync(avg), in bucket order (identical on every rank);
/// finishBackward() starts whatever is left; stepAndWait() waits per bucket and applies the
/// optimizer to that bucket's range, then finishes the optimizer step. Not thread-safe.
class GradSync {
 public:
  /// `grads` is the flat gradient buffer of `numParams` floats (stays valid for the lifetime);
  /// `paramOffsets` and `bucketElems` as for makeBuckets().
  GradSync(Communicator& comm, float* grads, const std::vector<size_t>& paramOffsets,
           size_t numParams, size_t bucketElems);

  /// Lets the next onGradReady()/finishBackward() calls start all-reduces (one step's worth).
  void arm();
  /// True between arm() and stepAndWait().
  bool armed() const { return armed_; }
  /// Gradients at offsets >= readyFrom are final: start the buckets they complete.
  void onGradReady(size_t readyFrom);
  /// Backward is over: start every bucket not yet started.
  void finishBackward();
  /// Waits for each bucket in order and steps the optimizer on it; ends the optimizer step.
  /// Returns the seconds spent blocked in Request::wait.
  double stepAndWait(Optimizer& opt, float* params);

  const std::vector<Bucket>& buckets() const { return buckets_; }

  /// The performance monitor's view of the step since the last arm(): waitSeconds (blocked in
  /// Request::wait, and fp16's overflow agreement), computeSeconds (the optimizer's, on this
  /// thread), overlapSeconds (compute while a bucket of the step was in flight: from the first
  /// bucket started before backward reached the first parameter to the end of backward, plus
  /// each bucket's optimizer step while later buckets were still unwaited) and allReduceBytes
  /// (every bucket's elements x 4, or x 2 in fp16). The caller adds forward/backward time, the
  /// step's wall time and its samples.
  const StepTimes& stepTimes() const { return times_; }

  /// Switches to fp16 communication: each bucket's gradients are converted to float16 into a
  /// per-bucket half buffer when the bucket starts, all-reduced as DataType::kFloat16 with
  /// RedOp::kAvg (half the bytes), and converted back by stepAndWaitScaled(). Call before arm().
  void setHalfPrecision(bool on);
  bool halfPrecision() const { return half_; }

  /// What one fp16 step did.
  struct ScaledStep {
    double waitSeconds = 0;  ///< seconds blocked in Request::wait
    bool skipped = false;    ///< some rank saw inf/NaN: no rank stepped
  };
  /// The fp16 counterpart of stepAndWait(): waits for every bucket, converts it back to float32
  /// divided by scaler.scale(), and checks it for inf/NaN. The ranks agree on a skip with one
  /// allReduce(kMax) of an int flag; then either every rank steps the optimizer on every bucket
  /// or none does (parameters and optimizer state untouched). Updates `scaler` either way.
  /// Needs setHalfPrecision(true).
  ScaledStep stepAndWaitScaled(Optimizer& opt, float* params, LossScaler& scaler);

 private:
  Communicator& comm_;
  float* grads_;
  std::vector<Bucket> buckets_;
  std::vector<Request> requests_;
  size_t started_ = 0;  // buckets [0, started_) have been started this step
  bool armed_ = false;
  bool half_ = false;
  std::vector<uint16_t> halfGrads_;  // fp16 mode: bucket b at [b.begin, b.end), like grads_
  double timeoutSeconds_;
  StepTimes times_;
  bool overlapping_ = false;  // a bucket started while backward had parameters left
  Clock::time_point overlapFrom_;
};

}  // namespace braid::trainer
