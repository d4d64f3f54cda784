// lean_vector against std::vector: the same random operations on both, over a trivial element type
// and over std::string (constructors and destructors that count), plus the aliasing cases std::vector
// gets right (an element of the vector passed to its own push_back / resize while it grows) and use
// during constant evaluation.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "qpolicy/core/detail/lean_vector.hpp"

using qpolicy::lean_vector;

namespace {

template <class T>
bool same(const lean_vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), b.end());
}

template <class T, class Make>
void random_operations(std::uint64_t seed, Make make) {
  std::mt19937_64 rng(seed);
  lean_vector<T> a;
  std::vector<T> b;
  for (int step = 0; step < 4000; ++step) {
    const auto v = make(rng());
    const std::size_t at = b.empty() ? 0 : rng() % b.size();
    switch (rng() % 11) {
      case 0: case 1: case 2: a.push_back(v); b.push_back(v); break;
      case 3: a.emplace_back(v); b.emplace_back(v); break;
      case 4: if (!b.empty()) { a.pop_back(); b.pop_back(); } break;
      case 5: { const std::size_t n = rng() % 40; a.resize(n); b.resize(n); break; }
      case 6: { const std::size_t n = rng() % 40; a.resize(n, v); b.resize(n, v); break; }
      case 7: { const T src[3] = {v, make(rng()), make(rng())};
                const std::size_t k = 1 + rng() % 3;
                a.insert(a.begin() + at, src, src + k);
                b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), src, src + k); break; }
      case 8: if (!b.empty()) { const std::size_t n = 1 + rng() % (b.size() - at);
                a.erase(a.begin() + at, a.begin() + at + n);
                b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n)); } break;
      case 9: { lean_vector<T> copy = a; a = std::move(copy); a.assign(b.begin(), b.end()); break; }
      default: { const std::size_t n = rng() % 20; a.assign(n, v); b.assign(n, v); break; }
    }
    REQUIRE(same(a, b));
  }
  lean_vector<T> moved(std::move(a));
  REQUIRE(same(moved, b));
  REQUIRE(a.empty());  // NOLINT: a moved-from lean_vector is empty
}

constexpr int constant_evaluation() {
  lean_vector<std::string> v{"a", "bb"};
  for (int i = 0; i < 20; ++i) v.push_back(v.front());  // an element of v while v grows
  const std::string more[2] = {"ccc", "dddd"};
  v.insert(v.begin() + 1, more, more + 2);  // "a", "ccc", "dddd", "bb", "a" x 20
  v.erase(v.begin());
  v.resize(30, v.back());
  return static_cast<int>(v.size()) * 100 + static_cast<int>(v[0].size()) * 10 + static_cast<int>(v[2].size());
}
static_assert(constant_evaluation() == 3000 + 30 + 2);

}  // namespace

TEST_CASE("lean_vector does what std::vector does", "[unit][lean_vector]") {
  const std::uint64_t seed = GENERATE(1, 2, 3, 4);
  random_operations<int>(seed, [](std::uint64_t r) { return static_cast<int>(r % 1000); });
  random_operations<std::string>(seed, [](std::uint64_t r) { return std::string(r % 40, static_cast<char>('a' + r % 26)); });
}

TEST_CASE("lean_vector: arguments that are its own elements survive growth", "[unit][lean_vector]") {
  lean_vector<std::string> v{std::string(50, 'x')};
  for (int i = 0; i < 100; ++i) {
    v.push_back(v[0]);
    v.emplace_back(v.back());
  }
  CHECK(v.size() == 201);
  for (const auto& s : v) CHECK(s == std::string(50, 'x'));
  v.resize(1000, v[3]);
  CHECK(v.back() == std::string(50, 'x'));
  v.assign(7, v[5]);
  CHECK(v.size() == 7);
  CHECK(v[6] == std::string(50, 'x'));
}
