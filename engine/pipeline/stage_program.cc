#include "engine/pipeline/stage_program.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "sim/plan/task_name.h"

namespace sextant::engine::pipeline {

int previous_stage(const sim::PlanShape& shape, int stage) { return stage > 0 ? stage - 1 : shape.pp - 1; }
int next_stage(const sim::PlanShape& shape, int stage) { return stage + 1 < shape.pp ? stage + 1 : 0; }

namespace {

Direction direction_of(const sim::Plan& plan, const sim::Task& t) {
  switch (t.pass) {
    case sim::Pass::kForward: return Direction::kForward;
    case sim::Pass::kBackward:
    case sim::Pass::kRecompute: return Direction::kBackward;
    default:
      throw std::invalid_argument("pipeline: the engine runs whole backward passes; the plan holds " +
                                  sim::task_name(plan, t) + " (zero-bubble schedules are not supported)");
  }
}

// One chunk's forward or backward of one micro-batch: its tasks in the Plan's order.
struct PassTasks {
  Direction direction;
  int chunk;
  int microbatch;
  std::vector<std::uint32_t> tasks;  // compute and send tasks
  bool receives = false;
};

class ProgramBuilder {
 public:
  ProgramBuilder(const sim::Plan& plan, int stage) : plan_(plan), shape_(plan.shape), stage_(stage) {
    const auto chunks = static_cast<std::size_t>(shape_.vpp);
    out_.slot_of.assign(chunks, std::vector<int>(static_cast<std::size_t>(shape_.microbatches), -1));
  }

  StageProgram build() {
    std::uint32_t optimizer = 0;
    bool has_optimizer = false;
    for (std::uint32_t i = plan_.stage_begin[static_cast<std::size_t>(stage_)];
         i < plan_.stage_begin[static_cast<std::size_t>(stage_) + 1]; ++i) {
      const sim::Task& t = plan_.tasks[i];
      if (t.kind == sim::TaskKind::kOptimizerStep) {
        optimizer = i;
        has_optimizer = true;
        continue;
      }
      // The tied embedding's gradient all-reduce between the first and last
      // stage: the trainer's end-of-step reductions run it (pipeline_reductions.cc).
      if (t.kind == sim::TaskKind::kTiedEmbeddingReduce) continue;
      // tp's all-reduces (sp's all-gathers and reduce-scatters) run in the pass
      // of the block they follow (precede).
      if (t.kind != sim::TaskKind::kCompute && t.kind != sim::TaskKind::kPipelineSend &&
          t.kind != sim::TaskKind::kTensorParallel && t.kind != sim::TaskKind::kTensorParallelGather &&
          t.kind != sim::TaskKind::kTensorParallelScatter)
        throw std::invalid_argument("pipeline: the engine's plan holds a task it does not run: " +
                                    sim::task_name(plan_, t));
      const Direction d = direction_of(plan_, t);
      if (passes_.empty() || passes_.back().direction != d || passes_.back().chunk != t.chunk ||
          passes_.back().microbatch != t.microbatch)
        passes_.push_back({d, t.chunk, t.microbatch, {}, false});
      passes_.back().tasks.push_back(i);
    }
    assign_slots();
    emit();
    if (has_optimizer) {
      StageAction a;
      a.kind = StageAction::Kind::kOptimizerStep;
      a.task = optimizer;
      out_.actions.push_back(a);
    }
    return std::move(out_);
  }

 private:
  bool first_virtual(int chunk) const { return stage_ == 0 && chunk == 0; }
  bool last_virtual(int chunk) const { return stage_ == shape_.pp - 1 && chunk == shape_.vpp - 1; }

  int& slot(const PassTasks& p) {
    return out_.slot_of[static_cast<std::size_t>(p.chunk)][static_cast<std::size_t>(p.microbatch)];
  }

  // A forward takes the lowest free slot of the stage, whichever its chunk,
  // and its backward frees it: the stage keeps as many slots as it has
  // chunk-micro-batches in flight at the schedule's peak (not the sum of each
  // chunk's peak).
  void assign_slots() {
    std::vector<bool> busy;
    std::vector<bool> backward_seen(static_cast<std::size_t>(shape_.vpp), false);
    for (PassTasks& p : passes_) {
      const auto c = static_cast<std::size_t>(p.chunk);
      const sim::Task& first = plan_.tasks[p.tasks.front()];
      if (p.direction == Direction::kForward) {
        auto free = std::find(busy.begin(), busy.end(), false);
        slot(p) = static_cast<int>(free - busy.begin());
        if (free == busy.end()) busy.push_back(true);
        else *free = true;
        out_.slots = std::max(out_.slots, static_cast<int>(busy.size()));
        p.receives = !first_virtual(p.chunk);
      } else {
        if (slot(p) < 0)
          throw std::invalid_argument("pipeline: the plan runs " + sim::task_name(plan_, first) + " before its forward");
        // Gradients are written by micro-batch 0's backward, then added (transformer.h).
        if (!backward_seen[c] && p.microbatch != 0)
          throw std::invalid_argument("pipeline: chunk " + std::to_string(p.chunk) + "'s first backward is " +
                                      sim::task_name(plan_, first) + ", not micro-batch 0's");
        backward_seen[c] = true;
        busy[static_cast<std::size_t>(slot(p))] = false;
        p.receives = !last_virtual(p.chunk);
      }
    }
  }

  Transfer receive_of(PassTasks& p) {
    return {p.direction, p.direction == Direction::kForward ? previous_stage(shape_, stage_) : next_stage(shape_, stage_),
            p.chunk, p.microbatch, slot(p)};
  }

  // Units: one pass, or under interleaving a forward and the backward after it
  // in the steady state (Megatron's forward_backward_pipelining_with_interleaving:
  // there is none when every forward is a warm-up one, m = pp). Each unit's
  // computation is followed by one exchange: its sends and the next unit's receives.
  void emit() {
    const auto forwards = std::count_if(passes_.begin(), passes_.end(),
                                        [](const PassTasks& p) { return p.direction == Direction::kForward; });
    const auto leading = std::find_if(passes_.begin(), passes_.end(),
                                      [](const PassTasks& p) { return p.direction == Direction::kBackward; }) -
                         passes_.begin();
    const bool steady_state = shape_.vpp > 1 && leading < forwards;
    std::vector<std::pair<std::size_t, std::size_t>> units;  // [begin, end) of passes_
    for (std::size_t i = 0; i < passes_.size();) {
      const bool pair = steady_state && i + 1 < passes_.size() && passes_[i].direction == Direction::kForward &&
                        passes_[i + 1].direction == Direction::kBackward;
      units.push_back({i, i + (pair ? 2 : 1)});
      i += pair ? 2 : 1;
    }
    auto receives_of = [&](std::size_t u, StageAction& exchange) {
      if (u >= units.size()) return;
      for (std::size_t p = units[u].first; p < units[u].second; ++p)
        if (passes_[p].receives) exchange.receives.push_back(receive_of(passes_[p]));
    };
    StageAction first;
    first.kind = StageAction::Kind::kExchange;
    receives_of(0, first);
    if (!first.receives.empty()) out_.actions.push_back(first);
    for (std::size_t u = 0; u < units.size(); ++u) {
      StageAction exchange;
      exchange.kind = StageAction::Kind::kExchange;
      for (std::size_t p = units[u].first; p < units[u].second; ++p) {
        PassTasks& pass = passes_[p];
        for (const std::uint32_t index : pass.tasks) {
          const sim::Task& t = plan_.tasks[index];
          if (t.kind == sim::TaskKind::kPipelineSend) {
            if (exchange.sends.empty()) exchange.task = index;
            exchange.sends.push_back(
                {pass.direction,
                 pass.direction == Direction::kForward ? next_stage(shape_, stage_) : previous_stage(shape_, stage_),
                 pass.chunk, pass.microbatch, slot(pass)});
            continue;
          }
          StageAction a;
          a.kind = StageAction::Kind::kCompute;
          a.task = index;
          a.slot = slot(pass);
          if (t.layer != sim::kNoIndex) a.local_layer = t.layer - shape_.split.chunk(stage_, t.chunk).first_layer;
          out_.actions.push_back(a);
        }
      }
      receives_of(u + 1, exchange);
      if (!exchange.sends.empty() || !exchange.receives.empty()) out_.actions.push_back(std::move(exchange));
    }
  }

  const sim::Plan& plan_;
  const sim::PlanShape& shape_;
  const int stage_;
  std::vector<PassTasks> passes_;
  StageProgram out_;
};

}  // namespace

StageProgram stage_program_of(const sim::Plan& plan, int stage) {
  if (stage < 0 || stage >= plan.num_stages())
    throw std::invalid_argument("stage_program_of: stage " + std::to_string(stage) + " of a plan of " +
                                std::to_string(plan.num_stages()) + " stages");
  return ProgramBuilder(plan, stage).build();
}

}  // namespace sextant::engine::pipeline
