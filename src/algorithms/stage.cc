// Running stages (stage.h): alone, or several taking turns on one thread.
#include "algorithms/stage.h"

namespace weft::algo {

Status runStage(Stage stage, Progress& progress) {
  return runStages(std::span<Stage>(&stage, 1), progress);
}

Status runStages(std::span<Stage> stages, Progress& progress) {
  for (;;) {
    bool moved = false, running = false;
    for (Stage& s : stages) {
      if (s.done()) continue;
      moved |= s.resume();
      if (s.done() && !s.status().isOk()) return s.status();
      running |= !s.done();
    }
    if (!running) return Status::ok();
    if (moved) {
      progress.made();
    } else {
      WEFT_RETURN_IF_ERROR(progress.idle());
    }
  }
}

}  // namespace weft::algo
