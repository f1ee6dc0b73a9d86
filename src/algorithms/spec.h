// The parser shared by WEFT_ALGO and WEFT_PROTO (NCCL_ALGO/NCCL_PROTO
// syntax), a pure function so that tests and a fuzzer can drive it.
//
// Case-insensitive; '_', '-' and blanks are ignored ("All_Reduce" is
// "allreduce"). A comma list allows only those names ("ring,direct"), a
// leading '^' excludes them ("^direct"), and ';'-separated sections may name
// a collective ("allreduce:tree,ring;broadcast:^chain"). A section naming a
// collective overrides a plain one for that collective; of two sections for
// the same target the later wins. Unknown collectives and names are reported
// in `warnings` and otherwise ignored.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

struct SelectionSpec {
  // Per collective (index = CollKind): bit i set allows names[i].
  std::vector<uint64_t> allowed;
  // Per collective: true when the spec said something about it (a plain
  // section or one naming it); false leaves everything allowed.
  std::vector<bool> restricted;
  std::vector<std::string> warnings;
};

// `names` (at most 64) are the values the variable may list; `var` names the
// variable in warnings ("WEFT_ALGO").
SelectionSpec parseSelectionSpec(std::string_view spec, std::span<const std::string_view> names,
                                 const char* var);

// Lower case without '_', '-' and blanks.
std::string normalizeName(std::string_view s);

}  // namespace weft
