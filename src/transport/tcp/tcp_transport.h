// TCP transport between ranks that do not share memory (other hosts, other
// network namespaces, or any rank with WEFT_SHM_DISABLE=1).
//
// Per pair of ranks the lower rank opens `nsocks` data sockets to the
// higher rank's listener, and each rank opens one control socket to the
// other. A data socket carries both directions: TCP then piggybacks the
// acknowledgement of what one rank sent on what the other sends back, where
// one socket per direction had to answer every small frame with an
// acknowledgement packet of its own (one more trip through the network stack
// on each side, about 2.5 us of an 8-byte exchange on loopback, and more for
// larger ones). On a veth or loopback link (no RSS) this reorders a little:
// a rank's frames leave both from its own sends and from the softirq that
// takes in the peer's frames, on the peer's CPU, and each CPU queues what it
// sends in a backlog of its own. A 64 MiB sendrecv between two network
// namespaces (25 calls) saw 600-3900 segments resent, nearly all reported
// spurious (DSACK), where iperf3's one-way sockets saw 0-1; with RPS on the
// veths (each flow's packets on one CPU, as a NIC's RSS does) 1-5, at the
// same busbw (1.55-1.95 GB/s against 1.40-2.65), so the reordering costs
// no bandwidth there. A channel has `slots` local staging slots on each side:
// commit() queues a slot for the wire and the receiver's slots are filled
// from the sockets. Consecutive chunks go out on different sockets in
// parallel (striping): each chunk goes to the socket with the fewest chunks
// waiting for the kernel to take them, the next one in turn on a tie. So a
// socket whose connection runs slower (a loaded path, an unlucky share of a
// link) carries fewer chunks, where fixed turns held every socket to the
// slowest one's pace. Each frame carries a checked header (wire.h) with its
// slot number, and the receiver places it by that.
//
// No helper threads: the sockets are non-blocking and move when a channel is
// polled (tryAcquire/commit/tryPeek/drained move that channel's sockets), when
// the algorithm idles (progress(): every pending send, and every socket epoll
// reports ready) and when it naps (wait(): epoll_pwait2 instead of a sleep, so
// arriving data wakes it at once).
//
// The control socket carries kAbort (this rank poisoned the communicator) and
// kClose (this rank leaves normally). EOF or an error on any socket of a peer
// without a kClose first means the peer died.
//
// Fewer copies: commitFrom() sends straight from the algorithm's memory
// (sendmsg gathers the header and the caller's bytes), and land() lets a
// receive read a payload from the socket straight into its destination, so
// a byte moved between user buffers is copied twice (once by each kernel),
// as by iperf3, not four times. Landing a receive larger than the cache
// makes the kernel read each line of the destination before writing it;
// reading into staging (in cache) and streaming it out with non-temporal
// stores instead was tried for p2p receives above the stream threshold:
// sendrecv of 64 MiB between two network namespaces, 12 alternating rounds,
// busbw median 1.62 GB/s against 1.65 landed (two earlier sets of 6 rounds
// had favoured it 2.18 to 2.02 and 2.24 to 1.44), and over loopback 1.79
// against 1.98 (8 rounds): no gain that holds, so receives still land.
//
// MSG_ZEROCOPY is not used: on loopback and veth the kernel copies anyway
// (the pages are not handed to a NIC), and completions cost an extra syscall
// per send; for chunks of a few hundred KiB a copy into the socket buffer is
// cheaper.
// On a NIC the pages stay pinned until the peer acknowledges them (TCP keeps
// them for retransmission), so a collective sending from the caller's
// buffers (commitFrom) could only return after the last ACK: a round trip
// at best, a delayed ACK (up to 40 ms) at worst, where today it returns once
// the kernel holds a copy.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <sys/types.h>

struct epoll_event;

#include "base/page_buffer.h"
#include "bootstrap/bootstrap.h"
#include "transport/channel.h"
#include "transport/tcp/wire.h"

namespace weft {

struct TcpOptions {
  uint32_t nsocks = 2;  // WEFT_NSOCKS_PERTHREAD x WEFT_SOCKET_NTHREADS
  // WEFT_TCP_SLOTS: chunks in flight per peer and direction. Slot s is read
  // only once slot s - slots was released, so this also bounds how far the
  // chunks on one socket may run ahead of those on another. With 8, and
  // chunks still dealt to the sockets in fixed turns, sendrecv over a
  // 10 Gbit/s veth got 0.64-0.73 of iperf3 (both ways), against 0.85-0.97
  // with 16.
  uint32_t slots = 16;
  size_t slotBytes = 256 << 10;  // the communicator's chunk size
  // WEFT_SOCKET_BUF_BYTES: SO_SNDBUF/SO_RCVBUF (at least 64K); 0 = kernel autotuning.
  int bufBytes = 0;
  // WEFT_SOCKET_CC: the sockets' congestion control (TCP_CONGESTION);
  // "system" leaves the kernel's default. Cubic by default, not the host's
  // BBR: a collective's bursts lose a few segments even on loopback (ss
  // showed retransmissions, drops and ssthresh 8 on the sockets the double
  // binary tree had used), and BBR then kept those connections below their
  // earlier rate for at least the next 60 calls: 4 ranks over TCP on 2
  // CPUs, allreduce 8 MiB with recursive halving/doubling, mean of its
  // 31st-60th calls, 4 alternating runs each, after 9 calls of the tree
  // among its own: BBR 8.4-9.1 ms against 6.2-6.9 without the tree; cubic
  // 6.1-6.9 against 6.2-6.4.
  std::string congestion = "cubic";
  // Whether congestion came from the environment (a failure to set it is
  // then a warning, not a note).
  bool congestionAsked = false;
  // slotBytes: the chunk of the communicator these channels serve (shared
  // with its shm channels when it has any, else tcpOnlySlotBytes()).
  static TcpOptions fromEnv(size_t slotBytes);
};

// The chunk of a communicator whose ranks all talk TCP (one rank per host,
// or WEFT_SHM_DISABLE=1): WEFT_TCP_SLOT_BYTES, default 512 KiB, twice the
// shared-memory slot. Fewer, larger socket writes: allreduce, 2 ranks over
// TCP loopback, median of 7 alternating rounds, 256 -> 512 KiB: 2 MiB
// 551 -> 504 us, 8 MiB 2514 -> 2350, 32 MiB 11132 -> 10260.
size_t tcpOnlySlotBytes();

class TcpTransport;

// A channel's staging buffers (slots x slotBytes), handed out most recently
// given back first. A slot number is not tied to one buffer: with few chunks
// in flight the same few buffers come round again while still in cache,
// where slot i's own buffer walked every pass through all of them (16 x
// 256 KiB per channel and direction, more than this host's 2 MiB of L2 per
// core). Allreduce, 2 ranks over TCP loopback, median of 15 alternating
// runs, time before/after: 128-256 KiB 1.10-1.11, 512 KiB-4 MiB 0.99-1.02,
// 8 MiB 1.07 (2 ranks move no chunk through send staging; a ring of 3 or
// more reduces into it).
class StagingPool {
 public:
  StagingPool(char* base, uint32_t count, size_t bytes) {
    if (base == nullptr) return;
    for (uint32_t i = count; i-- > 0;) free_.push_back(base + i * bytes);
  }
  // The caller holds fewer buffers than there are, so one is free.
  char* take() {
    char* b = free_.back();
    free_.pop_back();
    return b;
  }
  void give(char* b) { free_.push_back(b); }

 private:
  std::vector<char*> free_;
};

// What the transport knows about one remote peer.
struct TcpPeer {
  int rank = -1;
  std::vector<int> dataFds;  // data sockets, both directions
  int ctrlOut = -1;          // we send control frames here
  int ctrlIn = -1;           // the peer's control frames arrive here
  bool closed = false;       // the peer said kClose: it leaves normally
  bool dataEof = false;      // EOF or an error on a data socket: stop using them
  bool ctrlEof = false;      // EOF or an error on its control socket
  bool malformed = false;    // it sent something that is not weft's protocol
  std::string why;           // what happened
  bool stopped() const { return dataEof || malformed; }
  bool dead() const { return malformed || (ctrlEof && !closed); }
  unsigned char ctrlBuf[sizeof(tcp::FrameHeader)] = {};
  size_t ctrlGot = 0;
};

class TcpSendChannel final : public SendChannel {
 public:
  TcpSendChannel(TcpTransport& t, TcpPeer& peer, const TcpOptions& o);
  void* tryAcquire() override;
  void commit(size_t bytes) override;
  void commitFrom(void* slot, const void* src, size_t bytes) override;
  size_t slotBytes() const override { return slotBytes_; }
  bool sourcesInUse() override {
    progress();
    return pending();
  }
  bool readsSourceLater() const override { return true; }
  bool readsFrom(const void* p, size_t bytes) override;
  void moveSources(const void* from, size_t bytes, const void* to) override;
  bool drained() override;
  bool ok() const { return buf_ != nullptr; }
  // Writes what the sockets take; true if any byte moved.
  bool progress();
  bool pending() const;
  // Chunks that went to another socket than the next in turn, because that
  // one had more waiting.
  uint64_t chunksOffTurn() const { return offTurn_; }

 private:
  struct Sock {
    std::vector<uint64_t> queued;  // ring of the slot numbers it sends, oldest first
    uint32_t first = 0, count = 0;
    size_t offset = 0;   // bytes of header + payload of the oldest already sent
    bool armed = false;  // registered for EPOLLOUT
  };
  bool slotFree(uint64_t seq) const { return !unsent_[seq % nslots_]; }
  void queue(size_t bytes, const char* src);
  TcpTransport& t_;
  TcpPeer& peer_;
  uint32_t nslots_, nsocks_;
  size_t slotBytes_;
  PageBuffer buf_;  // the staging slots, page-aligned (base/page_buffer.h)
  StagingPool stagingPool_;
  std::vector<tcp::FrameHeader> headers_;  // per slot
  std::vector<const char*> payload_;       // per slot: the bytes to send (staging or the caller's)
  std::vector<char*> staging_;             // per slot: its staging buffer until the kernel took it
  std::vector<char> unsent_;               // per slot: queued, not all taken by the kernel yet
  std::vector<Sock> socks_;
  char* acquired_ = nullptr;  // the buffer tryAcquire handed out for slot head_
  uint64_t head_ = 0;         // next slot to hand out
  uint32_t nextSock_ = 0;     // the socket that gets the next chunk on a tie
  uint64_t offTurn_ = 0;
};

class TcpRecvChannel final : public RecvChannel {
 public:
  TcpRecvChannel(TcpTransport& t, TcpPeer& peer, const TcpOptions& o);
  const void* tryPeek(size_t* bytes) override;
  void release() override;
  bool canLand() const override { return true; }
  void land(void* dst, size_t capacity) override;
  void clearLandings() override;
  bool ok() const { return buf_ != nullptr; }
  // Reads what socket k has for the free slots; true if any byte moved.
  bool progressSocket(uint32_t k);
  bool progress();
  // Socket k reached its end (EOF or an error).
  bool socketEnded(uint32_t k) const { return socks_[k].ended; }

 private:
  struct Sock {
    uint64_t minSeq = 0;      // its next frame's slot number is at least this
    uint64_t seq = 0;         // the slot number of the frame being read
    bool haveHeader = false;  // seq's header is read; its slot is not free yet
    bool inPayload = false;
    size_t got = 0;  // bytes of the header or payload read so far
    unsigned char header[sizeof(tcp::FrameHeader)] = {};
    size_t payload = 0;
    char* dest = nullptr;        // where the payload being read goes
    bool ended = false;          // EOF or error: nothing more comes on it
    bool paused = false;         // out of the epoll set until seq's slot is free
    bool drained = false;        // the last read found it empty: epoll says when to read
    std::array<char, 4096> pre;  // bytes read ahead of the frame being parsed
    size_t preOff = 0, preLen = 0;
  };
  ssize_t pull(Sock& s, int fd, char* to, size_t want, bool header);
  // The staging buffer of slot index `slot`, taking one from the pool if it
  // has none.
  char* stageIn(uint32_t slot);
  bool filled(uint64_t seq) const { return complete_[seq % nslots_] == seq; }
  TcpTransport& t_;
  TcpPeer& peer_;
  uint32_t nslots_, nsocks_;
  size_t slotBytes_;
  PageBuffer buf_;  // the staging slots, page-aligned (base/page_buffer.h)
  StagingPool stagingPool_;
  std::vector<size_t> bytes_;       // per slot
  std::vector<char*> landedAt_;     // per slot: where its payload went (nullptr: staging)
  std::vector<char*> staging_;      // per slot: its staging buffer until released
  std::vector<uint64_t> claimed_;   // per slot: the last slot number a socket started on it
  std::vector<uint64_t> complete_;  // per slot: the last slot number whose payload is in
  struct Landing {
    char* dst;
    size_t capacity;
  };
  std::deque<Landing> landings_;  // [i] names slot tail_ + i
  std::vector<Sock> socks_;
  uint64_t tail_ = 0;  // next slot to read
};

enum class TcpPeerState { kAlive, kClosed, kDead };

class TcpTransport {
 public:
  // Collective over the bootstrap: every rank calls it. `remote[p]` says
  // whether peer p is reached over TCP (symmetric across ranks).
  static Status create(Bootstrap& bootstrap, const TcpOptions& options,
                       const std::vector<bool>& remote, const net::SockAddr& listenAt,
                       std::unique_ptr<TcpTransport>* out);
  ~TcpTransport();

  SendChannel& sendTo(int peer) { return *send_[peer]; }
  RecvChannel& recvFrom(int peer) { return *recv_[peer]; }
  const net::SockAddr& listenAddress() const { return listenAddr_; }

  // Moves pending sends and every socket epoll reports ready; true if
  // anything moved. Only the thread running collectives calls it.
  bool progress();
  // Blocks up to ns nanoseconds for socket activity, then progresses.
  void wait(long ns);
  bool pendingSends() const;
  // RecvChannel::clearLandings on every channel.
  void clearLandings();

  int abortedBy() const { return abortedBy_.load(std::memory_order_acquire); }
  // Why (weftTimeout, weftRemoteError, ...); weftSuccess while not poisoned.
  weftResult_t abortCode() const {
    return static_cast<weftResult_t>(abortCode_.load(std::memory_order_acquire));
  }
  // Cheap: true once some peer died (EOF without kClose) or sent garbage.
  bool anyPeerDead() const { return anyDead_.load(std::memory_order_acquire); }
  // Sends kAbort to every peer (any thread).
  void poison(int byRank, weftResult_t why = weftRemoteError);
  // Sends kClose to every peer.
  void markClosed();
  TcpPeerState peerState(int peer, std::string* why) const;

  // Used by the channels.
  // A data socket of `peer` ended or failed: whether the peer left normally
  // or died is decided by its control socket.
  void dataEnded(TcpPeer& peer, const std::string& why);
  void malformed(TcpPeer& peer, const std::string& why);
  void recvSocketEnded(TcpPeer& peer, int fd, const std::string& why);
  // Whether epoll reports a data socket readable (for its receive channel)
  // and writable (for its send channel); errors are always reported.
  void wantReadable(int fd, bool on);
  void wantWritable(int fd, bool on);

 private:
  TcpTransport() = default;
  void handleEvents(const ::epoll_event* events, int n);
  void setInterestBit(int fd, uint32_t bit, bool on);
  void noteDead(TcpPeer& peer);
  void unwatch(TcpPeer& peer, bool data, bool control);
  void readControl(TcpPeer& peer);
  void sendControl(tcp::FrameType type, uint64_t seq);

  struct FdRef {
    int kind;  // 0 listener, 1 recv data, 2 control in, 3 send data / control out
    int peer;
    uint32_t index;
  };
  int rank_ = 0;
  int nranks_ = 0;
  int epfd_ = -1;
  net::Socket listener_;
  net::SockAddr listenAddr_;
  std::vector<TcpPeer> peers_;      // [rank]; rank < 0 for peers not on TCP
  std::vector<FdRef> fdRefs_;       // epoll data.u64 indexes this
  std::vector<uint64_t> refOfFd_;   // fd -> index into fdRefs_
  std::vector<uint32_t> interest_;  // fd -> the events epoll reports for it
  std::vector<std::unique_ptr<TcpSendChannel>> send_;
  std::vector<std::unique_ptr<TcpRecvChannel>> recv_;
  std::vector<TcpSendChannel*> sendList_;
  std::atomic<int> abortedBy_{0};
  std::atomic<int> abortCode_{weftSuccess};
  std::atomic<bool> anyDead_{false};
  std::mutex controlMu_;  // control frames may be sent from an aborting thread
  bool closedSent_ = false;
};

}  // namespace weft
