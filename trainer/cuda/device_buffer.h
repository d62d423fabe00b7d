// Device memory owned by one object: cudaMalloc'd, grown (never shrunk) on demand, freed with it.
#pragma once

#include <cstddef>
#include <utility>

namespace braid::trainer::cuda {

/// cudaMalloc of `bytes` (throws kCudaError naming `what` and the size); nullptr for 0 bytes.
void* deviceAlloc(size_t bytes, const char* what);
/// Waits for the device (the memory may still be in use by queued work), then cudaFree.
void deviceFree(void* p) noexcept;

/// A device array of T. resize() keeps no contents when it grows. Move-only.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n, const char* what = "buffer") { resize(n, what); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
    return *this;
  }
  ~DeviceBuffer() { deviceFree(ptr_); }

  void resize(size_t n, const char* what = "buffer") {
    if (n > capacity_) {
      T* fresh = static_cast<T*>(deviceAlloc(n * sizeof(T), what));
      deviceFree(ptr_);
      ptr_ = fresh;
      capacity_ = n;
    }
    size_ = n;
  }
  T* data() { return ptr_; }
  const T* data() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  T* ptr_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
};

}  // namespace braid::trainer::cuda
