#include "harness/data.h"

#include <cmath>
#include <cstring>
#include <random>

#include "base/dtype.h"

namespace weft::test {
namespace {

uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <class T>
T loadAs(const void* buf, size_t i) {
  T v;
  std::memcpy(&v, static_cast<const char*>(buf) + i * sizeof(T), sizeof(T));
  return v;
}

template <class T>
void storeAs(void* buf, size_t i, T v) {
  std::memcpy(static_cast<char*>(buf) + i * sizeof(T), &v, sizeof(T));
}

// [lo, hi] for the non-product ops, chosen so that 8 ranks times the
// PreMulSum scalar stay exact and in range.
void valueRange(weftDataType_t dt, OpKind op, int64_t* lo, int64_t* hi) {
  const bool nonNeg = op == OpKind::kAvg || !dtypeSigned(dt);
  switch (dt) {
    case weftFloat8e4m3:
    case weftFloat8e5m2:
      *lo = 0, *hi = 1;
      return;
    case weftFloat16:
    case weftBfloat16:
      *lo = 0, *hi = 3;
      return;
    case weftInt8:
      *lo = nonNeg ? 0 : -7, *hi = nonNeg ? 14 : 7;
      return;
    case weftUint8:
      *lo = 0, *hi = 15;
      return;
    default:
      *lo = nonNeg ? 0 : -1000, *hi = 1000;
      return;
  }
}

}  // namespace

const std::vector<weftDataType_t>& allDtypes() {
  static const std::vector<weftDataType_t> all = {
      weftInt8,    weftUint8,   weftInt32,   weftUint32,   weftInt64,      weftUint64,
      weftFloat16, weftFloat32, weftFloat64, weftBfloat16, weftFloat8e4m3, weftFloat8e5m2};
  return all;
}

// Names, sizes and kinds come from the library (base/dtype.h): the tests
// check the collectives, not the type table.
std::string dtypeStr(weftDataType_t dt) {
  return dtypeValid(dt) ? dtypeName(dt) : "dtype(" + std::to_string(int(dt)) + ")";
}

size_t elemBytes(weftDataType_t dt) {
  return dtypeSize(dt);
}

bool dtypeFloating(weftDataType_t dt) {
  return dtypeIsFloat(dt);
}

bool dtypeSigned(weftDataType_t dt) {
  return dtypeFloating(dt) || dt == weftInt8 || dt == weftInt32 || dt == weftInt64;
}

double loadElem(weftDataType_t dt, const void* buf, size_t i) {
  switch (dt) {
    case weftInt8:
      return loadAs<int8_t>(buf, i);
    case weftUint8:
      return loadAs<uint8_t>(buf, i);
    case weftInt32:
      return loadAs<int32_t>(buf, i);
    case weftUint32:
      return loadAs<uint32_t>(buf, i);
    case weftInt64:
      return double(loadAs<int64_t>(buf, i));
    case weftUint64:
      return double(loadAs<uint64_t>(buf, i));
    case weftFloat16:
      return halfToFloat(loadAs<uint16_t>(buf, i));
    case weftFloat32:
      return loadAs<float>(buf, i);
    case weftFloat64:
      return loadAs<double>(buf, i);
    case weftBfloat16:
      return bf16ToFloat(loadAs<uint16_t>(buf, i));
    case weftFloat8e4m3:
      return fp8e4m3ToFloat(loadAs<uint8_t>(buf, i));
    case weftFloat8e5m2:
      return fp8e5m2ToFloat(loadAs<uint8_t>(buf, i));
    default:
      return NAN;
  }
}

void storeElem(weftDataType_t dt, void* buf, size_t i, double v) {
  switch (dt) {
    case weftInt8:
      storeAs<int8_t>(buf, i, int8_t(v));
      return;
    case weftUint8:
      storeAs<uint8_t>(buf, i, uint8_t(v));
      return;
    case weftInt32:
      storeAs<int32_t>(buf, i, int32_t(v));
      return;
    case weftUint32:
      storeAs<uint32_t>(buf, i, uint32_t(v));
      return;
    case weftInt64:
      storeAs<int64_t>(buf, i, int64_t(v));
      return;
    case weftUint64:
      storeAs<uint64_t>(buf, i, uint64_t(v));
      return;
    case weftFloat16:
      storeAs<uint16_t>(buf, i, floatToHalf(float(v)));
      return;
    case weftFloat32:
      storeAs<float>(buf, i, float(v));
      return;
    case weftFloat64:
      storeAs<double>(buf, i, v);
      return;
    case weftBfloat16:
      storeAs<uint16_t>(buf, i, floatToBf16(float(v)));
      return;
    case weftFloat8e4m3:
      storeAs<uint8_t>(buf, i, floatToFp8e4m3(float(v)));
      return;
    case weftFloat8e5m2:
      storeAs<uint8_t>(buf, i, floatToFp8e5m2(float(v)));
      return;
    default:
      return;
  }
}

const std::vector<OpKind>& allOpKinds() {
  static const std::vector<OpKind> all = {
      OpKind::kSum,          OpKind::kProd,           OpKind::kMax, OpKind::kMin, OpKind::kAvg,
      OpKind::kPreMulDevice, OpKind::kPreMulImmediate};
  return all;
}

std::string opStr(OpKind k) {
  switch (k) {
    case OpKind::kSum:
      return "sum";
    case OpKind::kProd:
      return "prod";
    case OpKind::kMax:
      return "max";
    case OpKind::kMin:
      return "min";
    case OpKind::kAvg:
      return "avg";
    case OpKind::kPreMulDevice:
      return "premulsum(device scalar)";
    case OpKind::kPreMulImmediate:
      return "premulsum(host immediate)";
  }
  return "?";
}

double inputValue(weftDataType_t dt, OpKind op, int rank, size_t i, uint64_t salt) {
  if (op == OpKind::kProd) {
    // At most two ranks in eight contribute a 2, so products stay <= 4 in
    // magnitude; signed types also see -1.
    double v = ((i + size_t(rank)) % 4 == 0) ? 2.0 : 1.0;
    if (dtypeSigned(dt) && (i * 7 + size_t(rank) + salt) % 3 == 1) v = -v;
    return v;
  }
  int64_t lo, hi;
  valueRange(dt, op, &lo, &hi);
  const uint64_t h = mix((uint64_t(rank) << 48) ^ (uint64_t(i) * 0x100000001b3ull) ^ (salt << 20));
  return double(lo + int64_t(h % uint64_t(hi - lo + 1)));
}

void fillInput(weftDataType_t dt, OpKind op, int rank, void* buf, size_t count, size_t first,
               uint64_t salt) {
  for (size_t j = 0; j < count; ++j)
    storeElem(dt, buf, j, inputValue(dt, op, rank, first + j, salt));
}

double reference(weftDataType_t dt, OpKind op, int nranks, size_t i, uint64_t salt) {
  double acc = inputValue(dt, op, 0, i, salt);
  if (op == OpKind::kPreMulDevice || op == OpKind::kPreMulImmediate) acc *= kPreMulScalar;
  for (int q = 1; q < nranks; ++q) {
    const double v = inputValue(dt, op, q, i, salt);
    switch (op) {
      case OpKind::kSum:
      case OpKind::kAvg:
        acc += v;
        break;
      case OpKind::kProd:
        acc *= v;
        break;
      case OpKind::kMax:
        acc = std::max(acc, v);
        break;
      case OpKind::kMin:
        acc = std::min(acc, v);
        break;
      case OpKind::kPreMulDevice:
      case OpKind::kPreMulImmediate:
        acc += kPreMulScalar * v;
        break;
    }
  }
  if (op == OpKind::kAvg) {
    acc = dtypeFloating(dt) ? acc / nranks : std::trunc(acc / nranks);
  }
  return acc;
}

bool closeEnough(weftDataType_t dt, OpKind op, double got, double exp) {
  if (got == exp) return true;
  if (op != OpKind::kAvg || !dtypeFloating(dt)) return false;
  double rel = 0;
  switch (dt) {
    case weftFloat16:
      rel = 2e-3;
      break;
    case weftBfloat16:
      rel = 1.6e-2;
      break;
    case weftFloat8e4m3:
      rel = 0.13;
      break;
    case weftFloat8e5m2:
      rel = 0.26;
      break;
    case weftFloat32:
      rel = 1e-6;
      break;
    default:
      rel = 1e-14;
      break;
  }
  return std::fabs(got - exp) <= rel * std::fabs(exp);
}

GuardedBuffer::GuardedBuffer(size_t bytes) : bytes_(bytes), storage_(bytes + 2 * kGuard) {
  for (size_t p = 0; p < storage_.size(); ++p) storage_[p] = patternByte(p);
}

void GuardedBuffer::fillPattern(size_t off, size_t len) {
  for (size_t p = kGuard + off; p < kGuard + off + len; ++p) storage_[p] = patternByte(p);
}

size_t GuardedBuffer::findPatternChange(size_t off, size_t len) const {
  for (size_t p = kGuard + off; p < kGuard + off + len; ++p) {
    if (storage_[p] != patternByte(p)) return p - kGuard;
  }
  return npos;
}

bool GuardedBuffer::guardsIntact() const {
  for (size_t p = 0; p < kGuard; ++p) {
    if (storage_[p] != patternByte(p)) return false;
  }
  for (size_t p = kGuard + bytes_; p < storage_.size(); ++p) {
    if (storage_[p] != patternByte(p)) return false;
  }
  return true;
}

std::vector<float> gaussian(size_t n, uint32_t seed, float scale) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(gen);
  return v;
}

}  // namespace weft::test
