#include "tools/braidrun/line_prefixer.h"

namespace braid::braidrun {

std::string LinePrefixer::feed(const char* data, size_t size) {
  std::string out;
  size_t start = 0;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] != '\n' && partial_.size() + (i - start) < kMaxLine) continue;
    out += prefix_;
    out += partial_;
    out.append(data + start, i - start);
    out += '\n';
    partial_.clear();
    start = data[i] == '\n' ? i + 1 : i;
  }
  partial_.append(data + start, size - start);
  return out;
}

std::string LinePrefixer::finish() {
  if (partial_.empty()) return "";
  std::string out = prefix_ + partial_ + "\n";
  partial_.clear();
  return out;
}

}  // namespace braid::braidrun
