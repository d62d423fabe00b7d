#include "trainer/train/grad_sync.h"

#include <algorithm>
#include <cmath>

#include "braid/deadline.hpp"
#include "common/error.h"
#include "kernels/convert.h"

namespace braid::trainer {

std::vector<Bucket> makeBuckets(const std::vector<size_t>& paramOffsets, size_t numParams,
                                size_t bucketElems) {
  BRAID_ENFORCE(bucketElems > 0, ErrorCode::kInvalidUsage, "gradient bucket of 0 elements");
  BRAID_ENFORCE(!paramOffsets.empty() && paramOffsets.front() == 0 &&
                    std::is_sorted(paramOffsets.begin(), paramOffsets.end()) &&
                    paramOffsets.back() < numParams,
                ErrorCode::kInvalidUsage,
                "gradient buckets: parameter offsets must ascend from 0 below {} ({} given)",
                numParams, paramOffsets.size());
  std::vector<Bucket> out;
  size_t end = numParams;    // end of the bucket being filled
  size_t begin = numParams;  // its begin so far (== end: empty)
  for (size_t i = paramOffsets.size(); i-- > 0;) {
    const size_t pBegin = paramOffsets[i];
    const size_t pEnd = i + 1 < paramOffsets.size() ? paramOffsets[i + 1] : numParams;
    const size_t size = pEnd - pBegin;
    if (begin < end && (end - begin) + size > bucketElems) {
      out.push_back({begin, end});
      end = begin;
    }
    if (size > bucketElems) {
      for (size_t hi = pEnd; hi > pBegin;) {
        const size_t lo = hi - pBegin > bucketElems ? hi - bucketElems : pBegin;
        out.push_back({lo, hi});
        hi = lo;
      }
      end = begin = pBegin;
    } else {
      begin = pBegin;
    }
  }
  if (begin < end) out.push_back({begin, end});
  return out;
}

std::vector<Bucket> makeBuckets(size_t numParams, size_t bucketElems) {
  if (numParams == 0) return {};
  return makeBuckets(std::vector<size_t>{0}, numParams, bucketElems);
}

GradSync::GradSync(Communicator& comm, float* grads, const std::vector<size_t>& paramOffsets,
                   size_t numParams, size_t bucketElems)
    : comm_(comm),
      grads_(grads),
      buckets_(makeBuckets(paramOffsets, numParams, bucketElems)),
      timeoutSeconds_(defaultTimeoutSeconds()) {
  requests_.resize(buckets_.size());
}

void GradSync::arm() {
  armed_ = true;
  started_ = 0;
  times_ = StepTimes{};
  overlapping_ = false;
}

void GradSync::onGradReady(size_t readyFrom) {
  if (!armed_) return;  // an accumulation micro-batch: no sync yet
  while (started_ < buckets_.size() && buckets_[started_].begin >= readyFrom) {
    const Bucket& b = buckets_[started_];
    // readyFrom > 0: backward still has the parameters below it to compute, with this in flight.
    if (!overlapping_ && readyFrom > 0) {
      overlapping_ = true;
      overlapFrom_ = Clock::now();
    }
    times_.allReduceBytes +=
        static_cast<int64_t>((b.end - b.begin) * (half_ ? sizeof(uint16_t) : sizeof(float)));
    if (half_) {
      uint16_t* h = halfGrads_.data() + b.begin;
      kernels::detail::floatToHalfN(h, grads_ + b.begin, b.end - b.begin);
      requests_[started_] =
          comm_.allReduceAsync(h, h, b.end - b.begin, DataType::kFloat16, RedOp::kAvg);
      ++started_;
      continue;
    }
    requests_[started_] = comm_.allReduceAsync(grads_ + b.begin, grads_ + b.begin, b.end - b.begin,
                                               DataType::kFloat32, RedOp::kAvg);
    ++started_;
  }
}

void GradSync::finishBackward() {
  onGradReady(0);
  if (overlapping_) {
    times_.overlapSeconds += secondsSince(overlapFrom_);
    overlapping_ = false;
  }
}

double GradSync::stepAndWait(Optimizer& opt, float* params) {
  BRAID_ENFORCE(armed_ && started_ == buckets_.size(), ErrorCode::kInvalidUsage,
                "gradient sync: stepAndWait before all {} buckets were started ({} started)",
                buckets_.size(), started_);
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const auto t0 = Clock::now();
    // The collective itself is bounded by the communicator timeout; this bounds the wait too.
    requests_[i].wait(Deadline::after(2 * timeoutSeconds_));
    times_.waitSeconds += secondsSince(t0);
    const auto t1 = Clock::now();
    opt.stepRange(params, grads_, buckets_[i].begin, buckets_[i].end);
    const double stepped = secondsSince(t1);
    times_.computeSeconds += stepped;
    if (i + 1 < buckets_.size()) times_.overlapSeconds += stepped;  // later buckets in flight
  }
  const auto t2 = Clock::now();
  opt.finishStep();
  times_.computeSeconds += secondsSince(t2);
  armed_ = false;
  return times_.waitSeconds;
}

void GradSync::setHalfPrecision(bool on) {
  BRAID_ENFORCE(!armed_, ErrorCode::kInvalidUsage,
                "gradient sync: precision changed in the middle of a step");
  half_ = on;
  const size_t n = buckets_.empty() ? 0 : buckets_.front().end;
  halfGrads_.assign(on ? n : 0, 0);
}

GradSync::ScaledStep GradSync::stepAndWaitScaled(Optimizer& opt, float* params,
                                                 LossScaler& scaler) {
  BRAID_ENFORCE(half_, ErrorCode::kInvalidUsage,
                "gradient sync: stepAndWaitScaled needs setHalfPrecision(true)");
  BRAID_ENFORCE(armed_ && started_ == buckets_.size(), ErrorCode::kInvalidUsage,
                "gradient sync: stepAndWaitScaled before all {} buckets were started ({} started)",
                buckets_.size(), started_);
  ScaledStep result;
  const float scale = scaler.scale();
  int32_t overflow = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    const Bucket& b = buckets_[i];
    const auto t0 = Clock::now();
    requests_[i].wait(Deadline::after(2 * timeoutSeconds_));
    result.waitSeconds += secondsSince(t0);
    float* g = grads_ + b.begin;
    kernels::detail::halfToFloatN(g, halfGrads_.data() + b.begin, b.end - b.begin);
    for (size_t k = 0; k < b.end - b.begin; ++k) {
      g[k] /= scale;
      if (!std::isfinite(g[k])) overflow = 1;
    }
  }
  armed_ = false;
  // Every rank sees the same averaged half values, but a skip must never depend on that: one
  // int per step makes the decision explicitly collective.
  const auto t0 = Clock::now();
  comm_.allReduce(&overflow, &overflow, 1, DataType::kInt32, RedOp::kMax);
  result.waitSeconds += secondsSince(t0);
  times_.waitSeconds = result.waitSeconds;
  times_.allReduceBytes += sizeof(int32_t);
  result.skipped = overflow != 0;
  if (!result.skipped) {
    const auto t1 = Clock::now();
    for (const Bucket& b : buckets_) opt.stepRange(params, grads_, b.begin, b.end);
    opt.finishStep();
    times_.computeSeconds += secondsSince(t1);
  }
  scaler.update(result.skipped);
  return result;
}

}  // namespace braid::trainer
