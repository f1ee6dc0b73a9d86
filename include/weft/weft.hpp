// weft C++ API: RAII communicators and asynchronous work handles.
//
// Every collective is posted to the communicator's progress engine and
// returns a Work at once; wait() blocks (and lets the caller drive progress
// itself, so a small collective costs no thread hand-off), test() polls.
// Errors are thrown as weft::Error carrying the weftResult_t.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "weft/weft.h"

namespace weft {

class Error : public std::runtime_error {
 public:
  Error(weftResult_t code, const std::string& what) : std::runtime_error(what), code_(code) {}
  weftResult_t code() const noexcept { return code_; }

 private:
  weftResult_t code_;
};

template <class T>
constexpr weftDataType_t dtypeOf() {
  if constexpr (std::is_same_v<T, int8_t>)
    return weftInt8;
  else if constexpr (std::is_same_v<T, uint8_t>)
    return weftUint8;
  else if constexpr (std::is_same_v<T, int32_t>)
    return weftInt32;
  else if constexpr (std::is_same_v<T, uint32_t>)
    return weftUint32;
  else if constexpr (std::is_same_v<T, int64_t>)
    return weftInt64;
  else if constexpr (std::is_same_v<T, uint64_t>)
    return weftUint64;
  else if constexpr (std::is_same_v<T, float>)
    return weftFloat32;
  else if constexpr (std::is_same_v<T, double>)
    return weftFloat64;
  else
    static_assert(sizeof(T) == 0, "no weft dtype for this type; use the void* overloads");
}

struct WorkState;  // internal

// A handle to one posted collective. Copyable; all copies see the same work.
class Work {
 public:
  Work() = default;
  explicit Work(std::shared_ptr<WorkState> state) : state_(std::move(state)) {}
  // True once the collective has finished; throws weft::Error if it failed.
  bool test();
  // Blocks until the collective finishes; throws weft::Error if it failed.
  void wait();
  // As wait(), but gives up after timeout and returns false (the collective
  // keeps running; wait again or abort the communicator).
  bool wait(std::chrono::milliseconds timeout);
  // Gives this collective its own timeout, counted from now: if it has not
  // finished by then it fails with weftTimeout (weft::Error from wait), on
  // every rank, as the communicator's timeout would. Unlike wait(timeout),
  // which only stops waiting, this ends the collective.
  void setTimeout(std::chrono::milliseconds timeout);
  // weftSuccess, weftInProgress, or the error the collective ended with.
  weftResult_t status() const;

 private:
  std::shared_ptr<WorkState> state_;
};

class Comm {
 public:
  static weftUniqueId uniqueId();
  static Comm initRank(int nranks, const weftUniqueId& id, int rank,
                       weftConfig_t* config = nullptr);
  static Comm fromEnv(weftConfig_t* config = nullptr);
  // Takes ownership of a communicator made through the C API.
  explicit Comm(weftComm_t comm) : comm_(comm) {}
  Comm(Comm&& other) noexcept : comm_(other.comm_) { other.comm_ = nullptr; }
  Comm& operator=(Comm&& other) noexcept;
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;
  ~Comm();  // finalizes and destroys; errors are swallowed (use finalize()).

  int rank() const;
  int size() const;
  weftComm_t handle() const { return comm_; }

  Comm split(int color, int key, weftConfig_t* config = nullptr);
  void finalize();  // waits for posted work; throws if any failed
  void abort();     // unblocks every rank; the communicator is unusable after

  Work allReduce(const void* send, void* recv, size_t count, weftDataType_t dtype, weftRedOp_t op);
  Work broadcast(const void* send, void* recv, size_t count, weftDataType_t dtype, int root);
  Work reduce(const void* send, void* recv, size_t count, weftDataType_t dtype, weftRedOp_t op,
              int root);
  Work allGather(const void* send, void* recv, size_t sendcount, weftDataType_t dtype);
  Work reduceScatter(const void* send, void* recv, size_t recvcount, weftDataType_t dtype,
                     weftRedOp_t op);
  Work allToAll(const void* send, void* recv, size_t count, weftDataType_t dtype);
  // Per-peer counts and displacements in elements (see weftAllToAllv).
  Work allToAllv(const void* send, const size_t* sendcounts, const size_t* sdispls, void* recv,
                 const size_t* recvcounts, const size_t* rdispls, weftDataType_t dtype);
  Work gather(const void* send, void* recv, size_t count, weftDataType_t dtype, int root);
  Work scatter(const void* send, void* recv, size_t count, weftDataType_t dtype, int root);
  Work send(const void* buf, size_t count, weftDataType_t dtype, int peer);
  Work recv(void* buf, size_t count, weftDataType_t dtype, int peer);

  template <class T>
  Work allReduce(std::span<const T> send, std::span<T> recv, weftRedOp_t op = weftSum) {
    checkSameSize(send.size(), recv.size());
    return allReduce(send.data(), recv.data(), send.size(), dtypeOf<T>(), op);
  }
  template <class T>
  Work allReduce(std::span<T> inplace, weftRedOp_t op = weftSum) {
    return allReduce(inplace.data(), inplace.data(), inplace.size(), dtypeOf<T>(), op);
  }
  template <class T>
  Work broadcast(std::span<T> buf, int root) {
    return broadcast(buf.data(), buf.data(), buf.size(), dtypeOf<T>(), root);
  }

 private:
  static void checkSameSize(size_t a, size_t b);
  weftComm_t comm_ = nullptr;
};

// Compressed allreduce on one gradient buffer (see weft.h): the compressor
// owns that buffer's error-feedback residuals and warm-start state, so use
// one per buffer for the whole run. allReduce blocks until it is done;
// allReduceAsync returns a Work to wait on, so that the compressed allreduce
// overlaps with compute.
//
//   weft::Compressor c(comm, "powersgd:rank=4");   // or (comm, kind, params)
//   c.allReduce(std::span<float>(grad));           // average over ranks
class Compressor {
 public:
  Compressor(Comm& comm, weftCompressKind_t kind, const weftCompressorParams_t* params = nullptr);
  Compressor(Comm& comm, const std::string& spec);
  Compressor(Compressor&& other) noexcept : c_(other.c_), comm_(other.comm_) { other.c_ = nullptr; }
  Compressor& operator=(Compressor&& other) noexcept;
  Compressor(const Compressor&) = delete;
  Compressor& operator=(const Compressor&) = delete;
  ~Compressor();

  void allReduce(const void* send, void* recv, size_t count, weftDataType_t dtype,
                 weftRedOp_t op = weftAvg);
  template <class T>
  void allReduce(std::span<T> inplace, weftRedOp_t op = weftAvg) {
    allReduce(inplace.data(), inplace.data(), inplace.size(), dtypeOf<T>(), op);
  }
  // Queued on the communicator's progress engine behind everything posted
  // before it, like Comm's collectives; returns at once. The buffers must
  // stay untouched, and this compressor alive, until the Work is done; calls
  // on one compressor run in the order they were made (reset() and the
  // destructor wait for them).
  Work allReduceAsync(const void* send, void* recv, size_t count, weftDataType_t dtype,
                      weftRedOp_t op = weftAvg);
  template <class T>
  Work allReduceAsync(std::span<T> inplace, weftRedOp_t op = weftAvg) {
    return allReduceAsync(inplace.data(), inplace.data(), inplace.size(), dtypeOf<T>(), op);
  }
  weftCompressorStats_t stats() const;
  void reset();
  weftCompressor_t handle() const { return c_; }

 private:
  weftCompressor_t c_ = nullptr;
  weftComm_t comm_ = nullptr;
};

}  // namespace weft
