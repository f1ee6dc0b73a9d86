// A resumable algorithm stage: a C++20 coroutine that runs until it would
// wait for a peer (co_yield false: nothing moved) or has moved something
// and lets others run (co_yield true), and ends with co_return Status.
//
// A blocking algorithm waits inside its own loop, so a caller cannot start a
// second one on other channels while the first waits: hier allreduce's
// stages (within the host, across hosts) would run one after another. As
// stages, they take turns on one thread (runStages), each polling its own
// channels, and one waits only when none can move. runStage runs a single
// stage to its end as the blocking call did.
#pragma once

#include <coroutine>
#include <exception>
#include <span>
#include <utility>

#include "algorithms/coll.h"
#include "base/status.h"

namespace weft::algo {

class [[nodiscard]] Stage {
 public:
  struct promise_type {
    Status result;
    bool moved = false;
    Stage get_return_object() {
      return Stage(std::coroutine_handle<promise_type>::from_promise(*this));
    }
    std::suspend_always initial_suspend() noexcept { return {}; }
    std::suspend_always final_suspend() noexcept { return {}; }
    std::suspend_always yield_value(bool movedSomething) noexcept {
      moved = movedSomething;
      return {};
    }
    void return_value(Status s) { result = std::move(s); }
    // Algorithms report errors as Status and do not throw; an exception here
    // is a bug (or allocation failure), as it is for the blocking calls.
    void unhandled_exception() noexcept { std::terminate(); }
  };

  Stage() = default;
  Stage(Stage&& o) noexcept : h_(std::exchange(o.h_, {})) {}
  Stage& operator=(Stage&& o) noexcept {
    if (this != &o) {
      if (h_) h_.destroy();
      h_ = std::exchange(o.h_, {});
    }
    return *this;
  }
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;
  ~Stage() {
    if (h_) h_.destroy();
  }

  // Runs until the stage yields or ends; true when it moved something (an
  // ending counts as moving).
  bool resume() {
    if (done()) return false;
    h_.promise().moved = false;
    h_.resume();
    return h_.done() || h_.promise().moved;
  }
  bool done() const { return !h_ || h_.done(); }
  // The stage's result once done().
  const Status& status() const { return h_.promise().result; }

 private:
  explicit Stage(std::coroutine_handle<promise_type> h) : h_(h) {}
  std::coroutine_handle<promise_type> h_;
};

// Runs one stage to its end, waiting with `progress` when it cannot move.
Status runStage(Stage stage, Progress& progress);
// Runs the stages to their ends, each resumed in turn, waiting only when
// none moved. The first error ends the run (the other stages are left where
// they are, as a blocking algorithm leaves its loop). Stages that run
// together must use different channels, or the same ones in an order both
// ends agree on.
Status runStages(std::span<Stage> stages, Progress& progress);

// Inside a stage: co_return a failed Status.
#define WEFT_CO_RETURN_IF_ERROR(expr)                       \
  do {                                                      \
    ::weft::Status weft_co_status_ = (expr);                \
    if (!weft_co_status_.isOk()) co_return weft_co_status_; \
  } while (0)

// Inside a stage: runs another stage to its end, yielding whenever it does.
#define WEFT_CO_AWAIT_STAGE(expr)                                     \
  do {                                                                \
    ::weft::algo::Stage weft_inner_ = (expr);                         \
    while (!weft_inner_.done()) co_yield weft_inner_.resume();        \
    if (!weft_inner_.status().isOk()) co_return weft_inner_.status(); \
  } while (0)

}  // namespace weft::algo
