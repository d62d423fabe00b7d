#include "trainer/nn/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/error.h"

namespace braid::trainer {

size_t shapeNumel(const std::vector<int>& shape) {
  size_t n = 1;
  for (int d : shape) {
    BRAID_ENFORCE(d >= 0, ErrorCode::kInvalidUsage, "tensor shape {} has a negative dimension",
                  shapeString(shape));
    n *= static_cast<size_t>(d);
  }
  return n;
}

std::string shapeString(const std::vector<int>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

void Tensor::resize(std::vector<int> dims) {
  size_t n = shapeNumel(dims);
  shape = std::move(dims);
  data.resize(n);
}

}  // namespace braid::trainer
