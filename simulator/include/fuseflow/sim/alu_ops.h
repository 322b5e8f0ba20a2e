// The ALU's operations, shared by scalar and tile ALUs.
#pragma once
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>

namespace fuseflow::sim {

// Binary ops first, then unary (is_unary relies on the order). mask(x, m) = m != 0 ? x : -inf.
enum class Op { Add, Sub, Mul, Div, Max, Min, RSub, RDiv, Mask, Neg, Relu, Exp, Sqrt, Rsqrt, Tanh, Abs, Erf, Eqz, Nez, Log };

// The ALU op names, the one table Python reads (`_simulator.alu_ops()`).
inline const std::pair<const char*, Op> kAluOps[] = {
    {"add", Op::Add}, {"sub", Op::Sub}, {"mul", Op::Mul}, {"div", Op::Div}, {"max", Op::Max},
    {"min", Op::Min}, {"rsub", Op::RSub}, {"rdiv", Op::RDiv}, {"neg", Op::Neg}, {"relu", Op::Relu},
    {"exp", Op::Exp}, {"sqrt", Op::Sqrt}, {"rsqrt", Op::Rsqrt}, {"tanh", Op::Tanh}, {"abs", Op::Abs},
    {"mask", Op::Mask}, {"erf", Op::Erf}, {"eqz", Op::Eqz}, {"nez", Op::Nez}, {"log", Op::Log}};

inline Op parse_op(const std::string& s) {
  for (auto& [name, op] : kAluOps) if (s == name) return op;
  throw std::invalid_argument("unknown ALU op '" + s + "'");
}

inline bool is_unary(Op op) { return op >= Op::Neg; }

inline float apply(Op op, float a, float b) {
  switch (op) {
    case Op::Add: return a + b;
    case Op::Sub: return a - b;
    case Op::Mul: return a * b;
    case Op::Div: return a / b;
    case Op::Max: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case Op::Min: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case Op::RSub: return b - a;
    case Op::RDiv: return b / a;
    case Op::Neg: return -a;
    case Op::Relu: return a > 0.0f ? a : 0.0f;
    case Op::Exp: return std::exp(a);
    case Op::Sqrt: return std::sqrt(a);
    case Op::Rsqrt: return 1.0f / std::sqrt(a);
    case Op::Tanh: return std::tanh(a);
    case Op::Abs: return std::fabs(a);
    case Op::Mask: return b != 0.0f ? a : -INFINITY;
    case Op::Erf: return std::erf(a);
    case Op::Eqz: return a == 0.0f ? 1.0f : 0.0f;
    case Op::Nez: return a != 0.0f ? 1.0f : 0.0f;
    case Op::Log: return std::log(a);
  }
  return 0.0f;
}

}  // namespace fuseflow::sim
