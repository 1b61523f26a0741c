// `sextant run`'s settings prepared for training, before any GPU is touched:
// the rank's shard of the model, the learning-rate schedule, the data, and
// the checkpoint --load names, checked against the run (tools/run_settings.h).
#include <algorithm>
#include <memory>
#include <vector>

#include "engine/data/data_error.h"
#include "sim/core/config_error.h"
#include "tools/run_checkpoint.h"
#include "tools/run_settings.h"

namespace sextant::tools {

namespace {

engine::LrSchedule lr_schedule_of(const RunSettings& s) {
  engine::LrSchedule lr;
  lr.max_lr = s.lr;
  lr.min_lr = s.min_lr >= 0 ? s.min_lr : s.lr / 10;
  lr.warmup_steps = s.warmup_steps >= 0 ? s.warmup_steps : std::min(s.steps / 10, 2000);
  lr.decay_steps = s.lr_decay_steps >= 0 ? s.lr_decay_steps : std::max(s.steps, lr.warmup_steps);
  if (const std::string problem = engine::lr_schedule_problem(lr); !problem.empty())
    throw_option_error("--lr", "", problem);
  return lr;
}

std::unique_ptr<engine::data::TokenBatches> open_data(const RunSettings& s, int vocab, int seq) {
  if (s.data == "synthetic") return std::make_unique<engine::data::SyntheticTokens>(vocab, seq, s.seed);
  try {
    return std::make_unique<engine::data::DatasetTokens>(s.data, vocab, seq, s.seed);
  } catch (const engine::data::DataError& e) {
    throw sim::ConfigError({{e.file(), static_cast<int>(e.line()), 0, "--data", e.reason()}});
  }
}

}  // namespace

PreparedRun prepare_run(const RunSettings& s) {
  PreparedRun run;
  run.settings = s;
  const int seq = static_cast<int>(s.model.seq_length);
  run.shape = engine::transformer_shape_of(s.model, s.layout);  // the rank's shard under tp
  if (const auto problems = engine::transformer_shape_problems(run.shape, s.model); !problems.empty()) {
    std::vector<sim::Diagnostic> d;
    for (const std::string& p : problems) d.push_back({"--model", 0, 0, s.model.name, p});
    throw sim::ConfigError(d);
  }
  run.lr = lr_schedule_of(s);
  run.data = open_data(s, static_cast<int>(s.model.vocab_size), seq);  // tokens of the whole vocabulary
  if (!s.load_dir.empty()) {
    try {
      run.checkpoint = engine::checkpoint::open_checkpoint(s.load_dir);
    } catch (const sim::ConfigError& e) {  // said as --load's problem
      std::vector<sim::Diagnostic> d = e.diagnostics();
      for (sim::Diagnostic& x : d) x.key = "--load";
      throw sim::ConfigError(d);
    }
    check_checkpoint_fits(*run.checkpoint, run);
  }
  return run;
}

#ifndef SEXTANT_HAVE_ENGINE
int run_training(PreparedRun&, std::ostream&) {
  throw sim::ConfigError({{"sextant run", 0, 0, "",
                           "this sextant was built without the CUDA toolkit, so it has no "
                           "engine; rebuild where nvcc is installed (see README)"}});
}
#endif

}  // namespace sextant::tools
