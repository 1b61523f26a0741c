// What the engine executes (engine/training/engine_support.h): each knob and
// model feature it does not execute is refused by name, with the option and
// what is accepted; what it does execute comes back as it will run.
#include "engine/training/engine_support.h"

#include <gtest/gtest.h>

#include <string>

#include "sim/core/config_error.h"

namespace sextant::engine::training {
namespace {

sim::ParallelLayout executed(const std::string& spec, int world_size, int global_batch = 0) {
  return executable_layout(sim::parse_layout(spec), world_size, global_batch);
}

// "option: key" of the refusal of `spec` over `world_size` ranks; "" when accepted.
std::string refusal(const std::string& spec, int world_size, int global_batch = 0) {
  try {
    executed(spec, world_size, global_batch);
  } catch (const sim::ConfigError& e) {
    return e.diagnostics().at(0).file + ": " + e.diagnostics().at(0).key;
  }
  return "";
}

TEST(EngineSupport, EveryKnobTheEngineDoesNotExecuteIsRefusedByName) {
  // cp is executed (it was refused before context parallelism): the replica is tp·cp·pp ranks.
  EXPECT_EQ(refusal("cp=2", 2), "");
  EXPECT_EQ(refusal("cp=3", 2), "--layout: cp");               // 2 ranks are not a multiple of cp
  EXPECT_EQ(refusal("cp=2,ep=2", 4), "--layout: ep");          // cp with ep not executed yet
  EXPECT_EQ(refusal("tp=2,cp=2,dp=2", 4), "--layout: dp");     // tp·cp·dp = 8 ranks
  EXPECT_EQ(refusal("cp=2,zero=1,mbs=1,gbs=2", 2), "");        // ZeRO-1 shards over dp x cp
  EXPECT_EQ(refusal("cp=2,overlap_grad_reduce=0", 2), "--layout: overlap_grad_reduce");
  EXPECT_EQ(refusal("ep=3", 2), "--layout: ep");  // experts fold over dp ranks: ep divides dp
  EXPECT_EQ(refusal("dp=2,ep=2,zero=1,mbs=1,gbs=4", 2), "");  // ZeRO-1 shards the experts over expert-dp
  EXPECT_EQ(refusal("dp=4,ep=2,zero=1,mbs=1,gbs=8", 4), "");
  EXPECT_EQ(refusal("dp=4,ep=2,mbs=1,gbs=8", 4), "");
  EXPECT_EQ(executed("ep=4,mbs=1,gbs=8", 4).ep, 4);
  EXPECT_EQ(refusal("etp=2", 2), "--layout: etp");
  EXPECT_EQ(refusal("dp=2,zero=2", 2), "--layout: zero");
  EXPECT_EQ(refusal("zero=1", 1), "--layout: zero");  // nothing to shard on one GPU
  EXPECT_EQ(refusal("precision=fp8", 1), "--layout: precision");
  EXPECT_EQ(refusal("attention=unfused", 1), "--layout: attention");
  EXPECT_EQ(refusal("pp=2,schedule=zb-h1", 2), "--layout: schedule");
  EXPECT_EQ(refusal("vpp=2", 1), "--layout: vpp");
  EXPECT_EQ(refusal("grad_reduce_in_fp32=0", 1), "--layout: grad_reduce_in_fp32");
  EXPECT_EQ(refusal("dp=2,zero=3,fsdp=fsdp2", 2), "--layout: fsdp");
  EXPECT_EQ(refusal("moe_a2a_overlap=1", 1), "--layout: moe_a2a_overlap");
  EXPECT_EQ(refusal("tp=2,tp_comm_overlap=1", 2), "--layout: tp_comm_overlap");  // needs sp=1
  EXPECT_EQ(refusal("overlap_param_gather=1", 1), "--layout: overlap_param_gather");
  EXPECT_EQ(refusal("tp=3", 2), "--layout: tp");  // 2 ranks are not a multiple of tp
  EXPECT_EQ(refusal("dp=4", 2), "--layout: dp");
  EXPECT_EQ(refusal("gbs=8", 1, 16), "--global-batch: ");
  EXPECT_EQ(refusal("mbs=3,gbs=8", 1), "--layout: gbs");
  EXPECT_EQ(refusal("tp=2,sp=1,tp_comm_overlap=1,dp=2,dist_opt=1,overlap_param_gather=1,mbs=2,gbs=8", 4), "");
}

TEST(EngineSupport, ModelParallelKnobsSayWhatIsExecuted) {
  try {
    // Was cp=2's message before context parallelism was executed; etp is the one left.
    refuse_model_parallel(sim::parse_layout("etp=2"));
    ADD_FAILURE() << "etp=2 accepted";
  } catch (const sim::ConfigError& e) {
    EXPECT_EQ(e.diagnostics().at(0).message,
              "2: `sextant run` trains data-, tensor-, context- and pipeline-parallel layouts (dp, tp, cp, pp, "
              "vpp; ep for MoE models) so far; expert tensor parallelism is not executed yet, so etp must be 1 "
              "(or left out)");
  }
  EXPECT_NO_THROW(refuse_model_parallel(sim::parse_layout("cp=1,ep=1,etp=1,tp=8")));
  EXPECT_NO_THROW(refuse_model_parallel(sim::parse_layout("cp=4")));
}

TEST(EngineSupport, WhatItExecutesIsFilledIn) {
  // 8 ranks, tp=2, pp=2: dp fills the rest; gbs defaults to mbs·dp; 1F1B.
  const sim::ParallelLayout l = executed("tp=2,pp=2,mbs=2", 8);
  EXPECT_EQ(l.dp, 2);
  EXPECT_EQ(l.gbs, 4);
  EXPECT_EQ(l.schedule, sim::Schedule::kOneFOneB);
  EXPECT_EQ(executed("pp=2,vpp=2,mbs=1,gbs=4", 2).schedule, sim::Schedule::kInterleaved);
  EXPECT_EQ(executed("mbs=2", 1, 16).gbs, 16);  // --global-batch
  EXPECT_FALSE(executed("sp=1", 1).sp);         // nothing to split at tp = 1
}

TEST(EngineSupport, OverlapGradReduceOffIsRefusedWhereThereIsDataParallelism) {
  // Two replicas of a 2-stage pipeline: the engine overlaps their reduction, so 0 is refused.
  EXPECT_THROW(executed("pp=2,overlap_grad_reduce=0", 4, 8), sim::ConfigError);
  EXPECT_THROW(executed("overlap_grad_reduce=0", 2, 8), sim::ConfigError);
  // One replica: nothing to reduce, nothing to refuse.
  EXPECT_EQ(executed("pp=2,overlap_grad_reduce=0", 2, 8).pp, 2);
  EXPECT_EQ(executed("overlap_grad_reduce=0", 1, 8).dp, 1);
  // What the engine runs is what the layout says, and what --compare predicts:
  // an overlapped reduction (it had said 0, so the prediction exposed the reduction).
  EXPECT_TRUE(executed("dp=4,mbs=4,gbs=16", 4, 16).overlap_grad_reduce);
  EXPECT_TRUE(executed("pp=2,dist_opt=1", 4, 8).overlap_grad_reduce);
}

TEST(EngineSupport, ContextParallelLayoutsAreFilledInAndChecked) {
  // 8 ranks, tp=2, cp=2: dp = 8 / (tp·cp) = 2; 16 ranks with pp=2 too.
  const sim::ParallelLayout l = executed("tp=2,sp=1,cp=2,mbs=1,gbs=8", 8);
  EXPECT_EQ(l.cp, 2);
  EXPECT_EQ(l.dp, 2);
  EXPECT_EQ(executed("tp=2,cp=2,pp=2,mbs=1,gbs=8", 16).dp, 2);
  EXPECT_EQ(executed("cp=4,mbs=1,gbs=8", 4).dp, 1);
  // The engine runs both attention cores and says which to --compare: the
  // all-gather by default (the simulator's default is p2p), the ring when the layout asks.
  EXPECT_EQ(executed("cp=4,mbs=1,gbs=8", 4).cp_comm_type, sim::CpCommType::kAllGather);
  EXPECT_EQ(executed("cp=2,cp_comm_type=all_gather", 2).cp_comm_type, sim::CpCommType::kAllGather);
  EXPECT_EQ(refusal("cp=2,cp_comm_type=p2p", 2), "");
  EXPECT_EQ(executed("cp=2,cp_comm_type=p2p", 2).cp_comm_type, sim::CpCommType::kP2p);
  EXPECT_EQ(executed("tp=2,sp=1,cp=2,pp=2,cp_comm_type=p2p,mbs=1,gbs=8", 16).cp_comm_type, sim::CpCommType::kP2p);
  // What ran round-trips through the layout's spec (to_spec leaves p2p, the
  // simulator's default, out): run --compare and the checks re-read it.
  const sim::ParallelLayout ring = executed("cp=2,cp_comm_type=p2p", 2);
  EXPECT_EQ(sim::layout_from_spec(ring.to_spec(), "--layout").cp_comm_type, sim::CpCommType::kP2p);
  auto key_of = [](const sim::ModelConfig& model, const sim::ParallelLayout& layout) {
    try {
      check_context_parallel_split(model, layout);
    } catch (const sim::ConfigError& e) {
      return e.diagnostics().at(0).file + ": " + e.diagnostics().at(0).key + ": " + e.diagnostics().at(0).message;
    }
    return std::string();
  };
  sim::ModelConfig m;
  m.name = "m";
  m.seq_length = 1000;
  // 1000 tokens in 2·cp = 8 chunks of 125: accepted; 2·cp = 16 does not divide 1000.
  EXPECT_EQ(key_of(m, executed("cp=4", 4)), "");
  EXPECT_EQ(key_of(m, executed("cp=8", 8)),
            "--layout: cp: 8: the sequence of 1000 tokens is cut into 2·cp = 16 equal chunks, so --seq-length "
            "must be a multiple of 16");
  // sp: each rank's 1000 / 4 = 250 tokens over tp = 4: not a multiple.
  EXPECT_EQ(key_of(m, executed("tp=4,sp=1,cp=4,mbs=1", 16)),
            "--layout: cp: 4 with tp=4 and sp=1: each rank's 250 tokens (mbs·seq/cp) are split over tp, so they "
            "must be a multiple of tp");
  EXPECT_EQ(key_of(m, executed("tp=2,sp=1,cp=4,mbs=1", 8)), "");
  sim::ModelConfig moe = m;
  moe.moe = sim::MoeConfig{};
  EXPECT_EQ(key_of(moe, executed("cp=2", 2)).substr(0, 14), "--layout: cp: ");
  EXPECT_EQ(key_of(moe, executed("cp=1", 1)), "");
}

TEST(EngineSupport, ModelFeaturesWithoutKernelsAreRefused) {
  sim::ModelConfig m;
  m.name = "m";
  m.num_attention_heads = 12;
  m.num_query_groups = 4;
  m.ffn_hidden_size = 3072;
  EXPECT_NO_THROW(refuse_unexecuted_model(m));
  auto key_of = [](const sim::ModelConfig& model) {
    try {
      refuse_unexecuted_model(model);
    } catch (const sim::ConfigError& e) {
      return e.diagnostics().at(0).file + ": " + e.diagnostics().at(0).key;
    }
    return std::string();
  };
  sim::ModelConfig windowed = m;
  windowed.sliding_window = 4096;
  EXPECT_EQ(key_of(windowed), "--model: sliding_window");
  sim::ModelConfig qkv_bias = m;
  qkv_bias.add_bias_linear = false;
  qkv_bias.add_qkv_bias = true;
  EXPECT_EQ(key_of(qkv_bias), "--model: add_qkv_bias");
  // tp splits heads, query groups and the MLP.
  EXPECT_NO_THROW(check_tensor_parallel_split(m, 4));
  try {
    check_tensor_parallel_split(m, 8);
    ADD_FAILURE() << "tp=8 of 12 heads accepted";
  } catch (const sim::ConfigError& e) {
    EXPECT_EQ(e.diagnostics().at(0).message,
              "8: num_attention_heads (12) of model 'm' must be a multiple of tp");
  }
}

}  // namespace
}  // namespace sextant::engine::training
