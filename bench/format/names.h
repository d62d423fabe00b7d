// The element types and ops "-d all" / "-o all" run, in nccl-tests' order. Their names are the
// vocabulary's (braid/types.hpp: dataTypeName, redOpName, algorithmName and the parsers).
#pragma once

#include <vector>

#include "braid/types.hpp"

namespace braid::bench {

const std::vector<DataType>& allTypes();
const std::vector<RedOp>& allOps();

}  // namespace braid::bench
