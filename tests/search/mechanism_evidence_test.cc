// The evidence table (search/mechanism_evidence.cc) against the evidence itself:
// validation/dev_cases.yaml read by the validation's own loader, and the
// engine's measurement folders. A dev case added with a new mechanism (a ZeRO-3
// run, say) fails NoDevCaseUsesAMechanismTheTableCallsUngrounded until the
// table cites it, so the table cannot silently go stale.
#include "search/mechanism_evidence.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/training/engine_support.h"
#include "reports/validation_cases.h"
#include "sim/core/config_error.h"

namespace sextant::search {
namespace {

std::vector<reports::ValidationCase> dev_cases() {
  return reports::load_validation_cases(std::string(SEXTANT_TEST_SOURCE_DIR) + "/validation/dev_cases.yaml");
}

const reports::ValidationCase* find_case(const std::vector<reports::ValidationCase>& cases, std::string_view id) {
  for (const reports::ValidationCase& c : cases)
    if (c.id == id) return &c;
  return nullptr;
}

TEST(MechanismEvidence, CitedDevCasesExistAndUseTheMechanism) {
  const auto cases = dev_cases();
  ASSERT_EQ(cases.size(), 34u);
  for (const Mechanism& m : layout_mechanisms()) {
    for (std::string_view id : m.dev_cases) {
      const reports::ValidationCase* c = find_case(cases, id);
      ASSERT_NE(c, nullptr) << m.name << " cites dev case " << id << ", which validation/dev_cases.yaml lacks";
      // Only what the case publishes counts: its unpublished knobs are the search's choice.
      EXPECT_TRUE(m.used_by(stated_layout(c->layout)))
          << m.name << " cites dev case " << id << ", whose published layout does not use it";
    }
  }
}

TEST(MechanismEvidence, NoDevCaseUsesAMechanismTheTableCallsUngrounded) {
  const auto cases = dev_cases();
  int ungrounded = 0;
  for (const Mechanism& m : layout_mechanisms()) {
    if (!m.dev_cases.empty()) continue;
    ungrounded += !m.grounded();
    for (const reports::ValidationCase& c : cases) {
      EXPECT_FALSE(m.used_by(stated_layout(c.layout)))
          << "dev case " << c.id << " uses " << m.name
          << ": cite it in search/mechanism_evidence.cc (the mechanism now has evidence)";
    }
  }
  // ZeRO-2, the three ZeRO-3 implementations, GPipe, ZB-H1, etp, the two MoE overlaps (ep has
  // the engine's runs since 2026-11-28).
  EXPECT_EQ(ungrounded, 9);
}

TEST(MechanismEvidence, CitedEngineMeasurementsExist) {
  const std::filesystem::path measurements = std::filesystem::path(SEXTANT_TEST_SOURCE_DIR) / "reports/measurements";
  for (const Mechanism& m : layout_mechanisms()) {
    if (m.engine_measurement.empty()) continue;
    EXPECT_TRUE(std::filesystem::exists(measurements / std::string(m.engine_measurement) / "README.md"))
        << m.name << " cites reports/measurements/" << m.engine_measurement << ", which has no README.md";
  }
}

// Each entry's example uses it, and the engine runs the example exactly when
// the entry says it does (so "not run by the engine" is what `sextant run`
// answers); an engine measurement needs an engine that runs it.
TEST(MechanismEvidence, ExamplesUseTheMechanismAndTheEngineRunsThemAsStated) {
  for (const Mechanism& m : layout_mechanisms()) {
    SCOPED_TRACE(std::string(m.name) + ": " + std::string(m.example));
    EXPECT_TRUE(m.used_by(sim::layout_from_spec(m.example)));
    const sim::PartialLayout p = sim::parse_layout(m.example);
    const int world = p.tp.value_or(1) * p.pp.value_or(1) * p.dp.value_or(1) * p.cp.value_or(1);
    bool executes = true;
    std::string refusal;
    try {
      engine::training::executable_layout(p, world, p.gbs.value_or(0));
    } catch (const sim::ConfigError& e) {
      executes = false;
      refusal = e.what();
    }
    EXPECT_EQ(executes, m.engine_executes) << refusal;
    if (!m.engine_measurement.empty()) EXPECT_TRUE(m.engine_executes);
  }
}

TEST(MechanismEvidence, NamesAreUnique) {
  std::vector<std::string_view> names;
  for (const Mechanism& m : layout_mechanisms()) names.push_back(m.name);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(std::adjacent_find(names.begin(), names.end()), names.end());
}

// Megatron-FSDP at dp=256 (the search's pick for GPT-3 175B on 1,024 A100s,
// issue 29 item 9) rests on ZeRO-3; NeMo's published Llama 3 70B layout
// (cp=2, vpp=5, the distributed optimizer, fp8) on nothing ungrounded.
TEST(MechanismEvidence, ZeroThreeIsUngroundedAndAPublishedRecipeIsNot) {
  const sim::ParallelLayout fsdp = sim::layout_from_spec("tp=4,pp=1,dp=256,mbs=3,gbs=1536,sp=1,zero=3");
  EXPECT_EQ(ungrounded_mechanisms(fsdp),
            std::vector<std::string>{"zero=3 fsdp=megatron-fsdp (no dev case, not run by the engine)"});
  const sim::ParallelLayout moe = sim::layout_from_spec("tp=2,pp=1,dp=8,ep=8,etp=2,mbs=1,gbs=64,zero=2");
  // ep > 1 has the engine's runs (2026-11-28-h200x4-moe-ep); expert tensor parallelism none.
  EXPECT_EQ(ungrounded_names(moe), (std::vector<std::string_view>{"zero=2", "etp>1"}));
  // GPipe: the engine runs it, but no measurement or dev case holds its price.
  EXPECT_EQ(ungrounded_mechanisms(sim::layout_from_spec("pp=4,dp=2,mbs=1,gbs=64,schedule=gpipe")),
            std::vector<std::string>{"schedule=gpipe (no dev case, no engine measurement)"});
  const sim::ParallelLayout nemo = sim::layout_from_spec(
      "tp=4,pp=4,vpp=5,dp=2,cp=2,mbs=1,gbs=128,sp=1,zero=1,precision=fp8,overlap_grad_reduce=1,"
      "overlap_param_gather=1,tp_comm_overlap=1,grad_reduce_in_fp32=0");
  EXPECT_TRUE(ungrounded_mechanisms(nemo).empty());
}

// What a --layout states, nothing more: naming the FSDP implementation is zero=3.
TEST(MechanismEvidence, StatedLayoutKeepsOnlyTheGivenKnobs) {
  sim::PartialLayout p;
  p.fsdp = sim::FsdpImplementation::kFsdp2;
  EXPECT_EQ(ungrounded_names(stated_layout(p)), std::vector<std::string_view>{"zero=3 fsdp=fsdp2"});
  EXPECT_TRUE(ungrounded_names(stated_layout(sim::PartialLayout{})).empty());
  EXPECT_FALSE(stated_layout(sim::PartialLayout{}).overlap_grad_reduce);
}

}  // namespace
}  // namespace sextant::search
