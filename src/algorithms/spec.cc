#include "algorithms/spec.h"

#include <algorithm>
#include <cctype>

#include "algorithms/coll.h"

namespace weft {

namespace {
constexpr int kNumKinds = static_cast<int>(CollKind::Recv) + 1;
}  // namespace

std::string normalizeName(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '_' || c == '-' || std::isspace(static_cast<unsigned char>(c))) continue;
    out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return out;
}

SelectionSpec parseSelectionSpec(std::string_view spec, std::span<const std::string_view> names,
                                 const char* var) {
  const size_t numNames = std::min<size_t>(names.size(), 64);
  const uint64_t all = numNames == 64 ? ~0ull : (1ull << numNames) - 1;
  uint64_t general = all;
  bool hasGeneral = false;
  std::vector<uint64_t> specific(kNumKinds, 0);
  std::vector<bool> hasSpecific(kNumKinds, false);
  SelectionSpec out;
  auto warn = [&](std::string text) {
    if (out.warnings.size() < 16) out.warnings.push_back(std::string(var) + ": " + text);
  };

  std::string_view rest(spec);
  while (!rest.empty()) {
    const size_t semi = rest.find(';');
    std::string_view section = rest.substr(0, semi);
    rest = semi == std::string_view::npos ? std::string_view() : rest.substr(semi + 1);
    int kind = -1;
    if (const size_t colon = section.find(':'); colon != std::string_view::npos) {
      const std::string coll = normalizeName(section.substr(0, colon));
      for (int k = 0; k < kNumKinds; ++k) {
        if (coll == normalizeName(collName(static_cast<CollKind>(k)))) kind = k;
      }
      section = section.substr(colon + 1);
      if (kind < 0) {
        warn("unknown collective '" + coll.substr(0, 64) + "' ignored");
        continue;
      }
    }
    std::string list = normalizeName(section);
    if (kind < 0 && list.empty()) continue;  // "" or ";;": says nothing
    const bool exclude = !list.empty() && list[0] == '^';
    if (exclude) list.erase(0, 1);
    uint64_t named = 0;
    size_t pos = 0;
    while (pos <= list.size()) {
      const size_t comma = std::min(list.find(',', pos), list.size());
      const std::string_view name = std::string_view(list).substr(pos, comma - pos);
      pos = comma + 1;
      if (name.empty()) continue;
      uint64_t hit = 0;
      for (size_t i = 0; i < numNames; ++i) {
        if (name == normalizeName(names[i])) hit |= 1ull << i;
      }
      if (!hit) warn("unknown name '" + std::string(name.substr(0, 64)) + "' ignored");
      named |= hit;
    }
    const uint64_t mask = exclude ? (all & ~named) : named;
    if (kind < 0) {
      general = mask;
      hasGeneral = true;
    } else {
      specific[kind] = mask;
      hasSpecific[kind] = true;
    }
  }
  out.allowed.resize(kNumKinds);
  out.restricted.resize(kNumKinds);
  for (int k = 0; k < kNumKinds; ++k) {
    out.allowed[k] = hasSpecific[k] ? specific[k] : general;
    out.restricted[k] = hasSpecific[k] || hasGeneral;
  }
  return out;
}

}  // namespace weft
