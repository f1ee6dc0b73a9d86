// Algorithm selection internals that tests reach.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

// Parses a WEFT_ALGO value: for each CollKind, a mask of the algorithm table
// entries it allows (0: the default rule applies). Pure; for tests and fuzzing.
std::vector<uint32_t> parseAlgoSpec(const std::string& spec);

// Forgets the parsed WEFT_ALGO and WEFT_PROTO so that the next selection
// reads the environment again. For tests: it must not race with a selection.
void resetAlgorithmSelectionForTesting();

// Forgets the tuner parameters this process agreed on for earlier
// communicators, so that the next one calibrates or reads its file again.
void resetTunerCacheForTesting();

}  // namespace weft
