// Issue 29, item 9: the search says when its pick rests on a mechanism no dev
// case uses and the engine has not run (ZeRO-3 / FSDP), and shows the fastest
// layout of the published kind beside it, through the built binary: the note
// under the table, per-row "ungrounded" and "grounded_runner_up" in JSON, and
// the runner-up explained by --explain.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/support/run_sextant.h"
#include "tests/support/temp_dir.h"

namespace sextant::tools {
namespace {

using sextant::testing::CommandResult;
using sextant::testing::run_sextant;
using sextant::testing::TempDir;

constexpr auto npos = std::string::npos;
const std::string kNote =
    "\nnote: the model's price for these mechanisms has no evidence behind it: no dev case\n"
    "  (validation/dev_cases.yaml) uses them and no engine measurement (reports/measurements/) covers them:\n";

// One search, run twice: as the table and as JSON.
struct SearchRun {
  std::string table;
  nlohmann::json json;
};

SearchRun run_search(const std::string& args) {
  TempDir dir;
  const CommandResult table = run_sextant(dir, args);
  EXPECT_EQ(table.exit_code, 0) << table.err;
  const CommandResult json = run_sextant(dir, args + " --format json");
  EXPECT_EQ(json.exit_code, 0) << json.err;
  return {table.out, json.exit_code == 0 ? nlohmann::json::parse(json.out) : nlohmann::json::object()};
}

// The search for `args` as a table and as JSON, checked for the note, the
// fields and a grounded runner-up (zero <= 1, no FSDP) when its pick is ZeRO-3,
// and for no note when the pick is grounded. Returns whether the pick was ZeRO-3.
bool expect_grounding_reported(const std::string& args) {
  const SearchRun run = run_search(args);
  const std::string& table = run.table;
  const nlohmann::json& j = run.json;
  const nlohmann::json& pick = j.at("results").at(0);
  EXPECT_TRUE(pick.at("ungrounded").is_array());
  if (pick.at("layout").at("zero") != 3) {
    EXPECT_EQ(table.find("note: the model's price"), npos) << table;
    EXPECT_TRUE(pick.at("ungrounded").empty()) << pick.dump(2);
    EXPECT_FALSE(j.contains("grounded_runner_up"));
    return false;
  }
  const std::string fsdp = pick.at("layout").at("fsdp");
  EXPECT_EQ(pick.at("ungrounded"),
            nlohmann::json::array({"zero=3 fsdp=" + fsdp + " (no dev case, not run by the engine)"}));
  EXPECT_NE(table.find(kNote + "    zero=3 fsdp=" + fsdp + " (no dev case, not run by the engine): rows 1"), npos)
      << table;
  const nlohmann::json& g = j.at("grounded_runner_up");
  EXPECT_TRUE(g.is_object()) << j.dump(2);
  if (!g.is_object()) return true;
  EXPECT_LE(g.at("layout").at("zero").get<int>(), 1);
  EXPECT_FALSE(g.at("layout").at("moe_a2a_overlap").get<bool>());
  EXPECT_EQ(g.at("layout").at("ep"), 1);
  EXPECT_TRUE(g.at("fits_memory").get<bool>());
  const double pick_s = pick.at("step_time_s"), runner_up_s = g.at("step_time_s");
  EXPECT_GE(runner_up_s, pick_s);
  EXPECT_NEAR(g.at("slower_percent").get<double>(), 100 * (runner_up_s / pick_s - 1), 1e-9);
  EXPECT_NE(g.at("loses_on").get<std::string>(), "");
  // The table says the same, in its own words.
  char slower[160];
  std::snprintf(slower, sizeof slower,
                "  The fastest layout with evidence for every mechanism (the published kind) is %.1f %% slower:\n    tp=",
                g.at("slower_percent").get<double>());
  EXPECT_NE(table.find(slower), npos) << table;
  EXPECT_NE(table.find("    it loses on: " + g.at("loses_on").get<std::string>() + "\n"), npos) << table;
  return true;
}

// Llama 3 70B on 256 H100s (the issue: Megatron-FSDP picked over tp=4, pp=4).
TEST(SearchGrounding, Llama3_70bOn256H100s) {
  EXPECT_TRUE(expect_grounding_reported(
      "search --model llama3-70b --cluster dgx-h100 --gpus 256 --global-batch 1024 --top 5"));
}

// GPT-3 175B on 1,024 A100s (the issue: ZeRO-3 at dp=256).
TEST(SearchGrounding, Gpt3_175bOn1024A100s) {
  EXPECT_TRUE(expect_grounding_reported(
      "search --model gpt3-175b --cluster dgx-a100 --gpus 1024 --global-batch 1536 --top 5"));
}

// The published kind of layout fixed (pp=16: ZeRO-2/3 need pp = 1): every row
// is grounded, and nothing is said.
TEST(SearchGrounding, AGroundedPickPrintsNoNote) {
  EXPECT_FALSE(expect_grounding_reported(
      "search --model gpt3-175b --cluster dgx-a100 --gpus 1024 --global-batch 1536 --layout pp=16 --top 5"));
}

// GPT-1.3B on 8 A100s: ZeRO-2 and ZeRO-1 tie on the step (the model prices
// their data-parallel traffic alike), and ZeRO-2 ranks first on memory; the note
// says the grounded layout is as fast and loses on memory alone, and lists the
// rows of each ungrounded mechanism.
TEST(SearchGrounding, ATieWithTheGroundedLayoutIsSaidAsSuch) {
  const SearchRun run = run_search("search --model gpt-1.3b --cluster dgx-a100 --gpus 8 --global-batch 64 --top 8");
  EXPECT_NE(run.table.find(kNote +
                           "    zero=2 (no dev case, not run by the engine): rows 1, 2, 7, 8\n"
                           "    zero=3 fsdp=megatron-fsdp (no dev case, not run by the engine): rows 5, 6\n"
                           "  The fastest layout with evidence for every mechanism (the published kind) is as fast:\n"
                           "    tp=1 pp=1 dp=8 mbs=8 rc=none zero=1 ovl=gp\n"),
            npos) << run.table;
  EXPECT_NE(run.table.find("    it ranks below on memory alone: 41.08 GiB against 36.79 GiB per GPU\n"), npos)
      << run.table;
  const nlohmann::json& g = run.json.at("grounded_runner_up");
  EXPECT_EQ(g.at("layout").at("zero"), 1);
  EXPECT_LT(std::abs(g.at("slower_percent").get<double>()), 0.05);
}

// Llama 3 8B on 64 H100s at tp=2: row 1 is grounded (ZeRO-1), lower rows use
// ZeRO-2 and ZeRO-3; the note names those rows and no runner-up is searched.
TEST(SearchGrounding, UngroundedLowerRowsAreNamedBelowAGroundedPick) {
  const SearchRun run =
      run_search("search --model llama3-8b --cluster dgx-h100 --gpus 64 --global-batch 512 --layout tp=2 --top 8");
  EXPECT_NE(run.table.find(kNote +
                           "    zero=2 (no dev case, not run by the engine): rows 4, 5, 6\n"
                           "    zero=3 fsdp=megatron-fsdp (no dev case, not run by the engine): rows 7, 8\n"
                           "  The best layout (row 1) has evidence for every mechanism.\n"),
            npos) << run.table;
  const nlohmann::json& j = run.json;
  EXPECT_TRUE(j.at("results").at(0).at("ungrounded").empty());
  EXPECT_EQ(j.at("results").at(3).at("ungrounded"),
            nlohmann::json::array({"zero=2 (no dev case, not run by the engine)"}));
  EXPECT_FALSE(j.contains("grounded_runner_up"));
}

// --engine event re-scores the runner-up as it re-scores the rows, so the two
// step times compared are the same engine's: the runner-up's is what
// `simulate --engine event` gives its layout.
TEST(SearchGrounding, TheEventEngineTimesTheRunnerUpToo) {
  const SearchRun run =
      run_search("search --model gpt3-175b --cluster dgx-a100 --gpus 1024 --global-batch 1536 --top 3 --engine event");
  const nlohmann::json& g = run.json.at("grounded_runner_up");
  ASSERT_TRUE(g.is_object()) << run.json.dump(2);
  const nlohmann::json& l = g.at("layout");
  std::string spec;
  for (const char* knob : {"tp", "pp", "vpp", "dp", "cp", "mbs", "gbs", "zero"})
    spec += std::string(spec.empty() ? "" : ",") + knob + "=" + std::to_string(l.at(knob).get<int>());
  spec += ",sp=" + std::to_string(l.at("sp").get<bool>()) + ",recompute=" + l.at("recompute").get<std::string>() +
          ",schedule=" + l.at("schedule").get<std::string>() +
          ",overlap_grad_reduce=" + std::to_string(l.at("overlap_grad_reduce").get<bool>()) +
          ",overlap_param_gather=" + std::to_string(l.at("overlap_param_gather").get<bool>()) +
          ",tp_comm_overlap=" + std::to_string(l.at("tp_comm_overlap").get<bool>());
  TempDir dir;
  const CommandResult simulated = run_sextant(
      dir, "simulate --model gpt3-175b --cluster dgx-a100 --gpus 1024 --engine event --format json --layout " + spec);
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_DOUBLE_EQ(g.at("step_time_s").get<double>(),
                   nlohmann::json::parse(simulated.out).at("step_time_s").get<double>());
  const double pick_s = run.json.at("results").at(0).at("step_time_s");
  EXPECT_NEAR(g.at("slower_percent").get<double>(), 100 * (g.at("step_time_s").get<double>() / pick_s - 1), 1e-9);
}

// --explain: the completed pick's ungrounded mechanism, then the runner-up with
// its layout, step time, MFU, memory and where it loses.
TEST(SearchGrounding, ExplainShowsTheGroundedRunnerUp) {
  TempDir dir;
  const std::string args = "search --model gpt3-175b --cluster dgx-a100 --gpus 1024 --global-batch 1536 --explain";
  const CommandResult text = run_sextant(dir, args);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  ASSERT_NE(text.out.find("zero=3"), npos) << text.out;  // the pick the issue names
  EXPECT_NE(text.out.find("\nrests on mechanisms without evidence: zero=3 fsdp=megatron-fsdp (no dev case, not run "
                          "by the engine)\nfastest layout with evidence for every mechanism: tp="),
            npos) << text.out;
  EXPECT_NE(text.out.find("% slower), MFU "), npos) << text.out;
  EXPECT_NE(text.out.find("\n  it loses on: "), npos) << text.out;
  const CommandResult json_run = run_sextant(dir, args + " --format json");
  ASSERT_EQ(json_run.exit_code, 0) << json_run.err;
  const nlohmann::json j = nlohmann::json::parse(json_run.out);
  EXPECT_EQ(j.at("ungrounded"),
            nlohmann::json::array({"zero=3 fsdp=megatron-fsdp (no dev case, not run by the engine)"}));
  ASSERT_TRUE(j.at("grounded_runner_up").is_object()) << j.dump(2);
  EXPECT_LE(j.at("grounded_runner_up").at("layout").at("zero").get<int>(), 1);
  // The runner-up line in the text carries its full layout.
  const std::string spec_start = "fastest layout with evidence for every mechanism: tp=" +
                                 std::to_string(j.at("grounded_runner_up").at("layout").at("tp").get<int>()) +
                                 ",pp=" + std::to_string(j.at("grounded_runner_up").at("layout").at("pp").get<int>());
  EXPECT_NE(text.out.find(spec_start), npos) << text.out;
}

// zero=3 fixed in --layout: said, with no runner-up (none exists within it).
TEST(SearchGrounding, AnUngroundedKnobFixedInTheLayoutIsNamed) {
  const SearchRun run = run_search(
      "search --model gpt3-175b --cluster dgx-a100 --gpus 1024 --global-batch 1536 --layout zero=3 --top 3");
  EXPECT_NE(run.table.find(kNote + "    zero=3 fsdp=megatron-fsdp (no dev case, not run by the engine): rows 1, 2, 3\n"
                                   "  The best layout rests on them; "
                                   "--layout fixes zero=3 fsdp=megatron-fsdp (no dev case, not run by the engine); "
                                   "leave it out to rank layouts with evidence for every mechanism.\n"),
            npos) << run.table;
  const nlohmann::json& j = run.json;
  EXPECT_TRUE(j.at("grounded_runner_up").is_null());
  EXPECT_EQ(j.at("grounded_runner_up_missing"),
            "--layout fixes zero=3 fsdp=megatron-fsdp (no dev case, not run by the engine); leave it out to rank "
            "layouts with evidence for every mechanism");
}

}  // namespace
}  // namespace sextant::tools
