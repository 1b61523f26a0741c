#include "search/layout_search.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <map>
#include <tuple>

#include "search/candidate_space.h"
#include "search/memory_fit.h"
#include "search/split_options.h"
#include "sim/analytic/analytic_model.h"
#include "sim/core/layout_check.h"
#include "sim/memory/memory_model.h"

namespace sextant::search {

using namespace sim;

namespace {

auto knobs(const ParallelLayout& l) {
  return std::make_tuple(l.tp, l.cp, l.pp, l.dp, l.vpp, l.ep, l.etp, l.mbs, l.sp,
                         static_cast<int>(l.recompute), l.zero, static_cast<int>(l.schedule),
                         static_cast<int>(l.precision), static_cast<int>(l.attention),
                         l.overlap_grad_reduce, l.overlap_param_gather, l.tp_comm_overlap,
                         l.first_stage_layers, l.last_stage_layers, l.embedding_in_split,
                         l.loss_in_split, std::string_view(l.pp_layout),
                         static_cast<int>(l.fsdp), l.grad_reduce_in_fp32, l.moe_a2a_overlap,
                         l.moe_shared_expert_overlap, static_cast<int>(l.cp_comm_type));
}

// What one worker found.
struct Partial {
  std::vector<SimulationResult> best;
  std::vector<SimulationResult> all;
  long evaluated = 0, valid = 0, feasible = 0, bounded = 0;
  std::optional<ParallelLayout> first_invalid;
  std::size_t first_invalid_point = SIZE_MAX;
  std::optional<ParallelLayout> smallest_unfit;
  double smallest_unfit_bytes = 0;
};

void keep_best(std::vector<SimulationResult>& best, const SimulationResult& r, int top) {
  if (static_cast<int>(best.size()) == top && !ranks_before(r, best.back())) return;
  best.insert(std::upper_bound(best.begin(), best.end(), r, ranks_before), r);
  if (static_cast<int>(best.size()) > top) best.pop_back();
}

bool same_split(const ParallelLayout& a, const ParallelLayout& b) {
  return a.pp == b.pp && a.vpp == b.vpp && a.first_stage_layers == b.first_stage_layers &&
         a.last_stage_layers == b.last_stage_layers && a.embedding_in_split == b.embedding_in_split &&
         a.loss_in_split == b.loss_in_split && a.pp_layout == b.pp_layout;
}

// Layouts of the first pass (each with the default split of its pp and vpp)
// whose other splits are tried. A split moves layers between stages, so it
// changes the step by at most the pipeline's imbalance: the layouts that win
// with the default split are where another split can win.
constexpr int kSplitPool = 16;

}  // namespace

bool ranks_before(const SimulationResult& a, const SimulationResult& b) {
  if (a.step_time_s != b.step_time_s) return a.step_time_s < b.step_time_s;
  const double ma = a.memory.total(), mb = b.memory.total();
  if (ma != mb) return ma < mb;
  return knobs(a.layout) < knobs(b.layout);
}

SearchResult search_layouts(const ModelConfig& m, const ClusterConfig& cluster,
                            const CostProfile& profile, long gpus, const PartialLayout& partial,
                            const SearchOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  SearchResult out;
  const double capacity = options.constraints.memory_limit_bytes.value_or(
      static_cast<double>(cluster.gpu.memory_bytes));
  out.memory_limit_bytes = (1.0 - options.constraints.memory_headroom) * capacity;
  // What the profile's framework cannot run is not tried (framework.h).
  SearchConstraints constraints = options.constraints;
  constraints.allow_selective_recompute =
      constraints.allow_selective_recompute && profile.supports.selective_recompute;
  constraints.supports = profile.supports;
  const std::vector<GridPoint> grid = grid_points(m, cluster, gpus, partial, constraints);
  const bool try_splits = !partial.split_given() && profile.supports.uneven_pipeline_split;
  const int pool = try_splits ? std::max(options.top, kSplitPool) : options.top;

  const int hardware = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int workers = std::max(1, std::min<int>(options.threads > 0 ? options.threads : hardware,
                                                static_cast<int>(grid.size())));
  std::vector<Partial> partials(workers);
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> done{0};

  // Branch and bound (off when every result is kept): a layout whose step
  // without its data-parallel sync and optimizer already exceeds the worst of
  // a full best list cannot enter it, and neither can any layout differing
  // from it only in that sync (step_time_lower_bound_s). The best list is the
  // one the full enumeration gives: only layouts that rank after its last
  // member are skipped, and each worker bounds by its own list, a superset's
  // worst.
  const bool bound = options.prune_by_bound && !options.keep_all;
  auto work = [&](Partial& mine) {
    // Layouts of one grid point share a few splits (one per vpp): check and
    // build each once.
    PipelineSplit split;
    SplitProblem split_problem = SplitProblem::kNone;
    ParallelLayout split_of;
    bool have_split = false;
    // Layouts differing only in their data-parallel sync (for_each_layout_at
    // gives them in a run) share their stages' weights and activations and
    // their bound.
    ParallelLayout group_of;
    bool have_group = false;
    std::vector<StageHoldings> holdings;
    std::optional<double> bound_s;
    StepBoundCache bounds;  // one costing per run of recompute choices
    for (std::size_t i = next++; i < grid.size(); i = next++) {
      for_each_layout_at(m, partial, grid[i], constraints, [&](const ParallelLayout& l) {
        ++mine.evaluated;
        if (!have_split || !same_split(split_of, l)) {
          split_problem = check_pipeline_split(m, l);
          if (split_problem == SplitProblem::kNone) split = pipeline_split(m, l);
          split_of = l;
          have_split = true;
        }
        if (!is_valid_layout(m, cluster, gpus, l, split_problem)) {
          if (i < mine.first_invalid_point) {
            mine.first_invalid = l;
            mine.first_invalid_point = i;
          }
          return;
        }
        ++mine.valid;
        if (!have_group || !same_but_data_parallel_sync(group_of, l, false)) {
          holdings = peak_stage_holdings(m, l, split, profile.software);
          bound_s.reset();
          group_of = l;
          have_group = true;
        }
        // Memory is cheap: prune before timing the step.
        const MemoryBreakdown memory = peak_memory_per_gpu(l, holdings);
        const double bytes = memory_needed_bytes(memory, profile);
        const bool fits = bytes <= out.memory_limit_bytes;
        if (fits) {
          ++mine.feasible;
        } else if (!mine.smallest_unfit || bytes < mine.smallest_unfit_bytes) {
          mine.smallest_unfit = l;
          mine.smallest_unfit_bytes = bytes;
        }
        const bool rank = fits || !options.require_memory_fit;
        if (!rank && !options.keep_all) return;
        if (bound && static_cast<int>(mine.best.size()) == pool) {
          if (!bound_s) bound_s = bounds.lower_bound_s(m, cluster, profile, l, split);
          if (*bound_s > mine.best.back().step_time_s) {
            ++mine.bounded;
            return;
          }
        }
        SimulationResult r = simulate_analytic(m, cluster, profile, l, memory, split);
        r.fits_memory = fits;  // against the search's limit, headroom included
        if (rank) keep_best(mine.best, r, pool);
        if (options.keep_all) mine.all.push_back(r);
      });
      ++done;
    }
  };

  std::vector<std::thread> threads;
  for (int w = 1; w < workers; ++w) threads.emplace_back(work, std::ref(partials[w]));
  if (options.progress) {
    // The calling thread reports progress while the others work, then joins in.
    std::thread reporter_work(work, std::ref(partials[0]));
    while (done.load() < grid.size()) {
      options.progress(grid.empty() ? 1.0 : static_cast<double>(done.load()) / grid.size());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    reporter_work.join();
    options.progress(1.0);
  } else {
    work(partials[0]);
  }
  for (std::thread& t : threads) t.join();

  for (Partial& p : partials) {
    out.evaluated += p.evaluated;
    out.valid += p.valid;
    out.feasible += p.feasible;
    out.bounded += p.bounded;
    for (const SimulationResult& r : p.best) keep_best(out.best, r, pool);
    out.all.insert(out.all.end(), p.all.begin(), p.all.end());
    if (p.smallest_unfit && (!out.smallest_unfit || p.smallest_unfit_bytes < out.smallest_unfit_bytes ||
                             (p.smallest_unfit_bytes == out.smallest_unfit_bytes &&
                              knobs(*p.smallest_unfit) < knobs(*out.smallest_unfit)))) {
      out.smallest_unfit = p.smallest_unfit;
      out.smallest_unfit_bytes = p.smallest_unfit_bytes;
    }
  }
  // The first invalid candidate in grid order, whichever worker saw it.
  std::size_t first_point = SIZE_MAX;
  for (Partial& p : partials) {
    if (p.first_invalid && p.first_invalid_point < first_point) {
      first_point = p.first_invalid_point;
      out.first_invalid = p.first_invalid;
    }
  }
  if (try_splits) {
    std::vector<SimulationResult> refined = out.best;
    std::map<std::pair<int, int>, std::vector<SplitKnobs>> options_at;  // by (pp, vpp)
    for (const SimulationResult& base : out.best) {
      const ParallelLayout& b = base.layout;
      if (b.pp < 2) continue;
      auto [it, fresh] = options_at.try_emplace({b.pp, b.vpp});
      if (fresh) it->second = split_options(m, b.pp, b.vpp);
      for (const SplitKnobs& k : it->second) {
        ParallelLayout l = b;
        k.apply_to(l);
        if (knobs(l) == knobs(b)) continue;
        ++out.evaluated;
        if (!is_valid_layout(m, cluster, gpus, l)) continue;
        ++out.valid;
        const PipelineSplit split = pipeline_split(m, l);
        const MemoryBreakdown memory = peak_memory_per_gpu(m, l, split, profile.software);
        const bool fits = memory_needed_bytes(memory, profile) <= out.memory_limit_bytes;
        if (fits) ++out.feasible;
        const bool rank = fits || !options.require_memory_fit;
        if (!rank && !options.keep_all) continue;
        SimulationResult r = simulate_analytic(m, cluster, profile, l, memory, split);
        r.fits_memory = fits;
        if (rank) keep_best(refined, r, pool);
        if (options.keep_all) out.all.push_back(r);
      }
    }
    out.best = std::move(refined);
  }
  if (static_cast<int>(out.best.size()) > options.top) out.best.resize(options.top);
  std::sort(out.all.begin(), out.all.end(), ranks_before);
  out.search_time_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

}  // namespace sextant::search
