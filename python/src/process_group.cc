#include "process_group.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <thread>

#include "c10d_store.h"
#include "comm/bootstrap/secret.h"
#include "common/env.h"
#include "cuda_path.h"
#include "staging.h"
#include "types.h"
#include "watcher.h"

namespace braid::pytorch {
namespace {

using ::c10d::OpType;

// Creates the communicator with a job secret shared through PyTorch's store (which is what the
// ranks already trust), unless the launcher set BRAID_SECRET for the whole job.
Communicator connect(const std::shared_ptr<C10dStore>& store, int rank, int size,
                     braid::Options options) {
  options.advertiseAddress = hostAddress();  // peers on other hosts reach this rank here
  if (!envString("BRAID_SECRET")) {
    if (rank == 0) {
      options.secret = bootstrap::randomSecret();
      store->set("braid/secret", options.secret);
    } else {
      options.secret = store->get("braid/secret", Deadline::after(options.timeoutSeconds));
    }
  }
  return Communicator::fromStore(store, rank, size, options);
}

// How much longer than rank 0 the other ranks wait in monitored_barrier.
constexpr double kMonitorGraceSeconds = 5;

size_t count(const at::Tensor& tensor) { return static_cast<size_t>(tensor.numel()); }

// Runs a braid submission, turning its error (bad arguments, a broken communicator) into a
// Python RuntimeError naming the op.
template <typename Submit>
Request submit(const char* opName, Submit&& fn) {
  try {
    return fn();
  } catch (const Error& e) {
    TORCH_CHECK(false, "braid ", opName, " failed: ", e.what());
  }
}

const at::Tensor& single(const std::vector<at::Tensor>& tensors, const char* opName,
                         bool cudaOk = false) {
  TORCH_CHECK(tensors.size() == 1, "braid ", opName, " takes exactly one tensor per call (got ",
              tensors.size(), ")");
  checkTensor(tensors[0], opName, cudaOk);
  return tensors[0];
}

bool onCuda(const at::Tensor& tensor) { return tensor.defined() && tensor.is_cuda(); }

// For the host path's submissions, which the checks above let CUDA tensors reach only where an
// op has no CUDA branch.
void hostOnly(const at::Tensor& tensor, const char* opName) {
  TORCH_CHECK(!onCuda(tensor), "braid ", opName, ": tensor is on ", tensor.device(), "; braid's ",
              opName, " takes CPU tensors (CUDA tensors go to ", kCudaOps,
              "): move them with .cpu()");
}


// Waits for `request` until `deadline` by polling: Request::wait(deadline) may run the op on the
// calling thread (it helps the progress thread), and then returns only when the op ends or braid's
// own timeout fires, past a shorter deadline. False: the deadline passed first (the op still
// runs). Throws the op's error.
bool finishBy(Request& request, Deadline deadline) {
  auto pause = std::chrono::microseconds(50);
  while (!request.test()) {
    if (deadline.expired()) return false;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(5000));
  }
  request.wait();
  return true;
}

// braid matches a pair's messages in posting order and checks that their tags agree (a
// difference fails both ranks naming the two tags); it does not reorder messages by tag.
void checkTag(int tag, const char* opName) {
  TORCH_CHECK(tag >= 0, "braid ", opName, ": tag ", tag, " is negative");
}

// `tensor` (`what`) is of the dtype and on the device of `like` (`likeWhat`), which was checked
// already: a CUDA `like` only in an op that takes CUDA tensors, so elsewhere a CUDA `tensor` is
// refused as a mixed device.
void checkSameKind(const at::Tensor& tensor, const at::Tensor& like, const char* opName,
                   const char* what, const char* likeWhat = "the input") {
  checkTensor(tensor, opName, /*cudaOk=*/true);
  TORCH_CHECK(tensor.scalar_type() == like.scalar_type(), "braid ", opName, ": ", what,
              " has dtype ", tensor.scalar_type(), " but ", likeWhat, " has ", like.scalar_type());
  TORCH_CHECK(tensor.device() == like.device(), "braid ", opName, ": ", what, " is on ",
              tensor.device(), " but ", likeWhat, " on ", like.device());
}

// all_to_all_single's split of `tensor` (dim 0) on rank `rank`: equal when `rows` is empty,
// else rows[q] rows of dim 0 for rank q.
Splits splitsOf(const at::Tensor& tensor, const std::vector<int64_t>& rows, int rank, int world,
                const char* opName, const char* which) {
  Splits splits;
  const size_t n = count(tensor);
  if (rows.empty()) {
    TORCH_CHECK(n % size_t(world) == 0, "braid ", opName, " (rank ", rank, "): the ", which,
                " has ", n, " elements, not a multiple of the group's ", world, " ranks");
    for (int q = 0; q < world; ++q) splits.add(n / size_t(world));
    return splits;
  }
  TORCH_CHECK(rows.size() == size_t(world), "braid ", opName, " (rank ", rank, "): ", rows.size(),
              " ", which, " split sizes for a group of ", world, " ranks");
  const int64_t dim0 = tensor.dim() == 0 ? 1 : tensor.size(0);
  const size_t perRow = dim0 == 0 ? 0 : n / size_t(dim0);
  int64_t sum = 0;
  for (int64_t r : rows) {
    TORCH_CHECK(r >= 0, "braid ", opName, " (rank ", rank, "): negative ", which, " split size ",
                r);
    sum += r;
    splits.add(size_t(r) * perRow);
  }
  TORCH_CHECK(sum == dim0, "braid ", opName, " (rank ", rank, "): the ", which,
              " split sizes add up to ", sum, " rows, the tensor has ", dim0);
  return splits;
}

// What a rank sends itself it receives from itself: the own blocks of an all-to-all's send and
// receive layouts must be the same size.
void checkOwnBlock(const Splits& send, const Splits& recv, int rank, const char* opName) {
  const size_t sent = send.counts[size_t(rank)], received = recv.counts[size_t(rank)];
  TORCH_CHECK(sent == received, "braid ", opName, " (rank ", rank, "): this rank sends itself ",
              sent, " elements (its input's block for rank ", rank, ") but receives ", received,
              " from itself (its output's block); they must be equal");
}

// The work copies `flat`'s pieces into the tensors of `list` when it completes (flat: the
// tensors end to end, as flatCat lays them out).
void copyOutFrom(BraidWork& work, const at::Tensor& flat, const std::vector<at::Tensor>& list) {
  work.keepAlive.push_back(flat);
  const std::vector<at::Tensor> views = viewsLike(flat, list);
  for (size_t i = 0; i < list.size(); ++i) work.copyOut.emplace_back(list[i], views[i]);
}

// The tensor list of gather (outputs) or scatter (inputs) on rank `rank`: the root's holds one
// tensor per rank, each like `like` in kind and size; the others' is empty (returned: nullptr).
const std::vector<at::Tensor>* rootList(const std::vector<std::vector<at::Tensor>>& lists,
                                        const at::Tensor& like, int rank, int root, int world,
                                        const char* opName, const char* which) {
  TORCH_CHECK(root >= 0 && root < world, "braid ", opName, " (rank ", rank, "): root ", root,
              " is not a rank of this group of ", world);
  if (rank != root) {
    TORCH_CHECK(lists.empty() || (lists.size() == 1 && lists[0].empty()), "braid ", opName,
                " (rank ", rank, "): only the root (rank ", root, ") takes ", which, " tensors");
    return nullptr;
  }
  TORCH_CHECK(lists.size() == 1, "braid ", opName, " (rank ", rank, ", the root) takes one ",
              which, " list (got ", lists.size(), ")");
  const auto& list = lists[0];
  TORCH_CHECK(static_cast<int>(list.size()) == world, "braid ", opName, " (rank ", rank,
              ", the root): the ", which, " list holds ", list.size(), " tensors, the group has ",
              world, " ranks");
  const std::string each = std::string("an ") + which + " tensor";
  const char* likeWhat = std::string(which) == "output" ? "the input" : "the output";
  for (const auto& t : list) {
    checkSameKind(t, like, opName, each.c_str(), likeWhat);
    TORCH_CHECK(t.numel() == like.numel(), "braid ", opName, " (rank ", rank, ", the root): ", each,
                " has ", t.numel(), " elements but ", likeWhat, " has ", like.numel());
  }
  return &list;
}

}  // namespace

BraidProcessGroup::BraidProcessGroup(const c10::intrusive_ptr<::c10d::Store>& store, int rank,
                                     int size, std::chrono::milliseconds timeout)
    : GroupBase(rank, size),
      watcher_(std::make_shared<Watcher>()),
      timeoutSeconds_(std::chrono::duration<double>(timeout).count()) {
  TORCH_CHECK(timeoutSeconds_ > 0, "braid: the process group timeout must be positive");
  braid::Options options;
  options.timeoutSeconds = timeoutSeconds_;
  try {
    comm_ = std::make_shared<Communicator>(
        connect(std::make_shared<C10dStore>(store), rank, size, options));
  } catch (const Error& e) {
    TORCH_CHECK(false, "braid: creating the process group (rank ", rank, " of ", size,
                ") failed: ", e.what());
  }
}

BraidProcessGroup::~BraidProcessGroup() {
  watcher_.reset();  // lets the works with futures finish first
}

CudaPath& BraidProcessGroup::cudaFor(const std::vector<at::Tensor>& tensors, const char* opName) {
  const at::Device device = tensors.front().device();
  for (const auto& tensor : tensors) {
    TORCH_CHECK(tensor.device() == device, "braid ", opName, ": tensors on ", device, " and ",
                tensor.device(), " in one op");
  }
  std::lock_guard<std::mutex> lock(cudaMutex_);
  if (!cuda_) cuda_ = std::make_unique<CudaPath>(*comm_, device.index(), timeoutSeconds_);
  TORCH_CHECK(cuda_->device() == device.index(), "braid ", opName,
              ": this process group runs its CUDA ops on cuda:", cuda_->device(), ", not on ",
              device, " (one device per rank, as with NCCL)");
  return *cuda_;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::cudaAllgatherBase(
    const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, OpType type,
    const char* opName) {
  std::vector<DataType> types;
  for (size_t i = 0; i < inputs.size(); ++i) {
    types.push_back(checkAllgatherBase(outputs[i], inputs[i], opName));
  }
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  return cudaFor(all, opName).allGatherBase(getRank(), type, opName, outputs, inputs, types);
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::cudaReduceScatterBase(
    const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs, RedOp op,
    OpType type, const char* opName) {
  std::vector<DataType> types;
  for (size_t i = 0; i < inputs.size(); ++i) {
    types.push_back(checkReduceScatterBase(outputs[i], inputs[i], op, opName));
  }
  std::vector<at::Tensor> all = outputs;
  all.insert(all.end(), inputs.begin(), inputs.end());
  return cudaFor(all, opName).reduceScatterBase(getRank(), type, opName, outputs, inputs, types,
                                                op);
}

c10::intrusive_ptr<GroupBase> BraidProcessGroup::create(
    const c10::intrusive_ptr<::c10d::Store>& store, int rank, int size,
    const std::chrono::duration<float>& timeout) {
  return c10::make_intrusive<BraidProcessGroup>(
      store, rank, size, std::chrono::duration_cast<std::chrono::milliseconds>(timeout));
}

c10::intrusive_ptr<BraidWork> BraidProcessGroup::makeWork(OpType type, const char* opName) {
  return c10::make_intrusive<BraidWork>(getRank(), type, opName, comm_, timeoutSeconds_, watcher_);
}

at::Tensor BraidProcessGroup::outputBuffer(BraidWork& work, const at::Tensor& tensor) {
  work.keepAlive.push_back(tensor);
  if (tensor.is_contiguous()) return tensor;
  at::Tensor staged = tensor.contiguous();
  work.keepAlive.push_back(staged);
  work.copyOut.emplace_back(tensor, staged);
  return staged;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::broadcast(
    std::vector<at::Tensor>& tensors, const ::c10d::BroadcastOptions& opts) {
  constexpr const char* kName = "broadcast";
  const at::Tensor& tensor = single(tensors, kName, true);
  const DataType type = toDataType(tensor.scalar_type(), kName);
  if (onCuda(tensor)) {
    const int root = static_cast<int>(opts.rootRank);
    return cudaFor(tensors, kName).broadcast(getRank(), tensor, type, root);
  }
  auto work = makeWork(OpType::BROADCAST, kName);
  at::Tensor buf = outputBuffer(*work, tensor);
  const int root = static_cast<int>(opts.rootRank);
  work->requests.push_back(submit(kName, [&] {
    return comm_->broadcastAsync(buf.data_ptr(), buf.data_ptr(), count(buf), type, root);
  }));
  work->outputs = {tensor};
  return work;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::allreduce(
    std::vector<at::Tensor>& tensors, const ::c10d::AllreduceOptions& opts) {
  constexpr const char* kName = "allreduce";
  const at::Tensor& tensor = single(tensors, kName, true);
  const RedOp op = toRedOp(opts.reduceOp, kName);
  const DataType type = toDataType(tensor.scalar_type(), kName, true, op);
  if (onCuda(tensor)) {
    return cudaFor(tensors, kName).allReduce(getRank(), tensor, type, op);
  }
  auto work = makeWork(OpType::ALLREDUCE, kName);
  at::Tensor buf = outputBuffer(*work, tensor);
  work->requests.push_back(submit(kName, [&] {
    return comm_->allReduceAsync(buf.data_ptr(), buf.data_ptr(), count(buf), type, op);
  }));
  work->outputs = {tensor};
  return work;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const ::c10d::AllreduceCoalescedOptions& opts) {
  constexpr const char* kName = "allreduce_coalesced";
  TORCH_CHECK(!tensors.empty(), "braid ", kName, ": no tensors");
  const RedOp op = toRedOp(opts.reduceOp, kName);
  // One flat buffer per dtype, in order of first appearance (the same on every rank when the
  // ranks pass the same list), so many small tensors cost one all-reduce each dtype.
  std::vector<at::ScalarType> order;
  std::map<at::ScalarType, std::vector<at::Tensor>> byType;
  for (const auto& tensor : tensors) {
    checkTensor(tensor, kName, true);
    toDataType(tensor.scalar_type(), kName, true, op);
    auto& list = byType[tensor.scalar_type()];
    if (list.empty()) order.push_back(tensor.scalar_type());
    list.push_back(tensor);
  }
  if (onCuda(tensors.front())) {
    // The same flat buffers, made, reduced and copied back on the current stream.
    std::vector<std::vector<at::Tensor>> groups;
    std::vector<DataType> types;
    for (at::ScalarType dtype : order) {
      groups.push_back(byType[dtype]);
      types.push_back(toDataType(dtype, kName, true, op));
    }
    return cudaFor(tensors, kName).allReduceCoalesced(getRank(), groups, types, op, tensors);
  }
  auto work = makeWork(OpType::ALLREDUCE_COALESCED, kName);
  for (at::ScalarType dtype : order) {
    const auto& list = byType[dtype];
    at::Tensor flat = flatCat(list);
    copyOutFrom(*work, flat, list);
    const DataType type = toDataType(dtype, kName, true, op);
    work->requests.push_back(submit(kName, [&] {
      return comm_->allReduceAsync(flat.data_ptr(), flat.data_ptr(), count(flat), type, op);
    }));
  }
  work->keepAlive.insert(work->keepAlive.end(), tensors.begin(), tensors.end());
  work->outputs = tensors;
  return work;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::reduce(std::vector<at::Tensor>& tensors,
                                                           const ::c10d::ReduceOptions& opts) {
  constexpr const char* kName = "reduce";
  const at::Tensor& tensor = single(tensors, kName, true);
  const RedOp op = toRedOp(opts.reduceOp, kName);
  const DataType type = toDataType(tensor.scalar_type(), kName, true, op);
  const int root = static_cast<int>(opts.rootRank);
  if (onCuda(tensor)) {
    return cudaFor(tensors, kName).reduce(getRank(), tensor, type, op, root);
  }
  auto work = makeWork(OpType::REDUCE, kName);
  at::Tensor buf = outputBuffer(*work, tensor);
  work->requests.push_back(submit(kName, [&] {
    return comm_->reduceAsync(buf.data_ptr(), buf.data_ptr(), count(buf), type, op, root);
  }));
  work->outputs = {tensor};
  return work;
}

DataType BraidProcessGroup::checkAllgather(const std::vector<at::Tensor>& list,
                                           const at::Tensor& input, const char* opName) {
  checkTensor(input, opName, true);
  TORCH_CHECK(static_cast<int>(list.size()) == getSize(), "braid ", opName,
              ": the output list holds ", list.size(), " tensors, the group has ", getSize(),
              " ranks");
  for (const auto& out : list) {
    checkSameKind(out, input, opName, "an output tensor");
    TORCH_CHECK(out.numel() == input.numel(), "braid ", opName, ": an output tensor has ",
                out.numel(), " elements, the input ", input.numel());
  }
  return toDataType(input.scalar_type(), opName);
}

DataType BraidProcessGroup::checkAllgatherBase(const at::Tensor& output, const at::Tensor& input,
                                               const char* opName) {
  checkTensor(input, opName, true);
  checkSameKind(output, input, opName, "the output");
  TORCH_CHECK(output.numel() == getSize() * input.numel(), "braid ", opName, ": the output has ",
              output.numel(), " elements, expected ", getSize(), " ranks x ", input.numel());
  return toDataType(input.scalar_type(), opName);
}

DataType BraidProcessGroup::checkReduceScatterBase(const at::Tensor& output,
                                                   const at::Tensor& input, RedOp op,
                                                   const char* opName) {
  checkTensor(output, opName, true);
  checkSameKind(input, output, opName, "the input", "the output");
  TORCH_CHECK(input.numel() == getSize() * output.numel(), "braid ", opName, ": the input has ",
              input.numel(), " elements, expected ", getSize(), " ranks x ", output.numel());
  return toDataType(output.scalar_type(), opName, true, op);
}

void BraidProcessGroup::submitAllgather(BraidWork& work, const std::vector<at::Tensor>& list,
                                        const at::Tensor& input, const char* opName) {
  const DataType type = checkAllgather(list, input, opName);
  hostOnly(input, opName);
  at::Tensor in = input.contiguous();
  at::Tensor gathered = at::empty({getSize() * input.numel()}, input.options());
  work.keepAlive.push_back(in);
  copyOutFrom(work, gathered, list);
  work.requests.push_back(submit(opName, [&] {
    return comm_->allGatherAsync(in.data_ptr(), gathered.data_ptr(), count(in), type);
  }));
}

void BraidProcessGroup::submitAllgatherBase(BraidWork& work, const at::Tensor& output,
                                            const at::Tensor& input, const char* opName) {
  const DataType type = checkAllgatherBase(output, input, opName);
  hostOnly(input, opName);
  at::Tensor in = input.contiguous();
  work.keepAlive.push_back(in);
  at::Tensor out = outputBuffer(work, output);
  work.requests.push_back(submit(opName, [&] {
    return comm_->allGatherAsync(in.data_ptr(), out.data_ptr(), count(in), type);
  }));
}

void BraidProcessGroup::submitReduceScatterBase(BraidWork& work, const at::Tensor& output,
                                                const at::Tensor& input, RedOp op,
                                                const char* opName) {
  const DataType type = checkReduceScatterBase(output, input, op, opName);
  hostOnly(input, opName);
  at::Tensor in = input.contiguous();
  work.keepAlive.push_back(in);
  at::Tensor out = outputBuffer(work, output);
  work.requests.push_back(submit(opName, [&] {
    return comm_->reduceScatterAsync(in.data_ptr(), out.data_ptr(), count(out), type, op);
  }));
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::AllgatherOptions& opts) {
  constexpr const char* kName = "allgather";
  const at::Tensor& input = single(inputs, kName);
  TORCH_CHECK(outputs.size() == 1, "braid ", kName, " takes one output list (got ", outputs.size(),
              ")");
  if (onCuda(input)) {
    const std::vector<at::Tensor>& list = outputs[0];
    const DataType type = checkAllgather(list, input, kName);
    std::vector<at::Tensor> all = list;
    all.push_back(input);
    return cudaFor(all, kName).allGather(getRank(), list, input, type, getSize());
  }
  auto work = makeWork(OpType::ALLGATHER, kName);
  submitAllgather(*work, outputs[0], input, kName);
  work->outputs = outputs[0];
  return work;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::_allgather_base(
    at::Tensor& output, at::Tensor& input, const ::c10d::AllgatherOptions& opts) {
  constexpr const char* kName = "_allgather_base";
  if (onCuda(input)) {
    return cudaAllgatherBase({output}, {input}, OpType::_ALLGATHER_BASE, kName);
  }
  auto work = makeWork(OpType::_ALLGATHER_BASE, kName);
  submitAllgatherBase(*work, output, input, kName);
  work->outputs = {output};
  return work;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::AllgatherOptions& opts) {
  // As torch.distributed.all_gather_coalesced (and Gloo): outputs[r] is rank r's list, one
  // tensor per input.
  constexpr const char* kName = "allgather_coalesced";
  TORCH_CHECK(static_cast<int>(outputs.size()) == getSize(), "braid ", kName, ": ",
              outputs.size(), " output lists for a group of ", getSize(),
              " ranks (one list per rank)");
  for (size_t r = 0; r < outputs.size(); ++r) {
    TORCH_CHECK(outputs[r].size() == inputs.size(), "braid ", kName, ": the output list of rank ",
                r, " holds ", outputs[r].size(), " tensors for ", inputs.size(), " inputs");
  }
  auto work = makeWork(OpType::ALLGATHER_COALESCED, kName);
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::vector<at::Tensor> fromEachRank;
    for (auto& list : outputs) fromEachRank.push_back(list[i]);
    submitAllgather(*work, fromEachRank, inputs[i], kName);
  }
  for (auto& list : outputs) work->outputs.insert(work->outputs.end(), list.begin(), list.end());
  return work;
}

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::AllgatherOptions& opts) {
  constexpr const char* kName = "allgather_into_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size(), "braid ", kName, ": ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  if (!inputs.empty() && onCuda(inputs.front())) {
    return cudaAllgatherBase(outputs, inputs, OpType::ALLGATHER_COALESCED, kName);
  }
  auto work = makeWork(OpType::ALLGATHER_COALESCED, kName);
  for (size_t i = 0; i < inputs.size(); ++i) {
    submitAllgatherBase(*work, outputs[i], inputs[i], kName);
  }
  work->outputs = outputs;
  return work;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::ReduceScatterOptions& opts) {
  constexpr const char* kName = "reduce_scatter_tensor_coalesced";
  TORCH_CHECK(outputs.size() == inputs.size(), "braid ", kName, ": ", outputs.size(),
              " outputs for ", inputs.size(), " inputs");
  const RedOp op = toRedOp(opts.reduceOp, kName);
  if (!outputs.empty() && onCuda(outputs.front())) {
    return cudaReduceScatterBase(outputs, inputs, op, OpType::REDUCE_SCATTER, kName);
  }
  auto work = makeWork(OpType::REDUCE_SCATTER, kName);
  for (size_t i = 0; i < inputs.size(); ++i) {
    submitReduceScatterBase(*work, outputs[i], inputs[i], op, kName);
  }
  work->outputs = outputs;
  return work;
}
#endif

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const ::c10d::ReduceScatterOptions& opts) {
  constexpr const char* kName = "reduce_scatter";
  const at::Tensor& output = single(outputs, kName);
  TORCH_CHECK(inputs.size() == 1, "braid ", kName, " takes one input list (got ", inputs.size(),
              ")");
  auto& list = inputs[0];
  TORCH_CHECK(static_cast<int>(list.size()) == getSize(), "braid ", kName,
              ": the input list holds ", list.size(), " tensors, the group has ", getSize(),
              " ranks");
  for (const auto& in : list) {
    checkSameKind(in, output, kName, "an input tensor", "the output");
    TORCH_CHECK(in.numel() == output.numel(), "braid ", kName, ": an input tensor has ", in.numel(),
                " elements, the output ", output.numel());
  }
  const RedOp op = toRedOp(opts.reduceOp, kName);
  const DataType type = toDataType(output.scalar_type(), kName, true, op);
  auto work = makeWork(OpType::REDUCE_SCATTER, kName);
  at::Tensor in = flatCat(list);
  work->keepAlive.push_back(in);
  at::Tensor out = outputBuffer(*work, output);
  work->requests.push_back(submit(kName, [&] {
    return comm_->reduceScatterAsync(in.data_ptr(), out.data_ptr(), count(out), type, op);
  }));
  work->outputs = {output};
  return work;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const ::c10d::ReduceScatterOptions& opts) {
  constexpr const char* kName = "_reduce_scatter_base";
  const RedOp op = toRedOp(opts.reduceOp, kName);
  if (onCuda(output)) {
    return cudaReduceScatterBase({output}, {input}, op, OpType::_REDUCE_SCATTER_BASE, kName);
  }
  auto work = makeWork(OpType::_REDUCE_SCATTER_BASE, kName);
  submitReduceScatterBase(*work, output, input, op, kName);
  work->outputs = {output};
  return work;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const ::c10d::GatherOptions& opts) {
  constexpr const char* kName = "gather";
  const at::Tensor& input = single(inputs, kName, true);
  const int root = static_cast<int>(opts.rootRank);
  // The root's list (one tensor per rank), else none.
  const auto* list = rootList(outputs, input, getRank(), root, getSize(), kName, "output");
  const DataType type = toDataType(input.scalar_type(), kName);
  if (onCuda(input)) {
    std::vector<at::Tensor> all = list ? *list : std::vector<at::Tensor>{};
    all.push_back(input);
    return cudaFor(all, kName).gather(getRank(), list ? *list : std::vector<at::Tensor>{}, input,
                                      type, root);
  }
  auto work = makeWork(OpType::GATHER, kName);
  at::Tensor in = input.contiguous();
  work->keepAlive.push_back(in);
  at::Tensor gathered;  // the root's: every rank's input in rank order
  if (list) {
    gathered = at::empty({getSize() * input.numel()}, input.options());
    copyOutFrom(*work, gathered, *list);
    work->outputs = *list;
  }
  work->requests.push_back(submit(kName, [&] {
    return comm_->gatherAsync(in.data_ptr(), gathered.defined() ? gathered.data_ptr() : nullptr,
                              count(in), type, root);
  }));
  return work;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const ::c10d::ScatterOptions& opts) {
  constexpr const char* kName = "scatter";
  const at::Tensor& output = single(outputs, kName, true);
  const int root = static_cast<int>(opts.rootRank);
  // The root's list (one tensor per rank), else none.
  const auto* list = rootList(inputs, output, getRank(), root, getSize(), kName, "input");
  const DataType type = toDataType(output.scalar_type(), kName);
  if (onCuda(output)) {
    std::vector<at::Tensor> all = list ? *list : std::vector<at::Tensor>{};
    all.push_back(output);
    return cudaFor(all, kName).scatter(getRank(), output,
                                       list ? *list : std::vector<at::Tensor>{}, type, root);
  }
  auto work = makeWork(OpType::SCATTER, kName);
  work->outputs = {output};
  at::Tensor flat;  // the root's: every rank's piece in rank order
  if (list) {
    flat = flatCat(*list);
    work->keepAlive.push_back(flat);
  }
  at::Tensor buf = outputBuffer(*work, output);
  work->requests.push_back(submit(kName, [&] {
    return comm_->scatterAsync(flat.defined() ? flat.data_ptr() : nullptr, buf.data_ptr(),
                               count(buf), type, root);
  }));
  return work;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::barrier(const ::c10d::BarrierOptions& opts) {
  constexpr const char* kName = "barrier";
  auto work = makeWork(OpType::BARRIER, kName);
  work->requests.push_back(submit(kName, [&] { return comm_->barrierAsync(); }));
  return work;
}

void BraidProcessGroup::monitoredBarrier(const ::c10d::BarrierOptions& opts, bool waitAllRanks) {
  constexpr const char* kName = "monitored_barrier";
  const double seconds = opts.timeout == ::c10d::kUnsetTimeout
                             ? timeoutSeconds_
                             : std::chrono::duration<double>(opts.timeout).count();
  Deadline deadline = Deadline::after(seconds);
  const int size = getSize();
  // One token byte per rank: ranks 1.. send theirs to rank 0, which answers each once all came.
  std::vector<uint8_t> tokens(static_cast<size_t>(size), 1);
  auto failed = [&](const std::string& what) {
    comm_->abort();  // pending receives would match later messages: the group cannot go on
    TORCH_CHECK(false, "braid ", kName, " timed out after ", seconds, " s: ", what,
                " (the group was aborted)");
  };
  auto waitAll = [&](std::vector<Request>& requests, const std::vector<int>& peers) {
    // Returns the index of the first request not finished by the deadline, or -1.
    for (size_t i = 0; i < requests.size(); ++i) {
      try {
        if (!finishBy(requests[i], deadline)) return static_cast<int>(i);
      } catch (const Error& e) {
        TORCH_CHECK(false, "braid ", kName,
                    e.code() == ErrorCode::kTimeout ? " timed out" : " failed",
                    " waiting for rank ", peers[i], ": ", e.what());
      }
    }
    return -1;
  };
  if (getRank() != 0) {
    // Rank 0 knows who is missing: the others wait kMonitorGraceSeconds longer, so that rank 0's
    // report (and abort) comes first.
    deadline = Deadline::after(seconds + kMonitorGraceSeconds);
    std::vector<Request> requests;
    requests.push_back(
        submit(kName, [&] { return comm_->sendAsync(&tokens[0], 1, DataType::kUint8, 0); }));
    requests.push_back(
        submit(kName, [&] { return comm_->recvAsync(&tokens[1], 1, DataType::kUint8, 0); }));
    if (waitAll(requests, {0, 0}) >= 0) {
      failed(fmt::format("rank {} got no answer from rank 0 in {} s", getRank(),
                         seconds + kMonitorGraceSeconds));
    }
    return;
  }
  std::vector<Request> requests;
  std::vector<int> peers;
  for (int r = 1; r < size; ++r) {
    requests.push_back(submit(kName, [&] {
      return comm_->recvAsync(&tokens[static_cast<size_t>(r)], 1, DataType::kUint8, r);
    }));
    peers.push_back(r);
  }
  const int missing = waitAll(requests, peers);
  if (missing >= 0) {
    const int first = peers[static_cast<size_t>(missing)];
    std::string what = fmt::format("rank {} did not arrive", first);
    if (waitAllRanks && first + 1 < size) {
      // braid receives in issue order: the ranks after the first missing one are unknown.
      what += fmt::format("; ranks {}..{} are unconfirmed (braid receives in rank order)",
                          first + 1, size - 1);
    }
    failed(what);
  }
  std::vector<Request> answers;
  for (int r = 1; r < size; ++r) {
    answers.push_back(
        submit(kName, [&] { return comm_->sendAsync(&tokens[0], 1, DataType::kUint8, r); }));
  }
  if (const int late = waitAll(answers, peers); late >= 0) {
    failed(fmt::format("rank {} took no answer from rank 0", peers[static_cast<size_t>(late)]));
  }
}

#if TORCH_VERSION_MAJOR >= 2
void BraidProcessGroup::abort() {
  {
    std::lock_guard<std::mutex> lock(cudaMutex_);
    if (cuda_) cuda_->abort();
  }
  comm_->abort();
}

void BraidProcessGroup::shutdown() {
  // A barrier first: every rank that reaches it has run all its earlier ops (braid runs them in
  // issue order), so the abort below cuts nothing short. Bounded, and its failure ignored: a
  // rank that never calls destroy_process_group, or died, must not hold this one up for long.
  Request barrier;
  try {
    barrier = comm_->barrierAsync();
    finishBy(barrier, Deadline::after(std::min(timeoutSeconds_, 30.0)));
  } catch (const std::exception&) {
  }
  comm_->abort();  // before `barrier` goes: an unfinished request's destructor would wait
}
#endif

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::send(std::vector<at::Tensor>& tensors,
                                                         int dstRank, int tag) {
  constexpr const char* kName = "send";
  checkTag(tag, kName);
  const at::Tensor& tensor = single(tensors, kName);
  const DataType type = toDataType(tensor.scalar_type(), kName);
  auto work = makeWork(OpType::SEND, kName);
  at::Tensor buf = tensor.contiguous();
  work->keepAlive.push_back(buf);
  work->requests.push_back(submit(
      kName, [&] { return comm_->sendAsync(buf.data_ptr(), count(buf), type, dstRank, tag); }));
  work->outputs = {tensor};
  return work;
}

c10::intrusive_ptr<BraidWork> BraidProcessGroup::recvWork(
    std::vector<at::Tensor>& tensors, int tag, OpType opType, const char* opName,
    const std::function<Request(void*, size_t, DataType)>& post) {
  checkTag(tag, opName);
  const at::Tensor& tensor = single(tensors, opName);
  const DataType type = toDataType(tensor.scalar_type(), opName);
  auto work = makeWork(opType, opName);
  at::Tensor buf = outputBuffer(*work, tensor);
  work->requests.push_back(submit(opName, [&] { return post(buf.data_ptr(), count(buf), type); }));
  work->outputs = {tensor};
  return work;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::recv(std::vector<at::Tensor>& tensors,
                                                         int srcRank, int tag) {
  auto work = recvWork(tensors, tag, OpType::RECV, "recv", [&](void* buf, size_t n, DataType t) {
    return comm_->recvAsync(buf, n, t, srcRank, tag);
  });
  work->sourceRank_ = srcRank;
  return work;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
    std::vector<int64_t>& inputSplits, const ::c10d::AllToAllOptions&) {
  constexpr const char* kName = "alltoall_base";
  checkTensor(input, kName, true);
  checkSameKind(output, input, kName, "the output");
  const DataType type = toDataType(input.scalar_type(), kName);
  // braid copies the counts at the call.
  const Splits send = splitsOf(input, inputSplits, getRank(), getSize(), kName, "input");
  const Splits recv = splitsOf(output, outputSplits, getRank(), getSize(), kName, "output");
  checkOwnBlock(send, recv, getRank(), kName);
  if (onCuda(input)) {
    return cudaFor({output, input}, kName).allToAllBase(getRank(), output, input, send, recv,
                                                        type);
  }
  auto work = makeWork(OpType::ALLTOALL_BASE, kName);
  at::Tensor in = input.contiguous();
  work->keepAlive.push_back(in);
  at::Tensor out = outputBuffer(*work, output);
  work->requests.push_back(submit(kName, [&] {
    return comm_->allToAllvAsync(in.data_ptr(), send.counts.data(), send.displs.data(),
                                 out.data_ptr(), recv.counts.data(), recv.displs.data(), type);
  }));
  work->outputs = {output};
  return work;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::alltoall(std::vector<at::Tensor>& outputs,
                                                             std::vector<at::Tensor>& inputs,
                                                             const ::c10d::AllToAllOptions&) {
  constexpr const char* kName = "alltoall";
  const size_t world = static_cast<size_t>(getSize());
  TORCH_CHECK(inputs.size() == world && outputs.size() == world, "braid ", kName, " (rank ",
              getRank(), "): ", inputs.size(), " input and ", outputs.size(),
              " output tensors for a group of ", world, " ranks (one each per rank)");
  checkTensor(inputs[0], kName, true);
  for (const auto& t : inputs) checkSameKind(t, inputs[0], kName, "an input tensor");
  for (const auto& t : outputs) checkSameKind(t, inputs[0], kName, "an output tensor");
  const DataType type = toDataType(inputs[0].scalar_type(), kName);
  // Flat send and receive buffers, one block per rank in rank order.
  const Splits send = splitsOfList(inputs);
  const Splits recv = splitsOfList(outputs);
  checkOwnBlock(send, recv, getRank(), kName);
  if (onCuda(inputs[0])) {
    std::vector<at::Tensor> all = inputs;
    all.insert(all.end(), outputs.begin(), outputs.end());
    return cudaFor(all, kName).allToAll(getRank(), outputs, inputs, send, recv, type);
  }
  auto work = makeWork(OpType::ALLTOALL, kName);
  at::Tensor flatIn = flatCat(inputs);
  at::Tensor flatOut = at::empty({static_cast<int64_t>(recv.total())}, inputs[0].options());
  work->keepAlive.push_back(flatIn);
  copyOutFrom(*work, flatOut, outputs);
  work->requests.push_back(submit(kName, [&] {
    return comm_->allToAllvAsync(flatIn.data_ptr(), send.counts.data(), send.displs.data(),
                                 flatOut.data_ptr(), recv.counts.data(), recv.displs.data(),
                                 type);
  }));
  work->outputs = outputs;
  return work;
}

c10::intrusive_ptr<::c10d::Work> BraidProcessGroup::recvAnysource(
    std::vector<at::Tensor>& tensors, int tag) {
  size_t bytes = 0;
  auto work = recvWork(tensors, tag, OpType::RECVANYSOURCE, "recv from any source",
                       [&](void* buf, size_t n, DataType t) {
                         bytes = n * dataTypeSize(t);
                         return comm_->recvAnySourceAsync(buf, n, t, tag);
                       });
  work->expectAnySource(bytes);
  return work;
}

}  // namespace braid::pytorch
