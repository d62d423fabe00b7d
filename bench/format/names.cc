#include "bench/format/names.h"

namespace braid::bench {

const std::vector<DataType>& allTypes() {
  static const std::vector<DataType> types = {
      DataType::kInt8,    DataType::kUint8,   DataType::kInt32,   DataType::kUint32,
      DataType::kInt64,   DataType::kUint64,  DataType::kFloat16, DataType::kFloat32,
      DataType::kFloat64, DataType::kBFloat16};
  return types;
}

const std::vector<RedOp>& allOps() {
  static const std::vector<RedOp> ops = {RedOp::kSum, RedOp::kProd, RedOp::kMax, RedOp::kMin,
                                         RedOp::kAvg};
  return ops;
}

}  // namespace braid::bench
