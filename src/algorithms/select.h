// Algorithm selection internals that tests reach.
#pragma once

namespace weft {

// Forgets the parsed WEFT_ALGO so that the next selectAlgorithm reads the
// environment again. For tests: it must not race with selectAlgorithm.
void resetAlgorithmSelectionForTesting();

}  // namespace weft
