#include "compression/params.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

namespace weft::compression {

const char* kindName(weftCompressKind_t kind) {
  switch (kind) {
    case weftCompressOneBit:
      return "onebit";
    case weftCompressPowerSGD:
      return "powersgd";
    case weftCompressTopK:
      return "topk";
    case weftCompressFp16:
      return "fp16";
    case weftCompressBf16:
      return "bf16";
    default:
      return "unknown";
  }
}

weftCompressorParams_t defaultParams() {
  weftCompressorParams_t p = WEFT_COMPRESSOR_PARAMS_INITIALIZER;
  return p;
}

Status validateParams(int rawKind, const weftCompressorParams_t& p) {
  if (rawKind < 0 || rawKind >= weftNumCompressKinds)
    return makeError(weftInvalidArgument,
                     "invalid compressor kind %d: use weftCompressOneBit, weftCompressPowerSGD, "
                     "weftCompressTopK, weftCompressFp16 or weftCompressBf16",
                     rawKind);
  if (p.size != sizeof(weftCompressorParams_t) || p.magic != WEFT_COMPRESSOR_PARAMS_MAGIC)
    return Status(weftInvalidArgument,
                  "compressor params were not initialised: declare them as "
                  "weftCompressorParams_t p = WEFT_COMPRESSOR_PARAMS_INITIALIZER; then set fields");
  if (p.errorFeedback != 0 && p.errorFeedback != 1)
    return makeError(weftInvalidArgument, "errorFeedback is %d; use 0 or 1", p.errorFeedback);
  switch (static_cast<weftCompressKind_t>(rawKind)) {
    case weftCompressOneBit:
      if (p.blockSize <= 0 || p.blockSize % 8 != 0 || p.blockSize > (1 << 24))
        return makeError(weftInvalidArgument,
                         "onebit blockSize is %d; use a positive multiple of 8 (default 2048)",
                         p.blockSize);
      break;
    case weftCompressPowerSGD:
      if (p.rank <= 0)
        return makeError(weftInvalidArgument, "powersgd rank is %d; it must be at least 1", p.rank);
      if ((p.rows == 0) != (p.cols == 0))
        return makeError(weftInvalidArgument,
                         "powersgd shape %zu x %zu: give both rows and cols, or neither (then the "
                         "buffer is reshaped to about sqrt(count) x sqrt(count))",
                         p.rows, p.cols);
      if (p.numTensors < 0 || (p.numTensors > 0 && p.shapes == nullptr))
        return makeError(weftInvalidArgument,
                         "powersgd numTensors is %d with shapes %s; give numTensors >= 0 and, if "
                         "> 0, 2*numTensors sizes in shapes",
                         p.numTensors, p.shapes ? "set" : "NULL");
      if (!(p.minCompressionRate >= 1.0) || !std::isfinite(p.minCompressionRate))
        return makeError(weftInvalidArgument, "powersgd minCompressionRate is %g; use >= 1",
                         p.minCompressionRate);
      break;
    case weftCompressTopK:
      if (!(p.ratio > 0.0 && p.ratio <= 1.0))
        return makeError(weftInvalidArgument,
                         "topk ratio is %g; it must be in (0, 1] (the fraction of elements kept)",
                         p.ratio);
      if (p.randomK != 0 && p.randomK != 1)
        return makeError(weftInvalidArgument, "topk randomK is %d; use 0 or 1", p.randomK);
      break;
    default:
      break;
  }
  return Status::ok();
}

namespace {

bool parseDouble(const std::string& s, double* out) {
  char* end = nullptr;
  errno = 0;
  *out = std::strtod(s.c_str(), &end);
  return !s.empty() && *end == '\0' && errno == 0;
}

bool parseU64(const std::string& s, unsigned long long* out) {
  char* end = nullptr;
  errno = 0;
  if (s.empty() || s[0] == '-') return false;
  *out = std::strtoull(s.c_str(), &end, 0);
  return *end == '\0' && errno == 0;
}

bool parseI32(const std::string& s, int* out) {
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s.c_str(), &end, 0);
  if (s.empty() || *end != '\0' || errno != 0 || v < -(1l << 31) || v >= (1l << 31)) return false;
  *out = static_cast<int>(v);
  return true;
}

}  // namespace

Status parseSpec(const std::string& spec, weftCompressKind_t* kind, weftCompressorParams_t* p) {
  *p = defaultParams();
  const size_t colon = spec.find(':');
  const std::string name = spec.substr(0, colon);
  int k = -1;
  for (int i = 0; i < weftNumCompressKinds; ++i)
    if (name == kindName(static_cast<weftCompressKind_t>(i))) k = i;
  if (k < 0)
    return makeError(weftInvalidArgument,
                     "unknown compressor '%s': use onebit, powersgd, topk, fp16 or bf16 "
                     "(e.g. powersgd:rank=4, topk:ratio=0.01)",
                     name.c_str());
  *kind = static_cast<weftCompressKind_t>(k);
  std::string rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
  while (!rest.empty()) {
    const size_t comma = rest.find(',');
    const std::string item = rest.substr(0, comma);
    rest = comma == std::string::npos ? "" : rest.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      return makeError(weftInvalidArgument, "compressor option '%s' is not key=value",
                       item.c_str());
    const std::string key = item.substr(0, eq), val = item.substr(eq + 1);
    unsigned long long u = 0;
    bool ok = true;
    if (key == "ef") {
      ok = parseI32(val, &p->errorFeedback);
    } else if (key == "block") {
      ok = parseI32(val, &p->blockSize);
    } else if (key == "rank") {
      ok = parseI32(val, &p->rank);
    } else if (key == "rows") {
      ok = parseU64(val, &u);
      p->rows = u;
    } else if (key == "cols") {
      ok = parseU64(val, &u);
      p->cols = u;
    } else if (key == "rate") {
      ok = parseDouble(val, &p->minCompressionRate);
    } else if (key == "ratio") {
      ok = parseDouble(val, &p->ratio);
    } else if (key == "random") {
      ok = parseI32(val, &p->randomK);
    } else if (key == "seed") {
      ok = parseU64(val, &p->seed);
    } else {
      return makeError(weftInvalidArgument,
                       "unknown compressor option '%s' (known: ef, block, rank, rows, cols, rate, "
                       "ratio, random, seed)",
                       key.c_str());
    }
    if (!ok)
      return makeError(weftInvalidArgument, "compressor option %s has a bad value '%s'",
                       key.c_str(), val.c_str());
  }
  return validateParams(k, *p);
}

}  // namespace weft::compression
