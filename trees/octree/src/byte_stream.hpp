// SPDX-License-Identifier: Apache-2.0
// Sequential reading of a points file, from memory or from disk, for the readers of other
// programs' formats (Tipsy, Gadget, PLY, NumPy). Internal to canopy::trees.
//
// Why: the readers must work over bytes in memory (parse_*, the fuzzers) and over files of many
// gigabytes without holding the file and the points at once. A byte_stream reads a file through a
// fixed 1 MiB buffer, so a reader converts records chunk by chunk straight into its output
// vector, which it sizes only after checking the counts against the file size.
#pragma once

#include <canopy/trees/errors.hpp>

#include "point_checks.hpp"

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace canopy::trees::detail {

class byte_stream {
 public:
  // The whole file in memory; `source` names it in errors.
  byte_stream(std::span<const std::byte> bytes, std::string source)
      : source_(std::move(source)),
        data_(reinterpret_cast<const unsigned char*>(bytes.data())),
        end_(bytes.size()),
        size_(bytes.size()) {}

  // A file on disk (already checked to be a regular file); read through the buffer.
  byte_stream(std::ifstream in, std::uint64_t size, std::string source)
      : source_(std::move(source)), in_(std::move(in)), buffer_(buffer_bytes), data_(buffer_.data()), size_(size) {}

  const std::string& source() const { return source_; }
  std::uint64_t size() const { return size_; }
  std::uint64_t offset() const { return base_ + pos_; }
  std::uint64_t remaining() const { return size_ - offset(); }

  // Copies the next n bytes; false (having consumed what there was) when fewer remain.
  bool read(void* dst, std::size_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    while (n > 0) {
      if (pos_ == end_ && !refill()) return false;
      const std::size_t k = std::min(n, end_ - pos_);
      std::memcpy(out, data_ + pos_, k);
      out += k;
      pos_ += k;
      n -= k;
    }
    return true;
  }

  // Skips n bytes; false when fewer remain.
  bool skip(std::uint64_t n) {
    if (n > remaining()) return false;
    if (n <= end_ - pos_) {
      pos_ += static_cast<std::size_t>(n);
      return true;
    }
    const std::uint64_t target = offset() + n;
    base_ = target;
    pos_ = end_ = 0;
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(target));
    if (!in_) throw input_error(source_, "seek to byte " + std::to_string(target) + " failed");
    return true;
  }

  // The next byte, or -1 at the end (ASCII PLY).
  int get() {
    if (pos_ == end_ && !refill()) return -1;
    return data_[pos_++];
  }
  int peek() {
    if (pos_ == end_ && !refill()) return -1;
    return data_[pos_];
  }

 private:
  static constexpr std::size_t buffer_bytes = std::size_t{1} << 20;

  bool refill() {
    if (buffer_.empty()) return false;  // memory: there is no more
    base_ += end_;
    pos_ = end_ = 0;
    const std::uint64_t left = size_ - base_;
    if (left == 0) return false;
    const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(left, buffer_.size()));
    in_.read(reinterpret_cast<char*>(buffer_.data()), static_cast<std::streamsize>(want));
    end_ = static_cast<std::size_t>(in_.gcount());
    if (end_ == 0) throw input_error(source_, "read failed at byte " + std::to_string(base_));
    return true;
  }

  std::string source_;
  std::ifstream in_;
  std::vector<unsigned char> buffer_;
  const unsigned char* data_;
  std::uint64_t base_ = 0;  // file offset of data_[0]
  std::size_t pos_ = 0;
  std::size_t end_ = 0;
  std::uint64_t size_;
};

// A stream over the file at `path` (input_error naming it if it cannot be opened).
inline byte_stream file_stream(const std::filesystem::path& path) {
  std::ifstream in = open_for_reading(path);
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) throw input_error(path.string(), "cannot read the file size: " + ec.message());
  return byte_stream(std::move(in), size, path.string());
}

// Loads of a possibly byte-swapped value from raw bytes.
template <class T>
T load(const unsigned char* p, bool big_endian) {
  static_assert(std::is_trivially_copyable_v<T> && (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8));
  unsigned char b[sizeof(T)];
  std::memcpy(b, p, sizeof(T));
  if (big_endian != (std::endian::native == std::endian::big)) std::reverse(b, b + sizeof(T));
  T v;
  std::memcpy(&v, b, sizeof(T));
  return v;
}

}  // namespace canopy::trees::detail
