#include "sim/plan/task_name.h"

#include <charconv>

namespace sextant::sim {

std::string_view to_string(StreamKind value) {
  switch (value) {
    case StreamKind::kCompute: return "compute";
    case StreamKind::kTensorParallel: return "tp";
    case StreamKind::kContextParallel: return "cp";
    case StreamKind::kExpertParallel: return "ep";
    case StreamKind::kPipelineForward: return "pp_fwd";
    case StreamKind::kPipelineBackward: return "pp_bwd";
    case StreamKind::kDataParallel: return "dp";
    case StreamKind::kDataParallelGather: return "dp_gather";
  }
  return "?";
}

std::string_view stream_title(StreamKind value) {
  switch (value) {
    case StreamKind::kCompute: return "compute";
    case StreamKind::kTensorParallel: return "TP comm";
    case StreamKind::kContextParallel: return "CP comm";
    case StreamKind::kExpertParallel: return "EP comm";
    case StreamKind::kPipelineForward: return "PP send (forward)";
    case StreamKind::kPipelineBackward: return "PP send (backward)";
    case StreamKind::kDataParallel: return "DP comm";
    case StreamKind::kDataParallelGather: return "DP param gather";
  }
  return "?";
}

namespace {

void append_number(std::string& out, long value) {
  char buffer[24];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  out.append(buffer, result.ptr);
}

void append_indexed(std::string& out, std::string_view label, long value) {
  out += label;
  append_number(out, value);
}

std::string_view block_name(Block block) {
  switch (block) {
    case Block::kNone: return "";
    case Block::kEmbedding: return "embedding";
    case Block::kAttention: return "attn";
    case Block::kAttentionCore: return "attn.core";
    case Block::kMlp: return "mlp";
    case Block::kSharedExpertFc1: return "mlp.shared_fc1";
    case Block::kSharedExpertFc2: return "mlp.shared_fc2";
    case Block::kOutput: return "output";
  }
  return "?";
}

std::string_view pass_name(Pass pass) {
  switch (pass) {
    case Pass::kNone: return "";
    case Pass::kForward: return "fwd";
    case Pass::kBackward: return "bwd";
    case Pass::kBackwardInput: return "bwd_input";
    case Pass::kBackwardWeight: return "bwd_weight";
    case Pass::kRecompute: return "recompute";
  }
  return "?";
}

// "stage2.mb5." (the micro-batch only for per-micro-batch tasks).
void append_prefix(std::string& out, const Task& t) {
  append_indexed(out, "stage", t.stage);
  out += '.';
  if (t.microbatch != kNoIndex) {
    append_indexed(out, "mb", t.microbatch);
    out += '.';
  }
}

// "layer17.attn.fwd" or "embedding.fwd".
void append_block(std::string& out, const Task& t) {
  if (t.layer != kNoIndex) {
    append_indexed(out, "layer", t.layer);
    out += '.';
  }
  out += block_name(t.block);
  out += '.';
  out += pass_name(t.pass);
}

void append_bucket(std::string& out, const Plan& plan, const Task& t) {
  append_indexed(out, ".bucket", plan.buckets[static_cast<std::size_t>(t.bucket)].index_in_stage);
}

}  // namespace

void append_task_name(const Plan& plan, const Task& t, std::string& out) {
  append_prefix(out, t);
  switch (t.kind) {
    case TaskKind::kCompute:
      append_block(out, t);
      return;
    case TaskKind::kTensorParallel:
    case TaskKind::kTensorParallelTail:
      append_block(out, t);
      out += plan.shape.sequence_parallel ? ".tp.all_gather+reduce_scatter" : ".tp.all_reduce";
      if (t.kind == TaskKind::kTensorParallelTail) out += ".tail";
      return;
    case TaskKind::kTensorParallelGather:
      append_block(out, t);
      out += ".tp.all_gather";
      return;
    case TaskKind::kTensorParallelScatter:
      append_block(out, t);
      out += ".tp.reduce_scatter";
      return;
    case TaskKind::kContextRing:
      append_block(out, t);
      if (!plan.shape.cp_all_gather)
        out += ".cp.ring";
      else
        out += t.pass == Pass::kForward || t.pass == Pass::kRecompute ? ".cp.all_gather"
                                                                      : ".cp.all_gather+reduce_scatter";
      return;
    case TaskKind::kExpertDispatch:
      append_block(out, t);
      out += ".ep.dispatch";
      return;
    case TaskKind::kExpertCombine:
      append_block(out, t);
      out += ".ep.combine";
      return;
    case TaskKind::kPipelineSend:
      append_indexed(out, "chunk", t.chunk);
      out += t.pass == Pass::kForward ? ".pp.send_fwd" : ".pp.send_bwd";
      return;
    case TaskKind::kPipelineReceive:
      append_indexed(out, "chunk", t.chunk);
      out += t.pass == Pass::kForward ? ".pp.recv_fwd" : ".pp.recv_bwd";
      return;
    case TaskKind::kGradientReduce:
      out += plan.shape.zero == 0 ? "dp.all_reduce" : "dp.reduce_scatter";
      append_bucket(out, plan, t);
      return;
    case TaskKind::kParameterGather:
      out += "dp.all_gather";
      append_bucket(out, plan, t);
      if (t.pass != Pass::kNone) {
        out += '.';
        out += pass_name(t.pass);
      }
      return;
    case TaskKind::kTiedEmbeddingReduce:
      out += "pp.embedding_grad.all_reduce";
      return;
    case TaskKind::kOptimizerStep:
      out += "optimizer.step";
      return;
  }
}

std::string task_name(const Plan& plan, const Task& task) {
  std::string out;
  out.reserve(48);
  append_task_name(plan, task, out);
  return out;
}

}  // namespace sextant::sim
