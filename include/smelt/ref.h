// Intrusive reference counting: the count lives in the object (one allocation, no control block).
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace smelt {

class RefCounted {
 public:
  RefCounted() = default;
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;
  virtual ~RefCounted() = default;

  void ref_retain() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Destroys the object when the last reference goes.
  void ref_release() const {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) const_cast<RefCounted*>(this)->destroy();
  }
  int32_t ref_count() const { return refs_.load(std::memory_order_relaxed); }
  // Retains the object unless its count already reached zero (its destruction has begun): how a
  // weak pointer that other threads may release meanwhile becomes a strong one. True if retained.
  bool try_retain() const {
    int32_t n = refs_.load(std::memory_order_relaxed);
    while (n > 0) {
      if (refs_.compare_exchange_weak(n, n + 1, std::memory_order_acq_rel)) return true;
    }
    return false;
  }

 protected:
  // Called when the count reaches zero. Autograd nodes override it to free long chains
  // iteratively instead of recursing through destructors.
  virtual void destroy() { delete this; }

 private:
  mutable std::atomic<int32_t> refs_{0};
};

// A strong reference to a RefCounted object; null when empty.
template <class T>
class Ref {
 public:
  Ref() = default;
  Ref(T* p) : p_(p) { if (p_) p_->ref_retain(); }  // NOLINT: implicit from a raw pointer is intended
  Ref(const Ref& o) : p_(o.p_) { if (p_) p_->ref_retain(); }
  Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  template <class U>
  Ref(const Ref<U>& o) : Ref(o.get()) {}  // NOLINT: upcast
  ~Ref() { if (p_) p_->ref_release(); }
  Ref& operator=(Ref o) noexcept { std::swap(p_, o.p_); return *this; }

  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  bool operator==(const Ref& o) const { return p_ == o.p_; }
  void reset() { Ref().swap(*this); }
  void swap(Ref& o) noexcept { std::swap(p_, o.p_); }

 private:
  T* p_ = nullptr;
};

template <class T, class... Args>
Ref<T> make_ref(Args&&... args) {
  return Ref<T>(new T(std::forward<Args>(args)...));
}

}  // namespace smelt
