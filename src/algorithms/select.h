// Algorithm selection internals that tests reach.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft {

// Parses a WEFT_ALGO value: for each CollKind, a mask of the algorithm table
// entries it allows (0: the default rule applies). Pure; for tests and fuzzing.
std::vector<uint32_t> parseAlgoSpec(const std::string& spec);

// Forgets the parsed WEFT_ALGO so that the next selectAlgorithm reads the
// environment again. For tests: it must not race with selectAlgorithm.
void resetAlgorithmSelectionForTesting();

}  // namespace weft
