// Appends tasks and their dependencies to a Plan, stage by stage, in issue
// order. It keeps the stage's compute chain (each chained task waits for the
// tasks the chain ends in, and for extra references queued for it), and holds
// references to tasks of other stages until every stage is written: the send
// a receiver waits for, and the point at which a receiver posts its receive
// (what a blocking send waits for), and, for a blocking receive, the point at
// which the sender posts its send. Used by the plan builder only.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <span>
#include <vector>

#include "sim/plan/plan.h"

namespace sextant::sim {

inline constexpr std::uint32_t kNoTask = std::numeric_limits<std::uint32_t>::max();

/// A dependency: a task, or one of another stage's tasks looked up by its
/// pipeline key (direction, stage, chunk, micro-batch) once all are written.
struct DepRef {
  enum class Kind : std::uint8_t { kTask, kSend, kReceivePosted, kSendPosted };
  Kind kind;
  std::uint32_t value;  // task id, or pipeline key
  static DepRef task(std::uint32_t id) { return {Kind::kTask, id}; }
};

class TaskWriter {
 public:
  /// `pipeline_keys`: how many pipeline keys the send and receive tables hold.
  TaskWriter(Plan& plan, std::size_t pipeline_keys);

  /// Starts a stage with an empty chain.
  void begin_stage();

  /// Appends `task` waiting for `deps`. A kReceivePosted reference to a
  /// receiver with nothing before its receive resolves to `fallback`.
  std::uint32_t add(const Task& task, std::span<const DepRef> deps,
                    std::uint32_t fallback = kNoTask);
  /// Appends `task` to the chain: it waits for what the chain ends in and the
  /// queued references, and becomes the chain's end.
  std::uint32_t chain(const Task& task);
  /// What the next chained task would wait for.
  std::vector<DepRef> chain_deps() const;
  /// The next chained task waits for `ref` too.
  void also_wait_for(DepRef ref) { pending_.push_back(ref); }
  /// The chain also ends in `id` (a task running beside it).
  void join_chain(std::uint32_t id) { frontier_.push_back(id); }
  /// The chain ends in `ids`.
  void set_chain(std::initializer_list<std::uint32_t> ids) { frontier_.assign(ids); }
  const std::vector<std::uint32_t>& chain_ends() const { return frontier_; }
  /// A chain's state, so that two passes can be written interleaved, each on
  /// its own chain (the combined forward-backward step of moe_a2a_overlap).
  struct Chain {
    std::vector<std::uint32_t> frontier;
    std::vector<DepRef> pending;
    std::uint32_t tail = kNoTask;
  };
  Chain save_chain() const { return {frontier_, pending_, tail_}; }
  void restore_chain(const Chain& c) {
    frontier_ = c.frontier;
    pending_ = c.pending;
    tail_ = c.tail;
  }
  /// The chain ends in what it ends in and in what `other` ends in.
  void merge_chain(const Chain& other) {
    frontier_.insert(frontier_.end(), other.frontier.begin(), other.frontier.end());
    pending_.insert(pending_.end(), other.pending.begin(), other.pending.end());
  }
  /// The last chained task (what joined the chain beside it excluded).
  std::uint32_t tail() const { return tail_; }
  std::uint32_t last_compute() const { return last_compute_; }

  void record_send(std::uint32_t key, std::uint32_t task) { send_[key] = task; }
  /// The send of `key` is posted once `task` (the sender's chain before it) is done.
  void record_send_posted(std::uint32_t key, std::uint32_t task) { send_posted_[key] = task; }
  /// The receive of `key` is posted once the chain so far is done.
  void record_receive_posted(std::uint32_t key) { posted_[key] = tail_; }

  /// Fills in every reference to another stage. Throws std::logic_error when
  /// a receive has no send.
  void resolve();

 private:
  struct Fixup {
    std::uint32_t position;  // in Plan::deps
    DepRef ref;
    std::uint32_t fallback;
  };

  Plan& plan_;
  std::vector<std::uint32_t> frontier_;  // what the chain ends in
  std::vector<DepRef> pending_;          // what the next chained task waits for too
  std::vector<DepRef> scratch_;          // chain()'s dependencies, reused task to task
  std::uint32_t tail_ = kNoTask;
  std::uint32_t last_compute_ = kNoTask;
  std::vector<std::uint32_t> send_;    // by pipeline key
  std::vector<std::uint32_t> posted_;  // by pipeline key
  std::vector<std::uint32_t> send_posted_;  // by pipeline key (sequential exchange only)
  std::vector<Fixup> fixups_;
};

}  // namespace sextant::sim
