// Dense tiles of blocked value streams (docs/architecture.md, "Design: the simulator": values are scalars or b x ... x b tiles).
// A tile token is a data token whose `i` is a handle into the graph's TileStore; tiles are
// immutable once stored and live until the run ends (no per-token allocation: one arena).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

namespace fuseflow::sim {

class TileStore {
 public:
  int64_t put(const std::vector<float>& t) {
    int64_t h = static_cast<int64_t>(data_.size());
    data_.insert(data_.end(), t.begin(), t.end());
    return h;
  }
  const float* get(int64_t h) const { return data_.data() + h; }
  std::vector<float>& arena() { return data_; }  // a checkpoint saves and restores it whole

 private:
  std::vector<float> data_;
};

// A tile's axes (index-variable ids), each of extent b, row-major in the listed order.
struct TileLayout {
  int b = 1;
  std::vector<int> axes;
  size_t size() const {
    size_t n = 1;
    for (size_t i = 0; i < axes.size(); ++i) n *= static_cast<size_t>(b);
    return n;
  }
  // This layout's element stride along each of `out`'s axes (0 where it lacks the axis), so a
  // walk over `out` reads this tile broadcast to it.
  std::vector<size_t> strides_along(const std::vector<int>& out) const {
    std::vector<size_t> s(out.size(), 0);
    for (size_t d = 0; d < out.size(); ++d) {
      size_t stride = 1;
      for (size_t a = axes.size(); a-- > 0;) {
        if (axes[a] == out[d]) { s[d] = stride; break; }
        stride *= static_cast<size_t>(b);
      }
    }
    return s;
  }
};

// Visit every element of a `rank`-axis tile of extent b in row-major order, calling
// f(element index, offsets[k]) where offsets[k] advances by strides[k][axis].
template <class F>
void for_each_element(int b, size_t rank, const std::vector<std::vector<size_t>>& strides, F&& f) {
  std::vector<size_t> idx(rank, 0), off(strides.size(), 0);
  size_t n = 1;
  for (size_t d = 0; d < rank; ++d) n *= static_cast<size_t>(b);
  for (size_t e = 0; e < n; ++e) {
    f(e, off);
    for (size_t d = rank; d-- > 0;) {
      ++idx[d];
      for (size_t k = 0; k < off.size(); ++k) off[k] += strides[k][d];
      if (idx[d] < static_cast<size_t>(b)) break;
      for (size_t k = 0; k < off.size(); ++k) off[k] -= strides[k][d] * static_cast<size_t>(b);
      idx[d] = 0;
    }
  }
}

}  // namespace fuseflow::sim
