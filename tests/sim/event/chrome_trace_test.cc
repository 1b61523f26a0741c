#include "sim/event/chrome_trace.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <sstream>

#include "sim/event/event_simulation.h"
#include "sim/event/json_text.h"
#include "sim/plan/task_name.h"
#include "tests/support/test_models.h"

namespace sextant::sim {
namespace {

TEST(JsonText, EscapesStrings) {
  std::string out;
  append_json_string(out, "a\"b\\c\nd\te\x01 é");
  EXPECT_EQ(out, "\"a\\\"b\\\\c\\nd\\te\\u0001 é\"");
  EXPECT_EQ(nlohmann::json::parse(out), "a\"b\\c\nd\te\x01 é");
}

TEST(JsonText, WritesNumbersThatReadBack) {
  std::string out;
  append_json_number(out, 0.1 + 0.2);
  EXPECT_EQ(nlohmann::json::parse(out).get<double>(), 0.1 + 0.2);
  out.clear();
  append_json_number(out, 1.0 / 0.0);
  EXPECT_EQ(out, "null");
}

// One process per stage, one thread per stream in use, one complete event per
// task under the engine's name, critical-path tasks flagged, a memory counter.
TEST(ChromeTrace, OpensAsPerfettoExpects) {
  ModelConfig model = testing::gpt3_175b();
  model.num_layers = 8;
  const ClusterConfig cluster = testing::dgx_a100();
  ParallelLayout l;
  l.tp = 8;
  l.sp = true;
  l.pp = 4;
  l.dp = 2;
  l.gbs = 8;
  l.zero = 1;
  const EventSimulation e =
      simulate_event(model, cluster, testing::ideal_profile(cluster.gpu.name), l);
  std::ostringstream text;
  write_chrome_trace(text, e.plan, e.timeline, e.costs, e.critical_path, "gpt \"tiny\"");
  const nlohmann::json trace = nlohmann::json::parse(text.str());
  EXPECT_EQ(trace["otherData"]["title"], "gpt \"tiny\"");

  std::map<int, std::string> processes;
  std::map<std::pair<int, int>, std::string> threads;
  std::size_t tasks = 0, critical = 0, counters = 0;
  for (const nlohmann::json& event : trace["traceEvents"]) {
    const std::string ph = event["ph"];
    if (ph == "M" && event["name"] == "process_name") processes[event["pid"]] = event["args"]["name"];
    if (ph == "M" && event["name"] == "thread_name") {
      threads[{event["pid"], event["tid"]}] = event["args"]["name"];
    }
    if (ph == "C") ++counters;
    if (ph != "X") continue;
    EXPECT_EQ(event["name"], task_name(e.plan, e.plan.tasks[tasks]));
    EXPECT_GE(event["dur"].get<double>(), 0.0);
    if (event.contains("args") && event["args"]["critical_path"] == true) ++critical;
    ++tasks;
  }
  EXPECT_EQ(tasks, e.plan.tasks.size());
  EXPECT_EQ(critical, e.critical_path.size());
  EXPECT_GT(counters, 0u);
  ASSERT_EQ(processes.size(), 4u);
  EXPECT_EQ(processes[1], "stage 1 (layers 2-3)");
  auto thread = [&](int pid, int tid) { return threads[std::make_pair(pid, tid)]; };
  EXPECT_EQ(thread(1, 0), "compute");
  EXPECT_EQ(thread(1, 1), "TP comm");
  EXPECT_EQ(thread(1, 4), "PP send (forward)");
  EXPECT_EQ(thread(1, 6), "DP comm");
  EXPECT_FALSE(threads.count(std::make_pair(1, 2)));  // no context parallelism, no CP track
}

}  // namespace
}  // namespace sextant::sim
