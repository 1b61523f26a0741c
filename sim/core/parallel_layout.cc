#include "sim/core/parallel_layout.h"

#include <charconv>
#include <string>
#include <vector>

#include "sim/core/config_error.h"
#include "sim/core/pipeline_split.h"

namespace sextant::sim {

std::string_view to_string(Recompute value) {
  switch (value) {
    case Recompute::kNone: return "none";
    case Recompute::kSelective: return "selective";
    case Recompute::kFull: return "full";
  }
  return "?";
}

std::string_view to_string(Schedule value) {
  switch (value) {
    case Schedule::kGpipe: return "gpipe";
    case Schedule::kOneFOneB: return "1f1b";
    case Schedule::kInterleaved: return "1f1b-interleaved";
    case Schedule::kZeroBubbleH1: return "zb-h1";
  }
  return "?";
}

std::string_view to_string(Precision value) {
  switch (value) {
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
    case Precision::kFp8: return "fp8";
  }
  return "?";
}

std::string_view to_string(AttentionKernel value) {
  return value == AttentionKernel::kFlash ? "flash" : "unfused";
}

std::string_view to_string(FsdpImplementation value) {
  switch (value) {
    case FsdpImplementation::kMegatronFsdp: return "megatron-fsdp";
    case FsdpImplementation::kFsdp2: return "fsdp2";
    case FsdpImplementation::kDeepSpeedZero3: return "deepspeed-zero3";
  }
  return "?";
}

std::string_view to_string(CpCommType value) {
  return value == CpCommType::kP2p ? "p2p" : "all_gather";
}

std::string ParallelLayout::to_spec() const {
  auto flag = [](bool b) { return b ? "1" : "0"; };
  std::string out;
  out += "tp=" + std::to_string(tp) + ",pp=" + std::to_string(pp) + ",vpp=" + std::to_string(vpp);
  out += ",dp=" + std::to_string(dp) + ",cp=" + std::to_string(cp) + ",ep=" + std::to_string(ep);
  out += ",etp=" + std::to_string(etp) + ",mbs=" + std::to_string(mbs) +
         ",gbs=" + std::to_string(gbs);
  out += std::string(",sp=") + flag(sp) + ",recompute=" + std::string(to_string(recompute));
  out += ",zero=" + std::to_string(zero) + ",schedule=" + std::string(to_string(schedule));
  out += ",precision=" + std::string(to_string(precision)) +
         ",attention=" + std::string(to_string(attention));
  // ZeRO-3 always overlaps its gathers and reduce-scatters (parse_layout
  // refuses turning them off): not spelled out, as fsdp is not below zero=3.
  if (zero < 3)
    out += std::string(",overlap_grad_reduce=") + flag(overlap_grad_reduce) +
           ",overlap_param_gather=" + flag(overlap_param_gather);
  out += std::string(",tp_comm_overlap=") + flag(tp_comm_overlap);
  if (!grad_reduce_in_fp32) out += ",grad_reduce_in_fp32=0";
  if (moe_a2a_overlap) out += ",moe_a2a_overlap=1";
  if (moe_shared_expert_overlap) out += ",moe_shared_expert_overlap=1";
  if (zero >= 3) out += ",fsdp=" + std::string(to_string(fsdp));
  if (cp_comm_type != CpCommType::kP2p) out += ",cp_comm_type=" + std::string(to_string(cp_comm_type));
  if (custom_split()) out += "," + split_spec();
  return out;
}

std::string ParallelLayout::split_spec() const {
  std::string out;
  auto add = [&](const std::string& item) { out += (out.empty() ? "" : ",") + item; };
  if (first_stage_layers > 0) add("first_stage_layers=" + std::to_string(first_stage_layers));
  if (last_stage_layers > 0) add("last_stage_layers=" + std::to_string(last_stage_layers));
  if (embedding_in_split) add("embedding_in_split=1");
  if (loss_in_split) add("loss_in_split=1");
  if (!pp_layout.empty()) add("pp_layout=" + pp_layout);
  return out;
}

ParallelLayout layout_from_spec(std::string_view spec, std::string_view source) {
  const PartialLayout p = parse_layout(spec, source);
  ParallelLayout l;
  for_each_knob(l, p, [](auto& field, const auto& given) {
    if (given) field = *given;
  });
  if (!p.gbs) l.gbs = l.mbs * l.dp;
  if (!p.schedule && l.vpp > 1) l.schedule = Schedule::kInterleaved;
  return l;
}

std::string_view layout_knob_names() {
  return "tp, pp, vpp, dp, cp, ep, etp, mbs, gbs, sp, recompute, dist_opt, zero, schedule, "
         "precision, attention, overlap_grad_reduce, overlap_param_gather, tp_comm_overlap, "
         "first_stage_layers, last_stage_layers, embedding_in_split, loss_in_split, pp_layout, fsdp, grad_reduce_in_fp32, "
         "moe_a2a_overlap, moe_shared_expert_overlap, cp_comm_type";
}

namespace {

struct Item {
  std::string_view key;
  std::string_view value;
  int column;  // 1-based column of the item in the spec
};

class LayoutParser {
 public:
  explicit LayoutParser(std::string_view source) : source_(source) {}

  PartialLayout parse(std::string_view spec) {
    PartialLayout out;
    std::optional<int> dist_opt_zero;
    int dist_opt_column = 0;
    std::vector<std::string> seen;
    std::size_t start = 0;
    while (start <= spec.size()) {
      std::size_t end = spec.find(',', start);
      if (end == std::string_view::npos) end = spec.size();
      std::string_view text = spec.substr(start, end - start);
      const int column = static_cast<int>(start) + 1;
      start = end + 1;
      if (text.empty()) {
        if (spec.empty()) break;
        error(column, "", "empty item; write knob=value separated by commas");
        continue;
      }
      const std::size_t eq = text.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        error(column, std::string(text), "expected knob=value; knobs: " +
                                             std::string(layout_knob_names()));
        continue;
      }
      Item item{text.substr(0, eq), text.substr(eq + 1), column};
      const std::string key(item.key);
      for (const std::string& s : seen) {
        if (s == key) error(column, key, "given twice");
      }
      seen.push_back(key);
      if (key == "dist_opt") {
        if (auto b = boolean(item)) {
          dist_opt_zero = *b ? 1 : 0;
          dist_opt_column = column;
        }
      } else if (!assign(item, out)) {
        error(column, key, "unknown knob; knobs: " + std::string(layout_knob_names()));
      }
    }
    if (dist_opt_zero) {
      if (out.zero && (*out.zero >= 1) != (*dist_opt_zero == 1)) {
        error(dist_opt_column, "dist_opt",
              "contradicts zero=" + std::to_string(*out.zero) +
                  " (dist_opt=1 means zero=1; dist_opt=0 means zero=0)");
      } else if (!out.zero) {
        out.zero = dist_opt_zero;
      }
    }
    if (out.fsdp && out.zero && *out.zero != 3) {
      error(fsdp_column_, "fsdp",
            "names the ZeRO-3 implementation; it needs zero=3 (got zero=" +
                std::to_string(*out.zero) + ")");
    }
    refuse_overlaps_off_with_zero3(out);
    throw_if_any(std::move(diagnostics_));
    return out;
  }

 private:
  bool assign(const Item& item, PartialLayout& out) {
    const std::string_view k = item.key;
    if (k == "tp") out.tp = positive(item);
    else if (k == "pp") out.pp = positive(item);
    else if (k == "vpp") out.vpp = positive(item);
    else if (k == "dp") out.dp = positive(item);
    else if (k == "cp") out.cp = positive(item);
    else if (k == "ep") out.ep = positive(item);
    else if (k == "etp") out.etp = positive(item);
    else if (k == "mbs") out.mbs = positive(item);
    else if (k == "gbs") out.gbs = positive(item);
    else if (k == "sp") out.sp = boolean(item);
    else if (k == "overlap_grad_reduce") {
      out.overlap_grad_reduce = boolean(item);
      overlap_grad_reduce_column_ = item.column;
    } else if (k == "overlap_param_gather") {
      out.overlap_param_gather = boolean(item);
      overlap_param_gather_column_ = item.column;
    }
    else if (k == "tp_comm_overlap") out.tp_comm_overlap = boolean(item);
    else if (k == "moe_a2a_overlap") out.moe_a2a_overlap = boolean(item);
    else if (k == "moe_shared_expert_overlap") out.moe_shared_expert_overlap = boolean(item);
    else if (k == "grad_reduce_in_fp32") out.grad_reduce_in_fp32 = boolean(item);
    else if (k == "first_stage_layers") out.first_stage_layers = positive(item);
    else if (k == "last_stage_layers") out.last_stage_layers = positive(item);
    else if (k == "embedding_in_split") out.embedding_in_split = boolean(item);
    else if (k == "loss_in_split") out.loss_in_split = boolean(item);
    else if (k == "pp_layout") {
      std::vector<std::string> stages;
      std::string why;
      if (!expand_pp_layout(item.value, stages, why)) {
        error(item.column, "pp_layout",
              why + " (stages separated by '|'; no commas: they separate --layout knobs)");
      } else {
        out.pp_layout = std::string(item.value);
      }
    }
    else if (k == "zero") {
      auto z = integer(item);
      if (z && (*z < 0 || *z > 3)) {
        error(item.column, "zero", "got " + std::string(item.value) + "; accepted: 0, 1, 2, 3");
        z.reset();
      }
      out.zero = z;
    } else if (k == "recompute") {
      out.recompute = choice<Recompute>(item, {{"none", Recompute::kNone},
                                               {"selective", Recompute::kSelective},
                                               {"full", Recompute::kFull}});
    } else if (k == "schedule") {
      out.schedule = choice<Schedule>(item, {{"1f1b", Schedule::kOneFOneB},
                                             {"1f1b-interleaved", Schedule::kInterleaved},
                                             {"interleaved", Schedule::kInterleaved},
                                             {"gpipe", Schedule::kGpipe},
                                             {"zb-h1", Schedule::kZeroBubbleH1}});
    } else if (k == "precision") {
      out.precision =
          choice<Precision>(item, {{"bf16", Precision::kBf16},
                                  {"fp16", Precision::kFp16},
                                  {"fp8", Precision::kFp8}});
    } else if (k == "fsdp") {
      fsdp_column_ = item.column;
      out.fsdp = choice<FsdpImplementation>(
          item, {{"megatron-fsdp", FsdpImplementation::kMegatronFsdp},
                 {"fsdp2", FsdpImplementation::kFsdp2},
                 {"deepspeed-zero3", FsdpImplementation::kDeepSpeedZero3}});
    } else if (k == "cp_comm_type") {
      out.cp_comm_type = choice<CpCommType>(
          item, {{"p2p", CpCommType::kP2p}, {"all_gather", CpCommType::kAllGather}});
    } else if (k == "attention") {
      out.attention = choice<AttentionKernel>(
          item, {{"flash", AttentionKernel::kFlash}, {"unfused", AttentionKernel::kUnfused}});
    } else {
      return false;
    }
    return true;
  }

  std::optional<int> integer(const Item& item) {
    int value = 0;
    const char* first = item.value.data();
    const char* last = first + item.value.size();
    auto [ptr, ec] = std::from_chars(first, last, value);
    if (item.value.empty() || ec != std::errc() || ptr != last) {
      error(item.column, std::string(item.key),
            "expected an integer, got '" + std::string(item.value) + "'");
      return std::nullopt;
    }
    return value;
  }

  std::optional<int> positive(const Item& item) {
    auto value = integer(item);
    // Knob products must stay far inside 64 bits; no real layout comes near this.
    constexpr int kLargest = 1 << 20;
    if (value && (*value < 1 || *value > kLargest)) {
      error(item.column, std::string(item.key),
            "must be an integer in [1, " + std::to_string(kLargest) + "], got " +
                std::string(item.value));
      return std::nullopt;
    }
    return value;
  }

  std::optional<bool> boolean(const Item& item) {
    const std::string_view v = item.value;
    if (v == "1" || v == "true" || v == "on") return true;
    if (v == "0" || v == "false" || v == "off") return false;
    error(item.column, std::string(item.key),
          "got '" + std::string(v) + "'; accepted: 1, 0, true, false, on, off");
    return std::nullopt;
  }

  template <typename E>
  std::optional<E> choice(const Item& item,
                          std::initializer_list<std::pair<std::string_view, E>> options) {
    std::string accepted;
    for (const auto& [name, value] : options) {
      if (name == item.value) return value;
      if (!accepted.empty()) accepted += ", ";
      accepted += name;
    }
    error(item.column, std::string(item.key),
          "got '" + std::string(item.value) + "'; accepted: " + accepted);
    return std::nullopt;
  }

  void error(int column, std::string key, std::string message) {
    diagnostics_.push_back({std::string(source_), 1, column, std::move(key), std::move(message)});
  }

  // ZeRO-3 (zero=3, or an fsdp implementation named) always overlaps its
  // parameter all-gathers and gradient reduce-scatters with compute, and the
  // model says so (sim/comm/fsdp_comm.h): Megatron-FSDP turns
  // overlap_grad_reduce and overlap_param_gather on itself when it shards
  // parameters (optim_grads_params) and asserts the overlapped reduce-scatter;
  // FSDP2 prefetches and reduce-scatters on its own streams with no switch to
  // turn that off; DeepSpeed's overlap_comm, which can, is not modelled. So
  // turning either off with ZeRO-3 would change nothing: refused, not ignored.
  void refuse_overlaps_off_with_zero3(const PartialLayout& out) {
    if (out.zero.value_or(out.fsdp ? 3 : 0) != 3) return;
    const std::string why =
        "=0 cannot be modelled with zero=3: every ZeRO-3 implementation modelled overlaps it (Megatron-FSDP "
        "turns it on itself when sharding parameters, FSDP2 has no switch; DeepSpeed's overlap_comm is not "
        "modelled); leave it out or give 1";
    if (out.overlap_grad_reduce == false)
      error(overlap_grad_reduce_column_, "overlap_grad_reduce", "overlap_grad_reduce" + why);
    if (out.overlap_param_gather == false)
      error(overlap_param_gather_column_, "overlap_param_gather", "overlap_param_gather" + why);
  }

  std::string_view source_;
  int fsdp_column_ = 0;
  int overlap_grad_reduce_column_ = 0;
  int overlap_param_gather_column_ = 0;
  std::vector<Diagnostic> diagnostics_;
};

}  // namespace

PartialLayout parse_layout(std::string_view spec, std::string_view source) {
  return LayoutParser(source).parse(spec);
}

}  // namespace sextant::sim
