// Fuzzes the tuner's parsers of outside text: the calibration file
// (WEFT_TUNER_FILE) and the WEFT_ALGO / WEFT_PROTO selection syntax. The
// first byte picks the parser.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "algorithms/spec.h"
#include "algorithms/tuner.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  switch (data[0] % 3) {
    case 0: {
      std::string why;
      const auto p = weft::parseTunerFile(text, weft::defaultTunerParams(), &why);
      // Whatever parses is a usable machine description, and survives a
      // round trip unchanged.
      if (p) {
        if (!weft::tunerParamsValid(*p)) __builtin_trap();
        const auto again =
            weft::parseTunerFile(weft::formatTunerFile(*p), weft::defaultTunerParams(), nullptr);
        if (!again || !weft::tunerParamsValid(*again)) __builtin_trap();
      } else if (why.empty()) {
        __builtin_trap();
      }
      break;
    }
    case 1: {
      const std::string_view names[] = {"ring", "direct", "chain", "tree", "simple", "cma"};
      const auto spec = weft::parseSelectionSpec(text, names, "WEFT_ALGO");
      for (uint64_t m : spec.allowed) {
        if (m >> 6) __builtin_trap();  // only the names given
      }
      if (spec.allowed.size() != spec.restricted.size() || spec.warnings.size() > 16)
        __builtin_trap();
      break;
    }
    case 2: {
      // Both variables at once against the real table; then a choice.
      const size_t cut = text.size() / 2;
      const auto r = weft::parseRestrictions(text.substr(0, cut), text.substr(cut),
                                             weft::allAlgorithms(), false);
      weft::TunerShape shape;
      shape.nranks = 1 + static_cast<int>(data[0] % 9);
      shape.ranksPerHost = shape.nranks;
      shape.canPublish = shape.nranks > 1;
      shape.directMinBytes = 64 << 10;
      for (int k = 0; k <= static_cast<int>(weft::CollKind::Recv); ++k) {
        const auto c = weft::chooseFor(static_cast<weft::CollKind>(k), size * 997, shape,
                                       weft::defaultTunerParams(), weft::allAlgorithms(), r);
        if (c.alg == nullptr || static_cast<int>(c.alg->kind) != k) __builtin_trap();
      }
      break;
    }
  }
  return 0;
}
