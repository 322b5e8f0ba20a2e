// A run's state in a file: what a checkpoint holds (Graph::run, docs/pieces.md "Checkpoints
// inside a run"). Plain values and vectors of them, written as their bytes: a checkpoint is
// read back only by the build that wrote it (the caller's key names the build).
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "fuseflow/sim/token.h"

namespace fuseflow::sim {

class StateOut {
 public:
  explicit StateOut(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "wb")) {
    if (!f_) throw SimError("checkpoint: cannot write " + path);
    std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
  }
  ~StateOut() { if (f_) std::fclose(f_); }
  StateOut(const StateOut&) = delete;
  StateOut& operator=(const StateOut&) = delete;
  template <class T> void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes(&v, sizeof v);
  }
  template <class T> void vec(const std::vector<T>& v) {
    pod(static_cast<uint64_t>(v.size()));
    if (!v.empty()) bytes(v.data(), v.size() * sizeof(T));
  }
  void vec(const std::vector<bool>& v) {
    pod(static_cast<uint64_t>(v.size()));
    for (bool b : v) pod(static_cast<uint8_t>(b));
  }
  void str(const std::string& s) {
    pod(static_cast<uint64_t>(s.size()));
    bytes(s.data(), s.size());
  }
  void bytes(const void* p, size_t n) {
    if (n > 0 && std::fwrite(p, 1, n, f_) != n) throw SimError("checkpoint: cannot write " + path_ + " (disk full?)");
  }
  // Flush and close; the file is complete only after this (the caller renames it into place).
  void close() {
    const bool ok = std::fflush(f_) == 0 && std::fclose(f_) == 0;
    f_ = nullptr;
    if (!ok) throw SimError("checkpoint: cannot write " + path_);
  }

 private:
  std::string path_;
  std::FILE* f_;
};

class StateIn {
 public:
  explicit StateIn(const std::string& path) : path_(path), f_(std::fopen(path.c_str(), "rb")) {
    if (!f_) throw SimError("checkpoint: cannot read " + path);
    std::setvbuf(f_, nullptr, _IOFBF, 1 << 20);
  }
  ~StateIn() { if (f_) std::fclose(f_); }
  StateIn(const StateIn&) = delete;
  StateIn& operator=(const StateIn&) = delete;
  template <class T> T pod() {
    static_assert(std::is_trivially_copyable_v<T>);
    T v;
    bytes(&v, sizeof v);
    return v;
  }
  template <class T> void pod(T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    bytes(&v, sizeof v);
  }
  template <class T> void vec(std::vector<T>& v) {
    v.resize(pod<uint64_t>());
    if (!v.empty()) bytes(v.data(), v.size() * sizeof(T));
  }
  void vec(std::vector<bool>& v) {
    v.resize(pod<uint64_t>());
    for (size_t i = 0; i < v.size(); ++i) v[i] = pod<uint8_t>() != 0;
  }
  std::string str() {
    std::string s(pod<uint64_t>(), '\0');
    if (!s.empty()) bytes(s.data(), s.size());
    return s;
  }
  void bytes(void* p, size_t n) {
    if (n > 0 && std::fread(p, 1, n, f_) != n) throw SimError("checkpoint: " + path_ + " ends early (a checkpoint cut short)");
  }
  // Where a check of the file failed (it names the file).
  [[noreturn]] void refuse(const std::string& why) const { throw SimError("checkpoint: " + path_ + ": " + why); }

 private:
  std::string path_;
  std::FILE* f_;
};

}  // namespace fuseflow::sim
