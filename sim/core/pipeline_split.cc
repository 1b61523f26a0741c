#include "sim/core/pipeline_split.h"

#include <algorithm>
#include <stdexcept>

namespace sextant::sim {

namespace {

// Longest expanded pp_layout we accept: far beyond any model (a layer per
// character), small enough that a typo like "(t|)*99999999" cannot exhaust memory.
constexpr std::size_t kMaxExpandedChars = 1 << 20;

bool is_layer_char(char c) { return c == 'E' || c == 't' || c == 'L' || c == '|'; }

// Reads the decimal count after a '*' at text[i]; advances i. 0 on error.
long read_count(std::string_view text, std::size_t& i) {
  long n = 0;
  const std::size_t start = i;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9' && n <= static_cast<long>(kMaxExpandedChars)) {
    n = n * 10 + (text[i] - '0');
    ++i;
  }
  return i == start ? 0 : n;
}

std::string col(std::size_t i) { return "column " + std::to_string(i + 1); }

// Megatron expands "(...)*n" first and "x*n" second; so do we. Pass 1 also
// checks the characters, so errors name a column of what the user typed.
bool expand_groups(std::string_view text, std::string& out, std::string& error) {
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (c == '(') {
      const std::size_t close = text.find(')', i);
      if (close == std::string_view::npos) {
        error = "'(' at " + col(i) + " is never closed";
        return false;
      }
      const std::string_view inner = text.substr(i + 1, close - i - 1);
      if (inner.empty() || inner.find('(') != std::string_view::npos) {
        error = "'(' at " + col(i) + " must hold a non-empty group without nested parentheses";
        return false;
      }
      for (std::size_t k = 0; k < inner.size(); ++k) {
        const char x = inner[k];
        if (!is_layer_char(x) && x != '*' && !(x >= '0' && x <= '9')) {
          error = "unknown character '" + std::string(1, x) + "' at " + col(i + 1 + k) +
                  "; accepted: E, t, L, |, x*n, (...)*n";
          return false;
        }
      }
      std::size_t j = close + 1;
      if (j >= text.size() || text[j] != '*') {
        error = "')' at " + col(close) + " must be followed by *n";
        return false;
      }
      ++j;
      const long n = read_count(text, j);
      if (n < 1) {
        error = "'*' at " + col(close + 1) + " must be followed by a count >= 1";
        return false;
      }
      if (out.size() + inner.size() * static_cast<std::size_t>(n) > kMaxExpandedChars) {
        error = "expands to more than " + std::to_string(kMaxExpandedChars) + " characters";
        return false;
      }
      for (long r = 0; r < n; ++r) out += inner;
      i = j;
    } else if (is_layer_char(c) || c == '*' || (c >= '0' && c <= '9')) {
      out += c;
      ++i;
    } else {
      error = "unknown character '" + std::string(1, c) + "' at " + col(i) +
              "; accepted: E, t, L, |, x*n, (...)*n";
      return false;
    }
  }
  return true;
}

bool expand_repeats(std::string_view text, std::string& out, std::string& error) {
  for (std::size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (!is_layer_char(c)) {
      error = "'" + std::string(1, c) + "' must follow E, t, L or | (as x*n)";
      return false;
    }
    std::size_t j = i + 1;
    long n = 1;
    if (j < text.size() && text[j] == '*') {
      ++j;
      n = read_count(text, j);
      if (n < 1) {
        error = "'" + std::string(1, c) + "*' must be followed by a count >= 1";
        return false;
      }
    }
    if (out.size() + static_cast<std::size_t>(n) > kMaxExpandedChars) {
      error = "expands to more than " + std::to_string(kMaxExpandedChars) + " characters";
      return false;
    }
    out.append(static_cast<std::size_t>(n), c);
    i = j;
  }
  return true;
}

struct LayoutCounts {
  long stages = 0, layers = 0, embeddings = 0, losses = 0;
  bool ends_ok = false;  // E opens the first stage, L closes the last
};

LayoutCounts count_layout(const std::vector<std::string>& stages) {
  LayoutCounts c;
  c.stages = static_cast<long>(stages.size());
  for (const std::string& s : stages) {
    c.layers += std::count(s.begin(), s.end(), 't');
    c.embeddings += std::count(s.begin(), s.end(), 'E');
    c.losses += std::count(s.begin(), s.end(), 'L');
  }
  c.ends_ok = !stages.empty() && !stages.front().empty() && stages.front().front() == 'E' &&
              !stages.back().empty() && stages.back().back() == 'L';
  return c;
}

std::string str(long long v) { return std::to_string(v); }

// Layers on each (rank, chunk), rank-major, for a layout that passed the check.
std::vector<int> chunk_counts(const ModelConfig& m, const ParallelLayout& l) {
  const int pp = l.pp, vpp = l.vpp;
  std::vector<int> counts(static_cast<std::size_t>(pp * vpp), 0);
  auto at = [&](int s, int c) -> int& { return counts[static_cast<std::size_t>(s * vpp + c)]; };
  if (!l.pp_layout.empty()) {
    std::vector<std::string> stages;
    std::string error;
    expand_pp_layout(l.pp_layout, stages, error);
    for (int k = 0; k < pp * vpp; ++k) {
      const std::string& s = stages[static_cast<std::size_t>(k)];
      at(k % pp, k / pp) = static_cast<int>(std::count(s.begin(), s.end(), 't'));
    }
  } else if (l.first_stage_layers > 0 || l.last_stage_layers > 0) {
    const int first = l.first_stage_layers, last = l.last_stage_layers;
    const int middle_ranks = pp - (first > 0) - (last > 0);
    const int middle = middle_ranks > 0 ? (m.num_layers - first - last) / middle_ranks : 0;
    for (int s = 0; s < pp; ++s) {
      int rank_layers = middle;
      if (s == 0 && first > 0) rank_layers = first;
      if (s == pp - 1 && last > 0) rank_layers = last;
      for (int c = 0; c < vpp; ++c) at(s, c) = rank_layers / vpp;
    }
  } else {
    const int e = l.embedding_in_split ? 1 : 0, lo = l.loss_in_split ? 1 : 0;
    const int units = (m.num_layers + e + lo) / (pp * vpp);
    for (int s = 0; s < pp; ++s) {
      for (int c = 0; c < vpp; ++c) at(s, c) = units;
    }
    at(0, 0) -= e;
    at(pp - 1, vpp - 1) -= lo;
  }
  return counts;
}

}  // namespace

bool expand_pp_layout(std::string_view text, std::vector<std::string>& stages,
                      std::string& error) {
  stages.clear();
  std::string grouped, flat;
  if (!expand_groups(text, grouped, error) || !expand_repeats(grouped, flat, error)) return false;
  std::size_t start = 0;
  while (true) {
    const std::size_t bar = flat.find('|', start);
    stages.push_back(flat.substr(start, bar == std::string::npos ? std::string::npos : bar - start));
    if (bar == std::string::npos) break;
    start = bar + 1;
  }
  return true;
}

std::string compress_pp_layout(const std::vector<std::string>& stages) {
  auto compact = [](const std::string& s) {
    // "Etttt" → "Et*4": runs of t only (E and L appear once).
    std::string out;
    for (std::size_t i = 0; i < s.size();) {
      std::size_t j = i;
      while (j < s.size() && s[j] == s[i]) ++j;
      out += s[i];
      if (j - i > 1) out += "*" + std::to_string(j - i);
      i = j;
    }
    return out;
  };
  std::string out;
  for (std::size_t i = 0; i < stages.size();) {
    std::size_t j = i;
    while (j < stages.size() && stages[j] == stages[i]) ++j;
    const std::string s = compact(stages[i]);
    const std::size_t run = j - i;
    const bool last_run = j == stages.size();
    // The last stage takes no trailing '|'; a run ending the list repeats run − 1 times.
    const std::size_t repeated = last_run ? run - 1 : run;
    if (repeated > 1) out += "(" + s + "|)*" + std::to_string(repeated);
    else if (repeated == 1) out += s + "|";
    if (last_run) out += s;
    i = j;
  }
  return out;
}

SplitProblem check_pipeline_split(const ModelConfig& m, const ParallelLayout& l) {
  const bool uneven = l.first_stage_layers > 0 || l.last_stage_layers > 0;
  const bool accounting = l.embedding_in_split || l.loss_in_split;
  const long long pp_vpp = 1LL * l.pp * l.vpp;
  if (!l.pp_layout.empty()) {
    if (uneven || accounting) return SplitProblem::kLayoutWithKnobs;
    std::vector<std::string> stages;
    std::string error;
    if (!expand_pp_layout(l.pp_layout, stages, error)) return SplitProblem::kLayoutSyntax;
    const LayoutCounts c = count_layout(stages);
    if (c.stages != pp_vpp) return SplitProblem::kLayoutStages;
    if (c.layers != m.num_layers) return SplitProblem::kLayoutLayers;
    if (c.embeddings != 1 || c.losses != 1 || !c.ends_ok) return SplitProblem::kLayoutEnds;
    return SplitProblem::kNone;
  }
  if (uneven) {
    if (accounting) return SplitProblem::kUnevenWithAccounting;
    if (l.pp < 2) return SplitProblem::kUnevenNeedsPipeline;
    if (l.first_stage_layers % l.vpp != 0 || l.last_stage_layers % l.vpp != 0) {
      return SplitProblem::kUnevenChunks;
    }
    const long middle_ranks = l.pp - (l.first_stage_layers > 0) - (l.last_stage_layers > 0);
    const long middle = 1L * m.num_layers - l.first_stage_layers - l.last_stage_layers;
    if (middle_ranks == 0) return middle == 0 ? SplitProblem::kNone : SplitProblem::kUnevenMiddle;
    if (middle <= 0 || middle % middle_ranks != 0 || (middle / middle_ranks) % l.vpp != 0) {
      return SplitProblem::kUnevenMiddle;
    }
    return SplitProblem::kNone;
  }
  const long long units = 1LL * m.num_layers + l.embedding_in_split + l.loss_in_split;
  return units % pp_vpp == 0 ? SplitProblem::kNone : SplitProblem::kNotDivisible;
}

const char* split_problem_knob(SplitProblem problem) {
  switch (problem) {
    case SplitProblem::kNone:
    case SplitProblem::kNotDivisible: return "pp";
    case SplitProblem::kUnevenWithAccounting:
    case SplitProblem::kUnevenNeedsPipeline:
    case SplitProblem::kUnevenChunks:
    case SplitProblem::kUnevenMiddle: return "first_stage_layers";
    case SplitProblem::kLayoutWithKnobs:
    case SplitProblem::kLayoutSyntax:
    case SplitProblem::kLayoutStages:
    case SplitProblem::kLayoutLayers:
    case SplitProblem::kLayoutEnds: return "pp_layout";
  }
  return "pp";
}

std::string split_problem_message(SplitProblem problem, const ModelConfig& m,
                                  const ParallelLayout& l) {
  const std::string pp_vpp =
      "pp·vpp (" + str(l.pp) + "·" + str(l.vpp) + " = " + str(1LL * l.pp * l.vpp) + ")";
  switch (problem) {
    case SplitProblem::kNone: return "";
    case SplitProblem::kNotDivisible: {
      const long long units = 1LL * m.num_layers + l.embedding_in_split + l.loss_in_split;
      if (l.pp > units) {
        // Each stage of an even split, or of first/last_stage_layers, holds at
        // least one layer; only an explicit pp_layout can name empty stages.
        std::vector<long long> found;
        for (long long d = 1; d * d <= units; ++d) {
          if (units % d != 0) continue;
          found.push_back(d);
          if (d * d != units) found.push_back(units / d);
        }
        std::sort(found.begin(), found.end());
        std::string divisors;
        for (long long d : found) divisors += (divisors.empty() ? "" : ", ") + str(d);
        const std::string what = units == m.num_layers
                                     ? "num_layers (" + str(m.num_layers) + ")"
                                     : "the " + str(units) + " layers, embedding and loss in the split";
        const std::string knobs = l.vpp > 1 ? "pp·vpp" : "pp";
        return "pp (" + str(l.pp) + ") must be at most " + what +
               ": an even or uneven split gives every pipeline stage at least one layer; "
               "accepted: " + knobs + " dividing " + str(units) + " (" + divisors +
               ") for an even split, or any pp up to " + str(units) + " with an uneven one";
      }
      if (!l.embedding_in_split && !l.loss_in_split) {
        return "num_layers (" + str(m.num_layers) + ") must be a multiple of " + pp_vpp +
               ", or give an uneven split: first_stage_layers, last_stage_layers, "
               "embedding_in_split, loss_in_split or pp_layout";
      }
      std::string names = "num_layers", values = str(m.num_layers);
      if (l.embedding_in_split) names += " + embedding", values += " + 1";
      if (l.loss_in_split) names += " + loss", values += " + 1";
      return names + " = " + values + " = " + str(units) + " must be a multiple of " + pp_vpp;
    }
    case SplitProblem::kUnevenWithAccounting:
      return "first_stage_layers and last_stage_layers cannot be combined with "
             "embedding_in_split or loss_in_split (Megatron-Core forbids it)";
    case SplitProblem::kUnevenNeedsPipeline:
      return "first_stage_layers and last_stage_layers need pp >= 2, got pp=" + str(l.pp);
    case SplitProblem::kUnevenChunks: {
      const bool first_bad = l.first_stage_layers % l.vpp != 0;
      const int value = first_bad ? l.first_stage_layers : l.last_stage_layers;
      return std::string(first_bad ? "first_stage_layers (" : "last_stage_layers (") + str(value) +
             ") must be a multiple of vpp (" + str(l.vpp) + ")";
    }
    case SplitProblem::kUnevenMiddle: {
      std::string names = "num_layers", values = str(m.num_layers);
      if (l.first_stage_layers > 0) {
        names += " − first_stage_layers";
        values += " − " + str(l.first_stage_layers);
      }
      if (l.last_stage_layers > 0) {
        names += " − last_stage_layers";
        values += " − " + str(l.last_stage_layers);
      }
      const long middle = 1L * m.num_layers - l.first_stage_layers - l.last_stage_layers;
      const int middle_ranks = l.pp - (l.first_stage_layers > 0) - (l.last_stage_layers > 0);
      if (middle_ranks == 0) {
        return names + " = " + values + " = " + str(middle) + " must be 0 with pp=" + str(l.pp) +
               " (no middle stages)";
      }
      std::string out = names + " = " + values + " = " + str(middle) +
                        " must be a positive multiple of the " + str(middle_ranks) +
                        " middle stages";
      if (l.vpp > 1) out += " times vpp (" + str(middle_ranks) + "·" + str(l.vpp) + ")";
      return out;
    }
    case SplitProblem::kLayoutWithKnobs:
      return "cannot be combined with first_stage_layers, last_stage_layers, embedding_in_split "
             "or loss_in_split (Megatron-Core forbids it)";
    case SplitProblem::kLayoutSyntax: {
      std::vector<std::string> stages;
      std::string error;
      expand_pp_layout(l.pp_layout, stages, error);
      return error;
    }
    case SplitProblem::kLayoutStages:
    case SplitProblem::kLayoutLayers:
    case SplitProblem::kLayoutEnds: {
      std::vector<std::string> stages;
      std::string error;
      expand_pp_layout(l.pp_layout, stages, error);
      const LayoutCounts c = count_layout(stages);
      if (problem == SplitProblem::kLayoutStages) {
        return "has " + str(c.stages) + " virtual stages ('|'-separated); it needs " + pp_vpp;
      }
      if (problem == SplitProblem::kLayoutLayers) {
        return "has " + str(c.layers) + " transformer layers (t); the model has num_layers = " +
               str(m.num_layers);
      }
      return "must hold E once, opening its first virtual stage, and L once, closing its last "
             "(got " + str(c.embeddings) + " E and " + str(c.losses) + " L)";
    }
  }
  return "";
}

PipelineSplit::PipelineSplit(int pp, int vpp, std::vector<ChunkLayers> chunks, int dense_layers)
    : pp_(pp), vpp_(vpp), chunks_(std::move(chunks)) {
  stages_.assign(static_cast<std::size_t>(pp), StageLayers{});
  const int first_count = chunks_.empty() ? 0 : chunks_.front().num_layers;
  for (int s = 0; s < pp; ++s) {
    StageLayers& stage = stages_[static_cast<std::size_t>(s)];
    for (int c = 0; c < vpp; ++c) {
      const ChunkLayers& k = chunk(s, c);
      stage.num_layers += k.num_layers;
      // Dense layers are the model's first ones: this chunk's share of [0, dense_layers).
      stage.dense_layers +=
          std::clamp(dense_layers - k.first_layer, 0, k.num_layers);
      stage.embedding = stage.embedding || k.embedding;
      stage.loss = stage.loss || k.loss;
      even_ = even_ && k.num_layers == first_count;
    }
    max_stage_layers_ = std::max(max_stage_layers_, stage.num_layers);
  }
}

std::string PipelineSplit::describe() const {
  std::string out;
  for (int s = 0; s < pp_; ++s) {
    if (s > 0) out += " | ";
    for (int c = 0; c < vpp_; ++c) {
      const ChunkLayers& k = chunk(s, c);
      if (c > 0) out += "/";
      std::string part;
      if (k.embedding) part += "E";
      if (k.num_layers > 0) part += (part.empty() ? "" : "+") + std::to_string(k.num_layers) + "t";
      if (k.loss) part += (part.empty() ? "" : "+") + std::string("L");
      out += part.empty() ? "-" : part;
    }
  }
  return out;
}

PipelineSplit pipeline_split(const ModelConfig& m, const ParallelLayout& l) {
  if (check_pipeline_split(m, l) != SplitProblem::kNone) {
    throw std::invalid_argument("pipeline_split: layout " + l.to_spec() + " cannot split " +
                                std::to_string(m.num_layers) + " layers: " +
                                split_problem_message(check_pipeline_split(m, l), m, l));
  }
  const std::vector<int> counts = chunk_counts(m, l);
  std::vector<ChunkLayers> chunks(counts.size());
  // Offsets run in virtual-stage order: chunk 0 of every rank, then chunk 1, ...
  int next = 0;
  for (int c = 0; c < l.vpp; ++c) {
    for (int s = 0; s < l.pp; ++s) {
      ChunkLayers& k = chunks[static_cast<std::size_t>(s * l.vpp + c)];
      k.first_layer = next;
      k.num_layers = counts[static_cast<std::size_t>(s * l.vpp + c)];
      k.embedding = s == 0 && c == 0;
      k.loss = s == l.pp - 1 && c == l.vpp - 1;
      next += k.num_layers;
    }
  }
  return PipelineSplit(l.pp, l.vpp, std::move(chunks), m.dense_layers());
}

}  // namespace sextant::sim
