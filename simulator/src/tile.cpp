// Tile variants of the value primitives for blocked value streams: load a stored tile, apply
// an ALU op with broadcasting over named axes, write tiles. (Tile reductions are the reduce and
// spacc templates with a tile accumulator, reduce.cpp.) Params: tile_b, axes (the output's
// index-variable ids), in_axes + in_ranks (each input's ids, concatenated).
#include <cmath>
#include <stdexcept>

#include "fuseflow/sim/alu_ops.h"
#include "fuseflow/sim/primitives.h"
#include "fuseflow/sim/writer.h"

namespace fuseflow::sim {
namespace {

TileLayout out_layout(const Params& p) {
  const auto& a = p.get_ints("axes");
  return TileLayout{static_cast<int>(p.get_int("tile_b")), std::vector<int>(a.begin(), a.end())};
}

std::vector<TileLayout> in_layouts(const Params& p) {
  std::vector<TileLayout> out;
  const auto& ids = p.get_ints("in_axes");
  size_t at = 0;
  for (int64_t r : p.get_ints("in_ranks")) {
    out.push_back(TileLayout{static_cast<int>(p.get_int("tile_b")),
                             std::vector<int>(ids.begin() + at, ids.begin() + at + r)});
    at += static_cast<size_t>(r);
  }
  return out;
}

// load(ref) -> tile: the tensor's values are its stored tiles back to back (layout `axes`).
class TileLoad : public Node {
 public:
  TileLoad(const std::string& n, const Params& p)
      : Node(n, "load", 1, 1), keep_(p.shared_floats("vals")), vals_(*keep_), layout_(out_layout(p)) {}
  FF_INLINE Step step() override {
    if (!has(0)) return Step::StallInput;
    if (!room(0)) return Step::StallOutput;
    Token t = take(0);
    size_t e = layout_.size();
    if (t.is_data()) {
      if (t.i < 0 || static_cast<size_t>(t.i + 1) * e > vals_.size())
        out_of_range("tile reference", t.i, vals_.size() / e);
      mem_access(0, t.i * static_cast<int64_t>(e) * 4, static_cast<int>(e * 4), false);
      std::vector<float> tile(vals_.begin() + t.i * e, vals_.begin() + (t.i + 1) * e);
      occupy(layout_.axes.size(), layout_.b);
      emit(0, Token::data(tiles_->put(tile)));
    } else {
      emit(0, t);  // N stays N: consumers read it as a tile of zeros
      if (t.is_done()) finish();
    }
    return Step::Progress;
  }

 private:
  SharedArray<float> keep_;
  const std::vector<float>& vals_;  // *keep_, shared with every load of the tensor
  TileLayout layout_;
};

// alu(tiles...) -> tile over the union of the inputs' axes (inputs broadcast along the rest).
class TileAlu : public Node {
 public:
  TileAlu(const std::string& n, int n_in, const Params& p)
      : Node(n, "alu", n_in, 1), op_(parse_op(p.get_string("op", ""))),
        scalar_(static_cast<float>(p.get_float("scalar", 0.0))), out_(out_layout(p)), in_(in_layouts(p)) {
    if (static_cast<int>(in_.size()) != n_in) throw std::invalid_argument("alu '" + n + "': in_ranks per input");
    for (auto& l : in_) strides_.push_back(l.strides_along(out_.axes));
  }
  FF_INLINE Step step() override {
    for (size_t i = 0; i < in_.size(); ++i) if (!has(i)) return Step::StallInput;
    if (!room(0)) return Step::StallOutput;
    const Token& a = peek(0);
    if (a.is_data() || a.is_empty()) {
      static const float zero = 0.0f;
      std::vector<const float*> src;
      std::vector<std::vector<size_t>> strides = strides_;
      for (size_t i = 0; i < in_.size(); ++i) {
        const Token& t = peek(i);
        if (!t.is_data() && !t.is_empty()) protocol_error("value streams are misaligned");
        if (t.is_data()) {
          src.push_back(tiles_->get(t.i));
        } else {  // an absent operand is 0 everywhere
          src.push_back(&zero);
          std::fill(strides[i].begin(), strides[i].end(), 0);
        }
      }
      std::vector<float> out(out_.size());
      bool two = src.size() == 2;
      for_each_element(out_.b, out_.axes.size(), strides, [&](size_t e, const std::vector<size_t>& off) {
        out[e] = apply(op_, src[0][off[0]], two ? src[1][off[1]] : scalar_);
      });
      for (size_t i = 0; i < in_.size(); ++i) take(i);
      occupy(out_.axes.size(), out_.b);
      emit(0, Token::data(tiles_->put(out)));
      c_.alu_ops += out.size();
      return Step::Progress;
    }
    return forward_aligned_control(a);
  }

 private:
  Op op_;
  float scalar_;
  TileLayout out_;
  std::vector<TileLayout> in_;
  std::vector<std::vector<size_t>> strides_;
};

// write_val(tile): appends each tile in the output's storage layout (`axes`).
class TileWriteVal : public WriterBase {
 public:
  TileWriteVal(const std::string& n, const Params& p)
      : WriterBase(n, "write_val", 1), out_(out_layout(p)), in_(in_layouts(p).at(0)) {
    strides_ = {in_.strides_along(out_.axes)};
  }
  FF_INLINE Step step() override {
    if (!has(0)) return Step::StallInput;
    Token t = take(0);
    size_t e = out_.size();
    if (t.is_data() || t.is_empty()) {
      mem_access(0, static_cast<int64_t>(vals_.size()) * 4, static_cast<int>(e * 4), true);
      size_t base = vals_.size();
      vals_.resize(base + e, 0.0f);
      if (t.is_data()) {
        const float* x = tiles_->get(t.i);
        for_each_element(out_.b, out_.axes.size(), strides_,
                         [&](size_t k, const std::vector<size_t>& off) { vals_[base + k] = x[off[0]]; });
      }
      occupy(out_.axes.size(), out_.b);
    } else if (t.is_done()) {
      finish();
    }
    return Step::Progress;
  }

 private:
  TileLayout out_, in_;
  std::vector<std::vector<size_t>> strides_;
};

}  // namespace

NodePtr make_tile_load(const std::string& name, const Params& p) { return make_stepped<TileLoad>(name, p); }
NodePtr make_tile_alu(const std::string& name, int n, const Params& p) { return make_stepped<TileAlu>(name, n, p); }
NodePtr make_tile_write_val(const std::string& name, const Params& p) { return make_stepped<TileWriteVal>(name, p); }

}  // namespace fuseflow::sim
