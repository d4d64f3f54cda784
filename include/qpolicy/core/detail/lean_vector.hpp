#pragma once
// A growable array with std::vector's common interface, for the code that also runs during constant
// evaluation (the pattern compiler, the matchers, the planner's scratch). Its reason is compile time:
// every std::vector<T> makes a compiler instantiate a few dozen templates (allocator traits, iterator
// wrappers, relocation helpers), and nvcc's front end spends about 50 ms per element type doing so --
// twice, once for the host and once for the device pass. This one is a handful of plain members.
// Public types (plan, config) keep std::vector.
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <type_traits>
#include <utility>

namespace qpolicy {

/// A growable heap array of `T` (std::vector's interface, in part); its iterators are pointers.
template <class T>
class lean_vector {
 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;

  constexpr lean_vector() noexcept = default;
  constexpr explicit lean_vector(std::size_t n) { resize(n); }
  constexpr lean_vector(std::size_t n, const T& value) { assign(n, value); }
  constexpr lean_vector(std::initializer_list<T> values) : lean_vector(values.begin(), values.end()) {}
  template <std::input_iterator It>
  constexpr lean_vector(It first, It last) {
    assign(first, last);
  }
  constexpr lean_vector(const lean_vector& o) : lean_vector(o.begin(), o.end()) {}
  constexpr lean_vector(lean_vector&& o) noexcept : data_(o.data_), size_(o.size_), capacity_(o.capacity_) {
    o.data_ = nullptr;
    o.size_ = o.capacity_ = 0;
  }
  constexpr lean_vector& operator=(const lean_vector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  constexpr lean_vector& operator=(lean_vector&& o) noexcept {
    lean_vector(std::move(o)).swap(*this);
    return *this;
  }
  constexpr ~lean_vector() {
    clear();
    deallocate();
  }

  constexpr std::size_t size() const { return size_; }
  constexpr bool empty() const { return size_ == 0; }
  constexpr std::size_t capacity() const { return capacity_; }
  constexpr T* data() { return data_; }
  constexpr const T* data() const { return data_; }
  constexpr T& operator[](std::size_t i) { return data_[i]; }
  constexpr const T& operator[](std::size_t i) const { return data_[i]; }
  constexpr T& front() { return data_[0]; }
  constexpr const T& front() const { return data_[0]; }
  constexpr T& back() { return data_[size_ - 1]; }
  constexpr const T& back() const { return data_[size_ - 1]; }
  constexpr T* begin() { return data_; }
  constexpr T* end() { return data_ + size_; }
  constexpr const T* begin() const { return data_; }
  constexpr const T* end() const { return data_ + size_; }

  constexpr void reserve(std::size_t n) {
    if (n > capacity_) move_to(allocate(n), n);
  }
  constexpr void clear() { shrink(0); }
  constexpr void resize(std::size_t n) {
    reserve(n);
    for (; size_ < n; ++size_) std::construct_at(data_ + size_);
    shrink(n);
  }
  constexpr void resize(std::size_t n, const T& value) {
    const T copy(value);  // `value` may live in this vector, which reserve() may move
    reserve(n);
    for (; size_ < n; ++size_) std::construct_at(data_ + size_, copy);
    shrink(n);
  }
  // Both assigns reuse the storage when it is large enough (match() assigns its answers per name).
  constexpr void assign(std::size_t n, const T& value) {
    const T copy(value);  // `value` may live in this vector
    clear();
    reserve(n);
    for (; size_ < n; ++size_) std::construct_at(data_ + size_, copy);
  }
  /// [first, last) must not point into this vector (as for std::vector).
  template <std::input_iterator It>
  constexpr void assign(It first, It last) {
    clear();
    if constexpr (std::forward_iterator<It>) reserve(static_cast<std::size_t>(std::distance(first, last)));
    for (; first != last; ++first) emplace_back(*first);
  }

  constexpr void push_back(const T& value) { emplace_back(value); }
  constexpr void push_back(T&& value) { emplace_back(std::move(value)); }
  template <class... Args>
  constexpr T& emplace_back(Args&&... args) {
    if (size_ == capacity_) return grow_and_emplace(std::forward<Args>(args)...);
    std::construct_at(data_ + size_, std::forward<Args>(args)...);
    return data_[size_++];
  }
  constexpr void pop_back() { shrink(size_ - 1); }

  /// Inserts [first, last) before `at`; returns where the first of them went.
  template <std::input_iterator It>
  constexpr T* insert(const T* at, It first, It last) {
    const auto offset = static_cast<std::size_t>(at - data_);
    const std::size_t old_size = size_;
    for (; first != last; ++first) emplace_back(*first);
    rotate_tail(offset, old_size);
    return data_ + offset;
  }
  constexpr T* insert(const T* at, T value) {
    const auto offset = static_cast<std::size_t>(at - data_);
    const std::size_t old_size = size_;
    emplace_back(std::move(value));
    rotate_tail(offset, old_size);
    return data_ + offset;
  }
  constexpr T* erase(const T* first, const T* last) {
    const auto from = static_cast<std::size_t>(first - data_), to = static_cast<std::size_t>(last - data_);
    if (from == to) return data_ + from;
    for (std::size_t i = to; i < size_; ++i) data_[from + i - to] = std::move(data_[i]);
    shrink(size_ - (to - from));
    return data_ + from;
  }
  constexpr T* erase(const T* at) { return erase(at, at + 1); }

  constexpr void swap(lean_vector& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
  }

  friend constexpr bool operator==(const lean_vector& a, const lean_vector& b) {
    if (a.size_ != b.size_) return false;
    for (std::size_t i = 0; i < a.size_; ++i)
      if (!(a.data_[i] == b.data_[i])) return false;
    return true;
  }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0, capacity_ = 0;

  // Out of line from emplace_back, which stays small enough to inline at run time.
  template <class... Args>
  constexpr T& grow_and_emplace(Args&&... args) {
    // Made in the new storage first: the arguments may refer to elements of this vector.
    const std::size_t n = capacity_ ? 2 * capacity_ : 4;
    T* more = allocate(n);
    std::construct_at(more + size_, std::forward<Args>(args)...);
    move_to(more, n);
    return data_[size_++];
  }
  static constexpr T* allocate(std::size_t n) { return std::allocator<T>{}.allocate(n); }
  // Moves the elements into `more` (capacity n; an element at [size_] may already be made there).
  constexpr void move_to(T* more, std::size_t n) {
    for (std::size_t i = 0; i < size_; ++i) {
      std::construct_at(more + i, std::move(data_[i]));
      std::destroy_at(data_ + i);
    }
    deallocate();
    data_ = more;
    capacity_ = n;
  }
  constexpr void shrink(std::size_t n) {
    while (size_ > n) std::destroy_at(data_ + --size_);
  }
  // Moves the elements appended after old_size to `offset`, keeping both runs in order.
  constexpr void rotate_tail(std::size_t offset, std::size_t old_size) {
    for (std::size_t i = old_size; i < size_; ++i)
      for (std::size_t k = i; k > offset + (i - old_size); --k) std::swap(data_[k], data_[k - 1]);
  }
  constexpr void deallocate() {
    if (data_) std::allocator<T>{}.deallocate(data_, capacity_);
  }
};

}  // namespace qpolicy
