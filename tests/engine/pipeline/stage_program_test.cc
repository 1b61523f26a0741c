// What each pipeline rank runs, read from the Plan: receives where the Plan's
// dependencies put them, slots for the micro-batches in flight, and — played
// with the blocking point-to-point semantics of the engine's communicators —
// every transfer meets the one its peer expects, without deadlock.
#include "engine/pipeline/stage_program.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <memory>
#include <set>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/plan/plan_builder.h"
#include "tests/support/test_models.h"

namespace sextant::engine::pipeline {
namespace {

using Kind = StageAction::Kind;

// GPT-3's layer shapes with `layers` layers, mbs 1, one dp replica.
sim::Plan plan_of(sim::ParallelLayout l, int layers) {
  sim::ModelConfig m = testing::gpt3_175b();
  m.num_layers = layers;
  l.overlap_grad_reduce = false;
  return sim::build_plan(m, l);
}

sim::ParallelLayout pipeline(int pp, int vpp, int microbatches,
                             sim::Schedule schedule = sim::Schedule::kOneFOneB) {
  sim::ParallelLayout l;
  l.pp = pp;
  l.vpp = vpp;
  l.schedule = vpp > 1 ? sim::Schedule::kInterleaved : schedule;
  l.gbs = microbatches;
  return l;
}

sim::Plan plan_of(int pp, int vpp, int microbatches, int layers = 8) {
  return plan_of(pipeline(pp, vpp, microbatches), layers);
}

// What a message carries: its direction, the sender's virtual stage
// (chunk·pp + stage, Megatron's order) and the micro-batch.
struct Message {
  Direction direction;
  int virtual_stage;
  int microbatch;
  bool operator==(const Message&) const = default;
};

// Plays the programs as the in-process communicator runs an exchange (NCCL's
// grouped blocking send/recv order the same way): every send of the exchange
// is posted, then its receives wait for their messages (taken in whatever
// order they come), then the exchange waits until the peers took the sends. Each ordered pair of ranks has one FIFO, as
// one communicator has. Returns "" or what went wrong.
std::string play(const sim::Plan& plan, const std::vector<StageProgram>& programs) {
  const int pp = plan.shape.pp;
  struct Posted {
    Message message;
    std::shared_ptr<bool> taken;
  };
  std::map<std::pair<int, int>, std::deque<Posted>> boxes;  // (from, to)
  const auto ranks = static_cast<std::size_t>(pp);
  std::vector<std::size_t> pc(ranks, 0);
  std::vector<int> phase(ranks, 0);  // 0: nothing posted, 1: sends posted, 2: received
  std::vector<std::vector<std::shared_ptr<bool>>> waiting(ranks);
  std::vector<std::set<const Transfer*>> taken_here(ranks);
  for (bool progress = true; progress;) {
    progress = false;
    for (int s = 0; s < pp; ++s) {
      const auto r = static_cast<std::size_t>(s);
      const auto& actions = programs[r].actions;
      while (pc[r] < actions.size()) {
        const StageAction& a = actions[pc[r]];
        if (a.kind != Kind::kExchange) {
          ++pc[r];
          progress = true;
          continue;
        }
        if (phase[r] == 0) {
          for (const Transfer& t : a.sends) {
            waiting[r].push_back(std::make_shared<bool>(false));
            boxes[{s, t.peer}].push_back({Message{t.direction, t.chunk * pp + s, t.microbatch}, waiting[r].back()});
          }
          phase[r] = 1;
          progress = true;
        }
        if (phase[r] == 1) {
          // The exchange's receives in whatever order their messages arrive (NCCL's group).
          for (const Transfer& t : a.receives) {
            if (taken_here[r].count(&t) != 0) continue;
            auto& box = boxes[{t.peer, s}];
            if (box.empty()) continue;
            // The sender's virtual stage is the one before (forward) or after (backward) ours.
            const int ours = t.chunk * pp + s;
            const Message want{t.direction, t.direction == Direction::kForward ? ours - 1 : ours + 1, t.microbatch};
            if (!(box.front().message == want))
              return "stage " + std::to_string(s) + " expected micro-batch " + std::to_string(want.microbatch) +
                     " from virtual stage " + std::to_string(want.virtual_stage) + ", got micro-batch " +
                     std::to_string(box.front().message.microbatch) + " from " +
                     std::to_string(box.front().message.virtual_stage);
            *box.front().taken = true;
            box.pop_front();
            taken_here[r].insert(&t);
            progress = true;
          }
          if (taken_here[r].size() < a.receives.size()) break;  // still waiting for a message
          taken_here[r].clear();
          phase[r] = 2;
        }
        bool all_taken = true;
        for (const auto& taken : waiting[r]) all_taken = all_taken && *taken;
        if (!all_taken) break;
        waiting[r].clear();
        phase[r] = 0;
        ++pc[r];
        progress = true;
      }
    }
  }
  for (std::size_t r = 0; r < ranks; ++r)
    if (pc[r] < programs[r].actions.size())
      return "deadlock: stage " + std::to_string(r) + " stuck at action " + std::to_string(pc[r]);
  for (const auto& [pair, box] : boxes)
    if (!box.empty()) return "messages left unreceived";
  return "";
}

// Follows one stage's buffers through its program, as the Trainer uses
// them: each slot's stage input (the first layer's input, kept for its
// backward), stage output (the last layer's output, kept for the loss's
// backward on the last virtual stage) and residual gradient. A slot serves
// every chunk in turn, its buffers laid over one memory (the gradient first, at
// the same place for every chunk), so a buffer is keyed by slot alone and
// remembers which (chunk, micro-batch) wrote it. Every read must find the
// pass's own data there, and nothing may be overwritten while a pass still
// needs it or before it was sent. Returns "" or the first hazard.
std::string follow_buffers(const sim::Plan& plan, int stage) {
  const StageProgram program = stage_program_of(plan, stage);
  enum What { kNothing, kInput, kOutput, kGradientIn, kGradientOut };  // gradient in: from the next stage
  struct Tag {
    What what = kNothing;
    int chunk = -1;
    int microbatch = -1;
    bool operator==(const Tag&) const = default;
  };
  const int vpp = plan.shape.vpp;
  std::map<int, Tag> input, output, gradient;  // by slot
  std::set<std::pair<int, int>> backward_done;  // (chunk, micro-batch)
  // The last compute action of each backward pass: the pass is done after it.
  std::map<std::pair<int, int>, std::size_t> last_backward;
  for (std::size_t i = 0; i < program.actions.size(); ++i) {
    const StageAction& a = program.actions[i];
    if (a.kind != Kind::kCompute) continue;
    const sim::Task& t = plan.tasks[a.task];
    if (t.pass != sim::Pass::kForward) last_backward[{t.chunk, t.microbatch}] = i;
  }
  auto layers = [&](int chunk) { return layers_in_chunk(plan.shape, stage, chunk); };
  // With no layers the input and the output are one buffer (Transformer::stage_input).
  auto output_of = [&](int chunk) -> std::map<int, Tag>& { return layers(chunk) == 0 ? input : output; };
  auto where = [](int chunk, int mb) { return " (chunk " + std::to_string(chunk) + ", mb " + std::to_string(mb) + ")"; };
  auto live = [&](const Tag& old, int chunk, int mb) {
    return old.what != kNothing && !(old.chunk == chunk && old.microbatch == mb) &&
           backward_done.count({old.chunk, old.microbatch}) == 0;
  };
  // A forward's input lands in the slot's memory: nothing there may still be
  // another pass's (its input, or its output not yet used).
  auto write_input = [&](int chunk, int slot, int mb) -> std::string {
    for (const Tag* old : {&input[slot], &output[slot]})
      if (live(*old, chunk, mb))
        return "slot " + std::to_string(slot) + " of chunk " + std::to_string(old->chunk) + " mb " +
               std::to_string(old->microbatch) + " overwritten before its backward" + where(chunk, mb);
    input[slot] = {kInput, chunk, mb};
    return "";
  };
  for (std::size_t i = 0; i < program.actions.size(); ++i) {
    const StageAction& a = program.actions[i];
    if (a.kind == Kind::kExchange) {
      for (const Transfer& t : a.sends) {
        const Tag want{t.direction == Direction::kForward ? kOutput : kGradientIn, t.chunk, t.microbatch};
        const Tag got = t.direction == Direction::kForward ? output_of(t.chunk)[t.slot] : gradient[t.slot];
        if (!(got == want)) return "send finds another's data" + where(t.chunk, t.microbatch);
      }
      for (const Transfer& t : a.receives) {
        if (t.direction == Direction::kForward) {
          if (std::string e = write_input(t.chunk, t.slot, t.microbatch); !e.empty()) return e;
        } else {
          const Tag old = gradient[t.slot];
          if (old.what == kGradientOut && backward_done.count({old.chunk, old.microbatch}) == 0)
            return "a received gradient overwritten before use" + where(t.chunk, t.microbatch);
          gradient[t.slot] = {kGradientOut, t.chunk, t.microbatch};
        }
      }
      continue;
    }
    if (a.kind != Kind::kCompute) continue;
    const sim::Task& t = plan.tasks[a.task];
    const int c = t.chunk, mb = t.microbatch, slot = a.slot;
    const bool forward = t.pass == sim::Pass::kForward;
    const bool last_virtual = stage == plan.shape.pp - 1 && c == vpp - 1;
    if (forward && t.block == sim::Block::kEmbedding) {
      if (std::string e = write_input(c, slot, mb); !e.empty()) return e;
      if (layers(c) == 0) input[slot] = {kOutput, c, mb};
      continue;
    }
    if (layers(c) > 0 && !(input[slot] == Tag{kInput, c, mb})) return "a pass finds another's input" + where(c, mb);
    if (forward && t.block == sim::Block::kMlp && a.local_layer == layers(c) - 1) output[slot] = {kOutput, c, mb};
    if (t.block == sim::Block::kOutput) {
      if (!(output_of(c)[slot] == Tag{kOutput, c, mb})) return "the loss finds another's output" + where(c, mb);
      if (!forward) gradient[slot] = {kGradientOut, c, mb};
    }
    if (!forward && t.block != sim::Block::kOutput && !last_virtual && layers(c) > 0 &&
        !(gradient[slot].chunk == c && gradient[slot].microbatch == mb))
      return "a backward finds another's gradient" + where(c, mb);
    if (!forward && t.block == sim::Block::kAttention && a.local_layer == 0) gradient[slot] = {kGradientIn, c, mb};
    if (!forward && t.block == sim::Block::kEmbedding && !(gradient[slot].chunk == c && gradient[slot].microbatch == mb))
      return "the embedding's backward finds another's gradient" + where(c, mb);
    if (!forward && last_backward[{c, mb}] == i) backward_done.insert({c, mb});
  }
  return "";
}

std::vector<StageProgram> programs_of(const sim::Plan& plan) {
  std::vector<StageProgram> out;
  for (int s = 0; s < plan.shape.pp; ++s) out.push_back(stage_program_of(plan, s));
  return out;
}

// "s3r2": an exchange of 3 sends and 2 receives; "opt": the optimizer step.
std::vector<std::string> exchanges(const StageProgram& p) {
  std::vector<std::string> out;
  for (const StageAction& a : p.actions) {
    if (a.kind == Kind::kOptimizerStep) out.push_back("opt");
    if (a.kind == Kind::kExchange)
      out.push_back("s" + std::to_string(a.sends.size()) + "r" + std::to_string(a.receives.size()));
  }
  return out;
}

// pp = 2, 4 micro-batches, 1F1B, as Megatron's
// forward_backward_pipelining_without_interleaving exchanges. Stage 0: F0 F1
// B0 F2 B1 F3 B2 B3: F0's send alone (send_forward; F1 receives nothing on
// the first stage), F1's, F2's and F3's sends each with the next backward's
// receive (send_forward_recv_backward), B3's receive alone (recv_backward).
TEST(StageProgram, OneFOneBSendsWithTheNextReceive) {
  const sim::Plan plan = plan_of(2, 1, 4);
  const StageProgram first = stage_program_of(plan, 0);
  EXPECT_EQ(exchanges(first), (std::vector<std::string>{"s1r0", "s1r1", "s1r1", "s1r1", "s0r1", "opt"}));
  std::vector<const StageAction*> groups;
  for (const StageAction& a : first.actions)
    if (a.kind == Kind::kExchange) groups.push_back(&a);
  EXPECT_EQ(groups[1]->sends[0].microbatch, 1);
  EXPECT_EQ(groups[1]->sends[0].peer, 1);
  EXPECT_EQ(groups[1]->sends[0].direction, Direction::kForward);
  EXPECT_EQ(groups[1]->receives[0].direction, Direction::kBackward);
  EXPECT_EQ(groups[1]->receives[0].microbatch, 0);
  // Stage 1 (last): R0 F0 B0, then each backward's send with the next
  // forward's receive (send_backward_recv_forward); B3's send before the optimizer.
  const StageProgram last = stage_program_of(plan, 1);
  EXPECT_EQ(exchanges(last), (std::vector<std::string>{"s0r1", "s1r1", "s1r1", "s1r1", "s1r0", "opt"}));
  // In flight: stage s holds min(pp − s, m) micro-batches: 2 and 1.
  EXPECT_EQ(first.slots, 2);
  EXPECT_EQ(last.slots, 1);
}

TEST(StageProgram, ComputeTasksKeepThePlansOrderAndLocalLayers) {
  // pp = 2 of 8 layers: stage 1 holds layers 4-7, so layer 5 is its local 1.
  const sim::Plan plan = plan_of(2, 1, 2);
  const StageProgram last = stage_program_of(plan, 1);
  std::vector<std::uint32_t> tasks;
  for (const StageAction& a : last.actions) {
    if (a.kind == Kind::kExchange) continue;
    tasks.push_back(a.task);
    const sim::Task& t = plan.tasks[a.task];
    if (a.kind == Kind::kCompute && t.layer != sim::kNoIndex) {
      EXPECT_EQ(a.local_layer, t.layer - 4);
    }
  }
  std::vector<std::uint32_t> all;  // every compute task of the stage and the optimizer step, once, in order
  for (std::uint32_t i = plan.stage_begin[1]; i < plan.stage_begin[2]; ++i)
    if (plan.tasks[i].kind != sim::TaskKind::kPipelineSend) all.push_back(i);
  EXPECT_EQ(tasks, all);
  // And every send task in some exchange, in order: one per micro-batch (2) backward.
  std::vector<int> sent;
  for (const StageAction& a : last.actions)
    for (const Transfer& t : a.sends) sent.push_back(t.microbatch);
  EXPECT_EQ(sent, (std::vector<int>{0, 1}));
}

TEST(StageProgram, SlotsCoverThePeakOfInFlightMicrobatches) {
  // 1F1B, pp = 4, 8 micro-batches: stage s keeps pp − s = 4, 3, 2, 1.
  const sim::Plan plan = plan_of(4, 1, 8);
  for (int s = 0; s < 4; ++s) EXPECT_EQ(stage_program_of(plan, s).slots, 4 - s);
  // Interleaved pp = 2, vpp = 2, 4 micro-batches: stage 0 warms up with
  // 2(pp − 1) + (vpp − 1)pp = 4 chunk-forwards (mb 0, 1 of chunk 0, then of
  // chunk 1), then runs F(c0 m2) B(c1 m0) F(c0 m3) B(c1 m1) F(c1 m2) B(c0 m0):
  // 5 in flight at F(c0 m2), the warm-up's 4 plus the steady state's one.
  // Chunk 0 alone peaks at 4 and chunk 1 at 2: slots of its own per chunk
  // would take 6.
  const sim::Plan interleaved = plan_of(2, 2, 4);
  EXPECT_EQ(stage_program_of(interleaved, 0).slots, 5);
  // pp = 4, vpp = 2, 8 micro-batches: (4 − 1)·2 + (2 − 1)·4 + 1 = 11 on stage 0,
  // 8 stage-micro-batches' layers times 11/8 = 1 + (pp − 1)/(pp·vpp), as
  // sim/memory/activation_memory.h counts (per chunk: 8 + 4 = 12).
  EXPECT_EQ(stage_program_of(plan_of(4, 2, 8), 0).slots, 11);
}

// Full recomputation: the forward again at the start of each backward pass
// reads the stored input; the buffers still hold what each pass needs.
TEST(StageProgram, RecomputationKeepsTheBuffersSafe) {
  sim::ParallelLayout l = pipeline(2, 2, 6);
  l.recompute = sim::Recompute::kFull;
  const sim::Plan plan = plan_of(l, 8);
  for (int s = 0; s < 2; ++s) EXPECT_EQ(follow_buffers(plan, s), "") << "stage " << s;
  EXPECT_EQ(play(plan, programs_of(plan)), "");
}

struct PlayCase {
  int pp, vpp, microbatches;
};

class StageProgramPlay : public ::testing::TestWithParam<PlayCase> {};

TEST_P(StageProgramPlay, TransfersMeetTheirPeersWithoutDeadlock) {
  const PlayCase c = GetParam();
  const sim::Plan plan = plan_of(c.pp, c.vpp, c.microbatches, 2 * c.pp * c.vpp);
  EXPECT_EQ(play(plan, programs_of(plan)), "");
  for (int s = 0; s < c.pp; ++s) EXPECT_EQ(follow_buffers(plan, s), "") << "stage " << s;
}

INSTANTIATE_TEST_SUITE_P(Schedules, StageProgramPlay,
                         ::testing::Values(PlayCase{2, 1, 1}, PlayCase{2, 1, 4}, PlayCase{4, 1, 2},
                                           PlayCase{4, 1, 8}, PlayCase{8, 1, 16}, PlayCase{2, 2, 2},
                                           PlayCase{2, 2, 4}, PlayCase{2, 2, 8}, PlayCase{4, 2, 4},
                                           PlayCase{4, 2, 8}, PlayCase{2, 4, 6}, PlayCase{3, 2, 9},
                                           PlayCase{4, 4, 12}, PlayCase{8, 2, 32}, PlayCase{3, 1, 7}),
                         [](const ::testing::TestParamInfo<PlayCase>& info) {
                           return "pp" + std::to_string(info.param.pp) + "_vpp" + std::to_string(info.param.vpp) +
                                  "_m" + std::to_string(info.param.microbatches);
                         });

// Uneven stages (sim/core/pipeline_split.h): 10 layers at pp = 4 with 1 on
// the first stage and 3 on the last; and a pp_layout whose chunks hold 0 to 3.
TEST(StageProgram, UnevenStagesPlayToo) {
  sim::ParallelLayout l = pipeline(4, 1, 8);
  l.first_stage_layers = 1;
  l.last_stage_layers = 3;
  const sim::Plan plan = plan_of(l, 10);
  EXPECT_EQ(layers_in_chunk(plan.shape, 0, 0), 1);
  EXPECT_EQ(layers_in_chunk(plan.shape, 3, 0), 3);
  EXPECT_EQ(play(plan, programs_of(plan)), "");
  // The last stage's local layers run 0-2 for global layers 7-9.
  for (const StageAction& a : stage_program_of(plan, 3).actions)
    if (a.kind == Kind::kCompute && plan.tasks[a.task].layer != sim::kNoIndex) {
      EXPECT_EQ(a.local_layer, plan.tasks[a.task].layer - 7);
    }
  sim::ParallelLayout interleaved = pipeline(2, 2, 4);
  interleaved.pp_layout = "E|ttt|tt|tL";
  const sim::Plan uneven = plan_of(interleaved, 6);
  EXPECT_EQ(layers_in_chunk(uneven.shape, 0, 0), 0);
  EXPECT_EQ(play(uneven, programs_of(uneven)), "");
  for (int s = 0; s < 2; ++s) EXPECT_EQ(follow_buffers(uneven, s), "") << "stage " << s;
}

TEST(StageProgram, GpipePlaysToo) {
  // GPipe: every forward, then every backward; stage s keeps all m in flight.
  const sim::Plan plan = plan_of(pipeline(4, 1, 6, sim::Schedule::kGpipe), 8);
  EXPECT_EQ(play(plan, programs_of(plan)), "");
  for (int s = 0; s < 4; ++s) EXPECT_EQ(follow_buffers(plan, s), "") << "stage " << s;
  EXPECT_EQ(stage_program_of(plan, 3).slots, 6);
}

TEST(StageProgram, RefusesZeroBubble) {
  const sim::Plan plan = plan_of(pipeline(2, 1, 4, sim::Schedule::kZeroBubbleH1), 4);
  EXPECT_THROW(stage_program_of(plan, 1), std::invalid_argument);
}

}  // namespace
}  // namespace sextant::engine::pipeline
