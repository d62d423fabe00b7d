#include "trainer/train/float_file.h"

#include <fstream>

#include "common/error.h"

namespace braid::trainer {

void writeFloatsFile(const std::string& path, const float* data, size_t count, const char* flag) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(count * sizeof(float)));
  BRAID_ENFORCE(f.good(), ErrorCode::kSystemError, "cannot write {} file '{}'", flag, path);
}

void gatherFloatsFile(Communicator& comm, const std::vector<FlatRange>& parts, const float* mine,
                      float* all, size_t count, const std::string& path, const char* flag) {
  const int rank = comm.rank();
  for (int p = 1; p < static_cast<int>(parts.size()); ++p) {
    const FlatRange& part = parts[static_cast<size_t>(p)];
    if (part.size() == 0) continue;
    if (rank == 0) comm.recv(all + part.begin, part.size(), DataType::kFloat32, p);
    if (rank == p) comm.send(mine, part.size(), DataType::kFloat32, 0);
  }
  if (rank == 0) writeFloatsFile(path, all, count, flag);
}

}  // namespace braid::trainer
