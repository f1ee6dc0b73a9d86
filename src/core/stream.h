// A host stream: the work posted on it, in the order it was posted, until
// weftStreamSynchronize takes it (c_api.cc). Plain collectives and the
// compressed allreduce both put their queued work here.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "core/work.h"

struct weftStream {
  static constexpr size_t kMinCompact = 64;
  std::mutex mu;
  std::vector<std::shared_ptr<weft::WorkState>> pending;
  // pending's size at which append next drops finished work.
  size_t compactAt = kMinCompact;

  // Work that finished without error tells a later synchronize or query
  // nothing, so append drops it once pending has grown to compactAt, and
  // compactAt follows what stays (twice it, amortised O(1) per call). A
  // stream that is synchronized rarely or never (a loop that only queries
  // it) so holds the work still queued or running, not every call it ever
  // had. Failed work stays until a synchronize or query reports it.
  void append(std::shared_ptr<weft::WorkState> work) {
    std::lock_guard<std::mutex> lock(mu);
    if (pending.size() >= compactAt) {
      std::erase_if(pending, [](const std::shared_ptr<weft::WorkState>& w) {
        return w->done.load(std::memory_order_acquire) && w->result.isOk();
      });
      compactAt = std::max(kMinCompact, 2 * pending.size());
    }
    pending.push_back(std::move(work));
  }
};
