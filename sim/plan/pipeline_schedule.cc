#include "sim/plan/pipeline_schedule.h"

#include <algorithm>
#include <deque>
#include <stdexcept>
#include <string>

namespace sextant::sim {

std::string_view to_string(PipelineSchedule value) {
  switch (value) {
    case PipelineSchedule::kGpipe: return "gpipe";
    case PipelineSchedule::kOneFOneB: return "1f1b";
    case PipelineSchedule::kInterleaved: return "1f1b-interleaved";
    case PipelineSchedule::kZeroBubbleH1: return "zb-h1";
  }
  return "?";
}

PipelineSchedule pipeline_schedule_of(const ParallelLayout& layout) {
  switch (layout.schedule) {
    case Schedule::kGpipe: return PipelineSchedule::kGpipe;
    case Schedule::kOneFOneB: return PipelineSchedule::kOneFOneB;
    case Schedule::kInterleaved: return PipelineSchedule::kInterleaved;
    case Schedule::kZeroBubbleH1: return PipelineSchedule::kZeroBubbleH1;
  }
  return PipelineSchedule::kOneFOneB;
}

namespace {

using Program = std::vector<PipelineOp>;

Program gpipe(int m) {
  Program out;
  for (int i = 0; i < m; ++i) out.push_back({PassKind::kForward, 0, i});
  for (int i = 0; i < m; ++i) out.push_back({PassKind::kBackward, 0, i});
  return out;
}

Program one_f_one_b(int pp, int m, int stage) {
  Program out;
  const int warmup = std::min(pp - stage - 1, m);
  for (int i = 0; i < warmup; ++i) out.push_back({PassKind::kForward, 0, i});
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back({PassKind::kForward, 0, warmup + i});
    out.push_back({PassKind::kBackward, 0, i});
  }
  for (int i = m - warmup; i < m; ++i) out.push_back({PassKind::kBackward, 0, i});
  return out;
}

// Megatron-Core's get_model_chunk_id and microbatch id for the k-th chunk-pass.
PipelineOp interleaved_op(int k, bool forward, int pp, int vpp) {
  const int in_group = k % (pp * vpp);
  int chunk = in_group / pp;
  if (!forward) chunk = vpp - 1 - chunk;
  const int microbatch = k / (pp * vpp) * pp + k % pp;
  return {forward ? PassKind::kForward : PassKind::kBackward, chunk, microbatch};
}

Program interleaved(int pp, int vpp, int m, int stage, int extra_warmup) {
  if (m % pp != 0) {
    throw std::invalid_argument("interleaved 1F1B needs the micro-batch count (" +
                                std::to_string(m) + ") to be a multiple of pp (" +
                                std::to_string(pp) + ")");
  }
  const int total = m * vpp;
  const int warmup =
      m == pp ? total : std::min(2 * (pp - stage - 1) + (vpp - 1) * pp + extra_warmup, total);
  Program out;
  for (int k = 0; k < warmup; ++k) out.push_back(interleaved_op(k, true, pp, vpp));
  for (int k = 0; k < total - warmup; ++k) {
    out.push_back(interleaved_op(k + warmup, true, pp, vpp));
    out.push_back(interleaved_op(k, false, pp, vpp));
  }
  for (int k = total - warmup; k < total; ++k) out.push_back(interleaved_op(k, false, pp, vpp));
  return out;
}

Program zero_bubble_h1(int pp, int m, int stage) {
  Program out;
  const bool first = stage == 0;
  int forward = 0, backward = 0;
  std::deque<int> deferred_weights;  // micro-batches whose W has not run, oldest first
  auto push_forward = [&] { out.push_back({PassKind::kForward, 0, forward++}); };
  auto push_backward = [&](bool with_weight) {
    if (first) {
      out.push_back({PassKind::kBackward, 0, backward++});
      return;
    }
    out.push_back({PassKind::kBackwardInput, 0, backward});
    deferred_weights.push_back(backward++);
    if (with_weight) {
      out.push_back({PassKind::kBackwardWeight, 0, deferred_weights.front()});
      deferred_weights.pop_front();
    }
  };
  for (int i = 0; i < pp - stage - 1 && forward < m; ++i) push_forward();
  for (int i = 0; i < stage && forward < m; ++i) {
    push_forward();
    push_backward(false);
  }
  while (forward < m) {
    push_forward();
    push_backward(true);
  }
  while (backward < m) push_backward(true);
  for (int microbatch : deferred_weights) {
    out.push_back({PassKind::kBackwardWeight, 0, microbatch});
  }
  return out;
}

}  // namespace

std::vector<PipelineOp> stage_program(PipelineSchedule schedule, int pp, int vpp,
                                      int microbatches, int stage, int extra_warmup) {
  if (pp < 1 || vpp < 1 || microbatches < 1 || stage < 0 || stage >= pp) {
    throw std::invalid_argument("stage_program: need pp, vpp, microbatches >= 1 and 0 <= stage < pp");
  }
  if (vpp > 1 && schedule != PipelineSchedule::kInterleaved) {
    throw std::invalid_argument("vpp=" + std::to_string(vpp) + " needs the interleaved schedule, got " +
                                std::string(to_string(schedule)));
  }
  switch (schedule) {
    case PipelineSchedule::kGpipe: return gpipe(microbatches);
    case PipelineSchedule::kOneFOneB: return one_f_one_b(pp, microbatches, stage);
    case PipelineSchedule::kInterleaved:
      return vpp == 1 ? one_f_one_b(pp, microbatches, stage)
                      : interleaved(pp, vpp, microbatches, stage, extra_warmup);
    case PipelineSchedule::kZeroBubbleH1: return zero_bubble_h1(pp, microbatches, stage);
  }
  return {};
}

}  // namespace sextant::sim
