#include "engine/model/gradient_bucket_plan.h"

#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace sextant::engine {

namespace {

// The task, of the last micro-batch, after which a tensor's gradient is final.
struct FinalWrite {
  sim::Block block = sim::Block::kNone;
  int layer = sim::kNoIndex;
};

std::vector<FinalWrite> final_writes(const ParameterLayout& layout) {
  std::vector<FinalWrite> writes(layout.tensors().size());
  auto set = [&](int tensor, sim::Block block, int layer) {
    if (tensor != LayerTensors::kAbsent) writes[static_cast<std::size_t>(tensor)] = {block, layer};
  };
  for (int l = 0; l < layout.num_layers(); ++l) {
    const LayerTensors& t = layout.layer(l);
    for (const int tensor : t.all()) set(tensor, sim::Block::kAttention, l);
  }
  set(layout.final_norm_gamma(), sim::Block::kOutput, sim::kNoIndex);
  set(layout.final_norm_beta(), sim::Block::kOutput, sim::kNoIndex);
  set(layout.lm_head(), sim::Block::kOutput, sim::kNoIndex);
  // After lm_head: a tied wte's last write is the embedding's backward (on a
  // chunk holding the embedding; a last stage's tied copy ends with the output's).
  if (layout.holds_embedding()) set(layout.wte(), sim::Block::kEmbedding, sim::kNoIndex);
  set(layout.wpe(), sim::Block::kEmbedding, sim::kNoIndex);
  return writes;
}

bool is_tensor_parallel(sim::TaskKind kind) {
  return kind == sim::TaskKind::kTensorParallel || kind == sim::TaskKind::kTensorParallelScatter;
}

}  // namespace

std::vector<std::size_t> final_gradient_writes(const ParameterLayout& layout, std::span<const sim::Task> tasks) {
  const std::vector<ParameterTensor>& tensors = layout.tensors();
  const std::vector<FinalWrite> writes = final_writes(layout);
  int last_microbatch = sim::kNoIndex;
  for (const sim::Task& t : tasks) last_microbatch = std::max(last_microbatch, static_cast<int>(t.microbatch));
  std::vector<std::size_t> ready(tensors.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const FinalWrite w = writes[i];
    bool found = false;
    for (std::size_t k = 0; k < tasks.size(); ++k) {
      const sim::Task& t = tasks[k];
      if (t.kind == sim::TaskKind::kCompute && t.pass == sim::Pass::kBackward && t.block == w.block &&
          t.microbatch == last_microbatch && (w.layer == sim::kNoIndex || t.layer == w.layer)) {
        ready[i] = k;
        found = true;
        // Under tensor parallelism the block's collective task after it (its
        // all-reduce or reduce-scatter) runs the block's norm backward
        // (transformer.h): the block's writes end there.
        while (ready[i] + 1 < tasks.size() && is_tensor_parallel(tasks[ready[i] + 1].kind) &&
               tasks[ready[i] + 1].block == t.block && tasks[ready[i] + 1].layer == t.layer &&
               tasks[ready[i] + 1].microbatch == t.microbatch)
          ++ready[i];
      }
    }
    if (!found || w.block == sim::Block::kNone)
      throw std::logic_error("plan_gradient_buckets: no backward task of micro-batch " +
                             std::to_string(last_microbatch) + " writes the gradient of " + tensors[i].name);
  }
  return ready;
}

std::vector<ElementRange> gradient_bucket_ranges(const ParameterLayout& layout, std::size_t bucket_elements) {
  const std::vector<ParameterTensor>& tensors = layout.tensors();
  // The units buckets are made of, as the Plan's are (sim/plan/gradient_buckets.cc:
  // Megatron-Core's DDP lays gradients out in reverse and cuts buckets of at
  // least bucket_elements without splitting a layer): the output (final norm
  // and output layer), each layer, the embeddings, as [begin, end) element
  // ranges of the layout, which holds each one contiguously (parameter_layout.h).
  auto unit_of = [&](std::span<const int> members) {
    ElementRange u{layout.total_elements(), 0};
    for (const int t : members) {
      if (t == LayerTensors::kAbsent) continue;
      const ParameterTensor& p = tensors[static_cast<std::size_t>(t)];
      u.first = std::min(u.first, p.offset);
      u.second = std::max(u.second, p.offset + p.elements());
    }
    return u;
  };
  std::vector<ElementRange> reverse;  // in Megatron's order: the output first, the embeddings last
  const bool tied_output = layout.lm_head() == layout.wte();
  const int output_tensors[] = {layout.final_norm_gamma(), layout.final_norm_beta(),
                                tied_output ? LayerTensors::kAbsent : layout.lm_head()};
  const ElementRange output = unit_of(output_tensors);
  if (output.first < output.second) reverse.push_back(output);
  for (int l = layout.num_layers() - 1; l >= 0; --l) {
    reverse.push_back(unit_of(layout.layer(l).all()));
  }
  const int embedding_tensors[] = {layout.wte(), layout.wpe()};
  const ElementRange embedding = unit_of(embedding_tensors);  // or a tied copy of wte

  // Cut from the output down; the embeddings join the bucket still open.
  std::vector<ElementRange> cut;  // reverse order
  bool open = false;
  for (const ElementRange& u : reverse) {
    if (!open) cut.push_back(u);
    cut.back().first = std::min(cut.back().first, u.first);
    cut.back().second = std::max(cut.back().second, u.second);
    open = cut.back().second - cut.back().first < bucket_elements;
  }
  if (embedding.first < embedding.second) {  // into the open bucket, or one of their own
    if (!open) cut.push_back(embedding);
    cut.back().first = std::min(cut.back().first, embedding.first);
    cut.back().second = std::max(cut.back().second, embedding.second);
  }
  // In buffer order, tiling [0, total_elements()).
  std::vector<ElementRange> ranges;
  std::size_t begin = 0;
  for (std::size_t k = cut.size(); k-- > 0;) {
    const std::size_t end = k == 0 ? layout.total_elements() : cut[k - 1].first;
    if (end > begin) ranges.emplace_back(begin, end);
    begin = std::max(begin, end);
  }
  return ranges;
}

std::vector<ElementRange> round_bucket_ends(const std::vector<ElementRange>& ranges, std::size_t multiple) {
  if (multiple == 0) throw std::invalid_argument("round_bucket_ends: multiple must be at least 1");
  std::vector<ElementRange> rounded;
  if (ranges.empty()) return rounded;
  const std::size_t total = (ranges.back().second + multiple - 1) / multiple * multiple;
  std::size_t begin = ranges.front().first;
  for (std::size_t k = 0; k < ranges.size(); ++k) {
    const std::size_t end = k + 1 == ranges.size() ? total : std::min(total, (ranges[k].second + multiple - 1) / multiple * multiple);
    if (end <= begin) continue;  // swallowed by the rounding of the one before
    rounded.emplace_back(begin, end);
    begin = end;
  }
  return rounded;
}

std::vector<GradientBucketRange> plan_gradient_buckets(const ParameterLayout& layout,
                                                       std::span<const sim::Task> tasks,
                                                       std::size_t bucket_elements,
                                                       std::size_t multiple) {
  if (multiple == 0) throw std::invalid_argument("plan_gradient_buckets: multiple must be at least 1");
  const std::vector<ParameterTensor>& tensors = layout.tensors();
  const std::vector<std::size_t> ready = final_gradient_writes(layout, tasks);
  std::vector<GradientBucketRange> buckets;
  for (const auto& [begin, end] : round_bucket_ends(gradient_bucket_ranges(layout, bucket_elements), multiple)) {
    GradientBucketRange b{begin, end - begin, 0};
    for (std::size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].offset < end && tensors[i].offset + tensors[i].elements() > begin)
        b.ready_after = std::max(b.ready_after, ready[i]);
    buckets.push_back(b);
  }
  return buckets;
}

std::vector<ElementRange> stage_gradient_bucket_ranges(const std::vector<ParameterLayout>& chunks, bool first_stage,
                                                       std::size_t bucket_elements, std::size_t multiple) {
  std::vector<ElementRange> ranges;
  std::size_t offset = 0;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const ParameterLayout& chunk = chunks[c];
    if (first_stage && c == 0) {
      for (const auto& [begin, end] : gradient_bucket_ranges(chunk, bucket_elements))
        ranges.emplace_back(offset + begin, offset + end);
    } else if (chunk.total_elements() > 0) {
      ranges.emplace_back(offset, offset + chunk.total_elements());
    }
    offset += chunk.total_elements();
  }
  return round_bucket_ends(ranges, multiple);
}

ExpertSplitRanges split_at_expert_tensors(const std::vector<ElementRange>& ranges,
                                          const std::vector<ParameterLayout>& chunks) {
  // Where each run of one kind begins, in the stage's offsets.
  std::vector<std::pair<std::size_t, bool>> runs;
  std::size_t offset = 0;
  for (const ParameterLayout& chunk : chunks) {
    for (const ParameterTensor& t : chunk.tensors())
      if (runs.empty() || runs.back().second != t.expert) runs.emplace_back(offset + t.offset, t.expert);
    offset += chunk.total_elements();
  }
  ExpertSplitRanges out;
  for (const auto& [begin, end] : ranges) {
    std::size_t from = begin;
    while (from < end) {
      // The run holding `from` (none before the first tensor: dense).
      bool expert = false;
      std::size_t next = end;
      for (std::size_t r = 0; r < runs.size(); ++r) {
        if (runs[r].first <= from) {
          expert = runs[r].second;
        } else {
          next = std::min(next, runs[r].first);
          break;
        }
      }
      out.ranges.emplace_back(from, next);
      out.expert.push_back(expert);
      from = next;
    }
  }
  return out;
}

std::vector<std::vector<int>> first_parameter_reads(const ParameterLayout& layout, std::span<const sim::Task> tasks,
                                                    const std::vector<GradientBucketRange>& buckets) {
  // The first forward task of each reader: the embedding, layer l, the output.
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t embedding = kNone, output = kNone;
  std::vector<std::size_t> layer(static_cast<std::size_t>(layout.num_layers()), kNone);
  for (std::size_t k = tasks.size(); k-- > 0;) {
    const sim::Task& t = tasks[k];
    if (t.pass != sim::Pass::kForward) continue;
    if (t.block == sim::Block::kEmbedding) embedding = k;
    if (t.block == sim::Block::kOutput) output = k;
    if ((t.block == sim::Block::kAttention || t.block == sim::Block::kMlp) && t.layer >= 0 &&
        t.layer < layout.num_layers())
      layer[static_cast<std::size_t>(t.layer)] = k;
  }
  std::vector<std::size_t> reader(layout.tensors().size(), kNone);
  auto set = [&](int tensor, std::size_t k) {
    if (tensor != LayerTensors::kAbsent) reader[static_cast<std::size_t>(tensor)] = std::min(reader[static_cast<std::size_t>(tensor)], k);
  };
  for (int l = 0; l < layout.num_layers(); ++l) {
    for (const int tensor : layout.layer(l).all()) set(tensor, layer[static_cast<std::size_t>(l)]);
  }
  for (const int tensor : {layout.final_norm_gamma(), layout.final_norm_beta(), layout.lm_head(), layout.wte()})
    set(tensor, output);
  for (const int tensor : {layout.wte(), layout.wpe()}) set(tensor, embedding);

  std::vector<std::vector<int>> reads(tasks.size());
  const auto& tensors = layout.tensors();
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    std::size_t first = kNone;
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      const std::size_t begin = tensors[i].offset, end = begin + tensors[i].elements();
      if (end <= buckets[b].begin || begin >= buckets[b].begin + buckets[b].elements) continue;
      if (reader[i] == kNone)
        throw std::logic_error("first_parameter_reads: no forward task reads " + tensors[i].name);
      first = std::min(first, reader[i]);
    }
    if (first != kNone) reads[first].push_back(static_cast<int>(b));
  }
  return reads;
}

}  // namespace sextant::engine
