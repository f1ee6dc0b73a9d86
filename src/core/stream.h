// A host stream: the work posted on it, in the order it was posted, until
// weftStreamSynchronize takes it (c_api.cc). Plain collectives and the
// compressed allreduce both put their queued work here.
#pragma once

#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/work.h"

struct weftStream {
  std::mutex mu;
  std::vector<std::shared_ptr<weft::WorkState>> pending;

  void append(std::shared_ptr<weft::WorkState> work) {
    std::lock_guard<std::mutex> lock(mu);
    pending.push_back(std::move(work));
  }
};
