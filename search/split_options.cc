#include "search/split_options.h"

#include <algorithm>

#include "sim/core/pipeline_split.h"

namespace sextant::search {

using namespace sim;

namespace {

bool valid_split(const ModelConfig& m, int pp, int vpp, const SplitKnobs& k) {
  ParallelLayout l;
  l.pp = pp;
  l.vpp = vpp;
  k.apply_to(l);
  return check_pipeline_split(m, l) == SplitProblem::kNone;
}

// The layers each (rank, chunk) holds under `k`: two spellings of one split
// (first_stage_layers=7,last_stage_layers=7 and the even split of 56 layers
// over pp=8, say) hold the same, and the model sees only this.
std::vector<ChunkLayers> chunks_of(const ModelConfig& m, int pp, int vpp, const SplitKnobs& k) {
  ParallelLayout l;
  l.pp = pp;
  l.vpp = vpp;
  k.apply_to(l);
  const PipelineSplit split = pipeline_split(m, l);
  std::vector<ChunkLayers> chunks;
  for (int s = 0; s < pp; ++s)
    for (int c = 0; c < vpp; ++c) chunks.push_back(split.chunk(s, c));
  return chunks;
}

bool same_chunks(const std::vector<ChunkLayers>& a, const std::vector<ChunkLayers>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const ChunkLayers& x, const ChunkLayers& y) {
    return x.first_layer == y.first_layer && x.num_layers == y.num_layers && x.embedding == y.embedding &&
           x.loss == y.loss;
  });
}

// `options` with each split kept once, under its first spelling (the order
// split_options proposes: the even split, the accounting, first/last, ...).
std::vector<SplitKnobs> distinct_splits(const ModelConfig& m, int pp, int vpp, const std::vector<SplitKnobs>& options) {
  std::vector<SplitKnobs> out;
  std::vector<std::vector<ChunkLayers>> seen;
  for (const SplitKnobs& k : options) {
    std::vector<ChunkLayers> chunks = chunks_of(m, pp, vpp, k);
    if (std::any_of(seen.begin(), seen.end(), [&](const auto& other) { return same_chunks(chunks, other); }))
      continue;
    seen.push_back(std::move(chunks));
    out.push_back(k);
  }
  return out;
}

int round_up(int value, int multiple) { return (value + multiple - 1) / multiple * multiple; }

// First/last splits giving each end at most what a middle rank holds (the
// ends also hold the embedding, the output layer and, in 1F1B, the most
// micro-batches), in increasing order of the largest stage.
std::vector<SplitKnobs> first_last_options(const ModelConfig& m, int pp, int vpp) {
  std::vector<std::pair<int, SplitKnobs>> found;  // (largest stage, knobs)
  if (pp < 2) return {};
  const int L = m.num_layers;
  const int high = round_up((L + pp - 1) / pp, vpp) + vpp;
  for (int first = 0; first <= high; first += vpp) {
    for (int last = 0; last <= high; last += vpp) {
      if (first == 0 && last == 0) continue;
      SplitKnobs k;
      k.first_stage_layers = first;
      k.last_stage_layers = last;
      if (!valid_split(m, pp, vpp, k)) continue;
      const int middle_ranks = pp - (first > 0) - (last > 0);
      const int middle = middle_ranks > 0 ? (L - first - last) / middle_ranks : 0;
      if (middle_ranks > 0 && (first > middle || last > middle)) continue;
      found.emplace_back(std::max({first, last, middle}), k);
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<SplitKnobs> out;
  for (auto& [largest, k] : found) out.push_back(std::move(k));
  return out;
}

void add_divisors(int n, std::vector<int>& out) {
  for (int d = 1; d <= n; ++d) {
    if (n % d == 0) out.push_back(d);
  }
}

}  // namespace

void SplitKnobs::apply_to(ParallelLayout& l) const {
  l.first_stage_layers = first_stage_layers;
  l.last_stage_layers = last_stage_layers;
  l.embedding_in_split = embedding_in_split;
  l.loss_in_split = loss_in_split;
  l.pp_layout = pp_layout;
}

SplitKnobs given_split(const PartialLayout& p) {
  SplitKnobs k;
  k.first_stage_layers = p.first_stage_layers.value_or(0);
  k.last_stage_layers = p.last_stage_layers.value_or(0);
  k.embedding_in_split = p.embedding_in_split.value_or(false);
  k.loss_in_split = p.loss_in_split.value_or(false);
  k.pp_layout = p.pp_layout.value_or("");
  return k;
}

std::string balanced_pp_layout(int num_layers, int pp, int vpp) {
  const int stages = pp * vpp;
  const int units = num_layers + 2;  // the embedding and the loss count one each
  if (units < stages) return "";
  std::vector<int> per_stage(static_cast<std::size_t>(stages), units / stages);
  // Virtual stage k is rank k mod pp, chunk k div pp. Extra units go chunk by
  // chunk round ranks 1, 2, ..., pp−1, 0, keeping rank totals within one; the
  // stages holding the embedding and the loss come last.
  std::vector<int> order;
  for (int c = 0; c < vpp; ++c) {
    for (int i = 1; i <= pp; ++i) {
      const int s = i % pp;
      const int k = c * pp + s;
      if (k != 0 && k != stages - 1) order.push_back(k);
    }
  }
  order.push_back(0);
  if (stages > 1) order.push_back(stages - 1);
  for (int i = 0; i < units % stages; ++i) ++per_stage[static_cast<std::size_t>(order[i])];
  std::vector<std::string> text(static_cast<std::size_t>(stages));
  for (int k = 0; k < stages; ++k) {
    const int layers = per_stage[static_cast<std::size_t>(k)] - (k == 0) - (k == stages - 1);
    if (layers < 0) return "";
    std::string& s = text[static_cast<std::size_t>(k)];
    if (k == 0) s += "E";
    s.append(static_cast<std::size_t>(layers), 't');
    if (k == stages - 1) s += "L";
  }
  return compress_pp_layout(text);
}

std::vector<SplitKnobs> split_options(const ModelConfig& m, int pp, int vpp) {
  std::vector<SplitKnobs> out;
  auto add = [&](const SplitKnobs& k) {
    if (valid_split(m, pp, vpp, k)) out.push_back(k);
  };
  add(SplitKnobs{});
  add(SplitKnobs{0, 0, true, true, ""});
  add(SplitKnobs{0, 0, false, true, ""});
  add(SplitKnobs{0, 0, true, false, ""});
  for (const SplitKnobs& k : first_last_options(m, pp, vpp)) out.push_back(k);
  if (out.empty()) add(SplitKnobs{0, 0, false, false, balanced_pp_layout(m.num_layers, pp, vpp)});
  return distinct_splits(m, pp, vpp, out);
}

SplitKnobs default_split(const ModelConfig& m, int pp, int vpp) {
  if (m.num_layers % (pp * vpp) == 0) return {};
  std::vector<SplitKnobs> options = split_options(m, pp, vpp);
  return options.empty() ? SplitKnobs{} : options.front();
}

std::vector<int> vpp_options(int num_layers, int pp) {
  std::vector<int> out;
  add_divisors(num_layers / pp, out);
  add_divisors((num_layers + pp - 1) / pp, out);
  if ((num_layers + 1) % pp == 0) add_divisors((num_layers + 1) / pp, out);
  if ((num_layers + 2) % pp == 0) add_divisors((num_layers + 2) / pp, out);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace sextant::search
