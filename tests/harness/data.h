// Test data for collectives: every dtype read and written as a double,
// integer-valued inputs chosen so that every reduction of up to 8 ranks is
// exact in every dtype (fp8: 0/1, fp16/bf16: 0..3, products of 1, 2 and -1
// with at most two 2s), a serial reference, and buffers with guard bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "weft/weft.h"

namespace weft::test {

// The 12 dtypes, in enum order.
const std::vector<weftDataType_t>& allDtypes();
std::string dtypeStr(weftDataType_t dt);
size_t elemBytes(weftDataType_t dt);
bool dtypeSigned(weftDataType_t dt);  // signed ints and every float type
bool dtypeFloating(weftDataType_t dt);

// Element i of buf as a double, and back (v must be representable).
double loadElem(weftDataType_t dt, const void* buf, size_t i);
void storeElem(weftDataType_t dt, void* buf, size_t i, double v);

// The reductions the tests run: NCCL's five plus PreMulSum (scalar 2) made
// with either residence.
enum class OpKind { kSum, kProd, kMax, kMin, kAvg, kPreMulDevice, kPreMulImmediate };
const std::vector<OpKind>& allOpKinds();
std::string opStr(OpKind k);
inline constexpr double kPreMulScalar = 2.0;

// n normally distributed floats (mean 0, standard deviation `scale`) from
// a fixed seed: gradients for the compression tests.
std::vector<float> gaussian(size_t n, uint32_t seed, float scale = 1.0f);

// The value rank `rank` contributes at element i (salt varies the pattern).
// Sums of up to 8 such values (times the PreMulSum scalar) are exact in dt.
double inputValue(weftDataType_t dt, OpKind op, int rank, size_t i, uint64_t salt = 0);
// Fills buf[0, count) with inputValue(dt, op, rank, first + j, salt).
void fillInput(weftDataType_t dt, OpKind op, int rank, void* buf, size_t count, size_t first = 0,
               uint64_t salt = 0);

// The reduction over ranks 0..nranks-1 of inputValue(dt, op, q, i, salt).
double reference(weftDataType_t dt, OpKind op, int nranks, size_t i, uint64_t salt = 0);
// Whether got is an acceptable result for exp (exact except for average of
// floats, which may round).
bool closeEnough(weftDataType_t dt, OpKind op, double got, double exp);

// A byte buffer with guard bytes on both sides and a known filler pattern.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes = 0);
  void* data() { return storage_.data() + kGuard; }
  const void* data() const { return storage_.data() + kGuard; }
  size_t bytes() const { return bytes_; }
  // Fills [off, off+len) of the data with the filler pattern.
  void fillPattern(size_t off, size_t len);
  void fillPattern() { fillPattern(0, bytes_); }
  // First byte in [off, off+len) that differs from the pattern, or npos.
  size_t findPatternChange(size_t off, size_t len) const;
  bool guardsIntact() const;

  static constexpr size_t kGuard = 64;
  static constexpr size_t npos = ~size_t(0);

 private:
  static uint8_t patternByte(size_t pos) { return uint8_t(0xA5u ^ (pos * 37u)); }
  size_t bytes_;
  std::vector<uint8_t> storage_;
};

}  // namespace weft::test
