// What one pipeline rank executes, read from the Plan (sim/plan): its tasks in
// the Plan's order, the receives that feed them and the activation slots that
// hold the micro-batches in flight. Plain C++, so CI tests it without a GPU.
//
// The Plan has send tasks but no receive tasks: in the simulator a receive is
// a dependency (plan_builder.h, "the receive is posted once the stage's
// compute chain before the op is done"). The engine posts it at the same
// place: right before the first task of a pass (one chunk's forward or
// backward of one micro-batch) that does not start the model (forward of any
// virtual stage but the first) or end it (backward of any but the last).
//
// Exchanges (Communicator::exchange, NCCL's group) are grouped as Megatron's
// schedules group their batched send/recv, because with blocking
// point-to-point (NCCL's and the in-process communicator's) another grouping
// can make two stages wait for each other: the pass sequence is cut into
// units — one pass each, or under interleaving a steady-state forward and the
// backward after it — and each unit's computation is followed by one exchange
// of its sends and the next unit's receives. Under 1F1B these are
// send_forward_recv_backward and send_backward_recv_forward
// (forward_backward_pipelining_without_interleaving); under interleaving
// send_forward_backward_recv_forward_backward
// (forward_backward_pipelining_with_interleaving), so a forward's output
// leaves after the backward beside it and a backward's input gradient arrives
// before the forward beside it. The sent and received buffers belong to slots
// no other pass touches meanwhile. stage_program_test.cc plays every schedule
// with blocking semantics and checks it completes, each message meeting the
// receive meant for it.
//
// Activation slots: a forward of (chunk, micro-batch) takes the lowest free
// slot of the stage and its backward frees it, so a stage needs as many slots
// as it has chunk-micro-batches in flight at the schedule's peak: min(pp − s,
// m) on stage s under 1F1B (Narayanan et al. 2021, Sec. 2.2.1); under
// interleaving, on stage s, Megatron's warm-up of (pp − s − 1)·2 + (vpp − 1)·pp
// chunk-forwards plus the steady state's one (forward_backward_pipelining_with_
// interleaving), whose stored activations are (1 + (pp − 1)/(pp·vpp)) times
// 1F1B's on stage 0 (Korthikanti et al. 2022, Sec. 4.2.3; Narayanan et al.
// 2021, Sec. 2.2; sim/memory/activation_memory.h counts the same). A slot
// serves every chunk in turn (the Trainer lays each chunk's buffers over
// the slot's memory, the residual stream's gradient first and at the same
// place for all, so a backward's sent gradient and the next forward's received
// input never overlap even when the forward takes the slot just freed).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/plan/plan.h"

namespace sextant::engine::pipeline {

enum class Direction { kForward, kBackward };

/// One activation (forward) or input-gradient (backward) transfer between
/// adjacent virtual stages, seen from this rank.
struct Transfer {
  Direction direction = Direction::kForward;
  int peer = 0;        // pp rank it goes to or comes from
  int chunk = 0;       // this rank's chunk whose buffer is sent or received into
  int microbatch = 0;
  int slot = 0;        // the activation slot of (chunk, microbatch)
};

struct StageAction {
  enum class Kind { kCompute, kExchange, kOptimizerStep };
  Kind kind = Kind::kCompute;
  /// The Plan task run (compute, optimizer), or for an exchange with sends the
  /// first send task, whose name times the exchange.
  std::uint32_t task = 0;
  /// Compute: the task's layer within its chunk (−1 for embedding and output)
  /// and the slot of its (chunk, micro-batch).
  int local_layer = -1;
  int slot = 0;
  /// Exchange: the sends waiting since the last one, in the Plan's order, and
  /// at most one receive (none at the end of the step).
  std::vector<Transfer> sends;
  std::vector<Transfer> receives;
};

struct StageProgram {
  std::vector<StageAction> actions;
  /// Peak chunk-micro-batches in flight on the stage: the activation slots it needs.
  int slots = 0;
  /// The slot of (chunk, micro-batch): slot_of[chunk][microbatch].
  std::vector<std::vector<int>> slot_of;
};

/// The program of pipeline rank `stage` of `plan`. Throws std::invalid_argument
/// for tasks the engine's pipeline does not run (zero-bubble's split backward,
/// communication other than pipeline sends) or a stage whose micro-batch 0 is
/// not the first backward of each chunk (gradients are written by it, then
/// accumulated: transformer.h).
StageProgram stage_program_of(const sim::Plan& plan, int stage);

/// The pp ranks before and after (stage, chunk) in virtual-stage order.
int previous_stage(const sim::PlanShape& shape, int stage);
int next_stage(const sim::PlanShape& shape, int stage);

}  // namespace sextant::engine::pipeline
