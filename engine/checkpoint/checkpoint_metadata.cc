#include "engine/checkpoint/checkpoint_metadata.h"

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

#include "engine/checkpoint/checkpoint_error.h"
#include "engine/checkpoint/shard_file.h"

namespace sextant::engine::checkpoint {

namespace {

using Json = nlohmann::ordered_json;

// The model fields, by name, so that writing, reading and comparing list them once.
template <typename Model, typename Visit>
void for_each_model_number(Model& m, Visit visit) {
  visit("num_layers", m.num_layers);
  visit("hidden_size", m.hidden_size);
  visit("ffn_hidden_size", m.ffn_hidden_size);
  visit("num_attention_heads", m.num_attention_heads);
  visit("num_query_groups", m.num_query_groups);
  visit("kv_channels", m.kv_channels);
  visit("vocab_size", m.vocab_size);
  visit("seq_length", m.seq_length);
  visit("parameters_per_rank", m.parameters_per_rank);
}

std::string layout_text(const CheckpointLayout& l) {
  return "tp=" + std::to_string(l.tp) + (l.cp != 1 ? ", cp=" + std::to_string(l.cp) : "") +
         ", dp=" + std::to_string(l.dp) + ", zero=" + std::to_string(l.zero) +
         (l.pp != 1 ? ", pp=" + std::to_string(l.pp) : "") + (l.vpp != 1 ? ", vpp=" + std::to_string(l.vpp) : "") +
         (l.ep != 1 ? ", ep=" + std::to_string(l.ep) : "");
}

Json sharding_json(const CheckpointSharding& s) {
  Json tensors = Json::array();
  for (const TensorSharding& t : s.tensors) {
    Json e = {{"name", t.name}, {"shape", {t.rows, t.cols}}, {"offset", t.offset}, {"split_dim", t.split_dim}};
    if (t.split_dim >= 0) e["blocks"] = t.blocks;
    if (t.expert) e["expert"] = true;
    tensors.push_back(e);
  }
  Json shards = Json::array();
  for (const std::vector<OptimizerRange>& ranges : s.optimizer_shards) {
    Json rank = Json::array();
    for (const OptimizerRange& r : ranges) {
      Json range = {r.begin, r.elements, r.shard_offset};
      if (r.expert) range.push_back(1);  // [begin, elements, shard_offset, 1]: a piece of expert tensors
      rank.push_back(range);
    }
    shards.push_back(rank);
  }
  Json j = Json::object();
  if (!s.chunks.empty()) {
    Json chunks = Json::array();
    for (const ChunkParts& c : s.chunks)
      chunks.push_back({{"first_layer", c.first_layer},
                        {"num_layers", c.num_layers},
                        {"embedding", c.embedding},
                        {"loss", c.loss}});
    j["chunks"] = chunks;
  }
  j["flat_elements"] = s.flat_elements;
  j["tensors"] = tensors;
  j["optimizer_shards"] = shards;
  return j;
}

// `key` is updated to what is being read, for the caller's message.
CheckpointSharding parse_sharding(const Json& j, std::string& key) {
  CheckpointSharding s;
  const std::string prefix = key;  // "sharding" or "stages[s]"
  if (j.contains("chunks"))
    for (const Json& c : j.at("chunks")) {
      key = prefix + ".chunks[" + std::to_string(s.chunks.size()) + "]";
      s.chunks.push_back({c.at("first_layer").get<int>(), c.at("num_layers").get<int>(), c.at("embedding").get<bool>(),
                          c.at("loss").get<bool>()});
    }
  key = prefix + ".flat_elements";
  s.flat_elements = j.at("flat_elements").get<std::uint64_t>();
  for (const Json& t : j.at("tensors")) {
    key = prefix + ".tensors[" + std::to_string(s.tensors.size()) + "]";
    TensorSharding e;
    e.name = t.at("name").get<std::string>();
    const Json& shape = t.at("shape");
    if (shape.size() != 2) throw std::invalid_argument("shape: expected [rows, cols]");
    e.rows = shape.at(0).get<std::int64_t>();
    e.cols = shape.at(1).get<std::int64_t>();
    e.offset = t.at("offset").get<std::uint64_t>();
    e.split_dim = t.at("split_dim").get<int>();
    if (e.split_dim >= 0) e.blocks = t.at("blocks").get<std::vector<std::int64_t>>();
    e.expert = t.value("expert", false);
    s.tensors.push_back(std::move(e));
  }
  for (const Json& rank : j.at("optimizer_shards")) {
    key = prefix + ".optimizer_shards[" + std::to_string(s.optimizer_shards.size()) + "]";
    std::vector<OptimizerRange> ranges;
    for (const Json& r : rank) {
      if (r.size() != 3 && !(r.size() == 4 && r.at(3).get<int>() == 1))
        throw std::invalid_argument("expected [begin, elements, shard_offset] or, for expert tensors, "
                                    "[begin, elements, shard_offset, 1]");
      ranges.push_back({r.at(0).get<std::uint64_t>(), r.at(1).get<std::uint64_t>(), r.at(2).get<std::uint64_t>(),
                        r.size() == 4});
    }
    s.optimizer_shards.push_back(std::move(ranges));
  }
  return s;
}

std::string number_text(double value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

}  // namespace

sim::ParallelLayout rank_order_layout(const CheckpointLayout& c) {
  sim::ParallelLayout l;
  l.tp = c.tp;
  l.cp = c.cp;
  l.ep = c.ep;
  l.dp = c.dp;
  l.pp = c.pp;
  l.vpp = c.vpp;
  l.zero = c.zero;
  return l;
}

const CheckpointSharding& stage_sharding(const CheckpointMetadata& m, int stage) {
  if (m.layout.pp <= 1) return m.sharding;
  return m.stages.at(static_cast<std::size_t>(stage));
}

std::vector<CheckpointSharding> saved_stage_shardings(const CheckpointMetadata& m) {
  return m.layout.pp > 1 ? m.stages : std::vector<CheckpointSharding>{m.sharding};
}

bool sharding_known(const CheckpointMetadata& m) {
  return m.layout.pp > 1 ? !m.stages.empty() : m.sharding.known();
}

std::string shard_file_name(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.bin", rank);
  return name;
}

std::string to_json(const CheckpointMetadata& m) {
  Json j;
  j["format"] = "sextant-checkpoint";
  // Version 1 did not describe the sharding, version 2 not a pipeline's; metadata
  // that needs neither is written as the oldest that holds it.
  j["format_version"] = !m.stages.empty() ? 3 : m.sharding.known() ? 2 : 1;
  j["step"] = m.step;
  j["data_batches"] = m.data_batches;
  j["seed"] = m.seed;
  Json model;
  model["name"] = m.model.name;
  for_each_model_number(m.model, [&](const char* key, std::int64_t value) { model[key] = value; });
  j["model"] = model;
  j["layout"] = {{"tp", m.layout.tp}, {"dp", m.layout.dp}, {"zero", m.layout.zero}, {"pp", m.layout.pp}};
  if (!m.stages.empty()) j["layout"]["vpp"] = m.layout.vpp;
  if (m.layout.cp != 1) j["layout"]["cp"] = m.layout.cp;
  if (m.layout.ep != 1) j["layout"]["ep"] = m.layout.ep;
  j["world_size"] = m.world_size;
  j["lr_schedule"] = {{"max_lr", m.lr_schedule.max_lr},
                      {"min_lr", m.lr_schedule.min_lr},
                      {"warmup_steps", m.lr_schedule.warmup_steps},
                      {"decay_steps", m.lr_schedule.decay_steps}};
  Json files = Json::array();
  for (const ShardFileEntry& f : m.files)
    files.push_back({{"rank", f.rank}, {"name", f.name}, {"bytes", f.bytes}, {"crc32", crc32_hex(f.crc32)}});
  j["files"] = files;
  if (!m.stages.empty()) {
    Json stages = Json::array();
    for (const CheckpointSharding& s : m.stages) stages.push_back(sharding_json(s));
    j["stages"] = stages;
  } else if (m.sharding.known()) {
    j["sharding"] = sharding_json(m.sharding);
  }
  return j.dump(2) + "\n";
}

CheckpointMetadata parse_metadata(const std::string& text, const std::string& file) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw_checkpoint_error(file, std::string("not valid JSON (damaged?): ") + e.what());
  }
  std::string key;  // the one being read, for the message
  try {
    CheckpointMetadata m;
    key = "format";
    if (j.at(key).get<std::string>() != "sextant-checkpoint")
      throw_checkpoint_error(file, "format: '" + j.at(key).get<std::string>() + "': not a sextant checkpoint");
    key = "format_version";
    m.format_version = j.at(key).get<int>();
    if (m.format_version < kOldestReadableFormatVersion || m.format_version > kFormatVersion)
      throw_checkpoint_error(file, "format_version " + std::to_string(m.format_version) + ": this sextant reads versions " +
                                       std::to_string(kOldestReadableFormatVersion) + "-" + std::to_string(kFormatVersion));
    key = "step";
    m.step = j.at(key).get<std::int64_t>();
    key = "data_batches";
    m.data_batches = j.at(key).get<std::int64_t>();
    key = "seed";
    m.seed = j.at(key).get<std::uint64_t>();
    key = "model.name";
    const Json& model = j.at("model");
    m.model.name = model.at("name").get<std::string>();
    for_each_model_number(m.model, [&](const char* name, std::int64_t& value) {
      key = std::string("model.") + name;
      value = model.at(name).get<std::int64_t>();
    });
    for (auto [name, value] : {std::pair{"tp", &m.layout.tp}, {"dp", &m.layout.dp}, {"zero", &m.layout.zero}}) {
      key = std::string("layout.") + name;
      *value = j.at("layout").at(name).get<int>();
    }
    key = "layout.pp";
    m.layout.pp = j.at("layout").value("pp", 1);
    key = "layout.vpp";
    m.layout.vpp = j.at("layout").value("vpp", 1);
    key = "layout.cp";
    m.layout.cp = j.at("layout").value("cp", 1);
    key = "layout.ep";
    m.layout.ep = j.at("layout").value("ep", 1);
    key = "world_size";
    m.world_size = j.at(key).get<int>();
    key = "lr_schedule";
    const Json& lr = j.at(key);
    m.lr_schedule = {lr.at("max_lr").get<double>(), lr.at("min_lr").get<double>(),
                     lr.at("warmup_steps").get<int>(), lr.at("decay_steps").get<int>()};
    key = "files";
    for (const Json& f : j.at(key)) {
      ShardFileEntry e{f.at("rank").get<int>(), f.at("name").get<std::string>(), f.at("bytes").get<std::uint64_t>(), 0};
      const std::string crc = f.at("crc32").get<std::string>();
      std::size_t used = 0;
      const unsigned long value = crc.size() == 8 ? std::stoul(crc, &used, 16) : 0;
      if (used != 8) throw_checkpoint_error(file, "files: crc32 '" + crc + "': expected 8 hex digits");
      e.crc32 = static_cast<std::uint32_t>(value);
      if (e.rank != static_cast<int>(m.files.size()))
        throw_checkpoint_error(file, "files: entry " + std::to_string(m.files.size()) + " is of rank " +
                                         std::to_string(e.rank) + "; expected the ranks in order");
      m.files.push_back(e);
    }
    if (static_cast<int>(m.files.size()) != m.world_size)
      throw_checkpoint_error(file, "files: " + std::to_string(m.files.size()) + " shards for world_size " +
                                       std::to_string(m.world_size));
    if (m.format_version >= 3 && m.layout.pp > 1) {
      key = "stages";
      for (const Json& stage : j.at(key)) {
        key = "stages[" + std::to_string(m.stages.size()) + "]";
        m.stages.push_back(parse_sharding(stage, key));
      }
      if (static_cast<int>(m.stages.size()) != m.layout.pp)
        throw_checkpoint_error(file, "stages: " + std::to_string(m.stages.size()) + " stages for pp " +
                                         std::to_string(m.layout.pp));
      if (m.world_size != rank_order_layout(m.layout).total_gpus())
        throw_checkpoint_error(file, "world_size " + std::to_string(m.world_size) +
                                         (m.layout.cp != 1 ? " is not tp·cp·dp·pp = " : " is not tp·dp·pp = ") +
                                         std::to_string(rank_order_layout(m.layout).total_gpus()));
    } else if (m.format_version >= 2) {
      key = "sharding";
      m.sharding = parse_sharding(j.at(key), key);
    }
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw_checkpoint_error(file, key + ": missing or of the wrong type (" + e.what() + ")");
  } catch (const std::logic_error& e) {  // std::stoul
    throw_checkpoint_error(file, key + ": " + e.what());
  }
}

CheckpointMetadata read_metadata(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw_system_error(file, "cannot open the checkpoint's metadata");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_metadata(text.str(), file);
}

std::string layout_mismatch(const CheckpointLayout& saved, const CheckpointLayout& run, bool reshardable) {
  const std::string both = "checkpoint has " + layout_text(saved) + "; this run has " + layout_text(run);
  // Version 1 did not record where its tensors lie, and since 2026-11-24 the
  // engine lays them out in the forward's order (parameter_layout.h), not
  // the matrices first as then: its arrays cannot be read, in any layout.
  if (!reshardable)
    return both + ": its metadata (format version 1) does not say where its tensors lie, and this sextant lays "
                  "them out in another order; load it with the sextant that wrote it";
  return "";
}

std::string model_mismatch(const CheckpointModel& saved, const CheckpointModel& run) {
  std::string saved_fields, run_fields;
  CheckpointModel a = saved;
  CheckpointModel b = run;
  std::vector<std::pair<std::string, std::int64_t>> mine;
  for_each_model_number(b, [&](const char* key, std::int64_t value) { mine.emplace_back(key, value); });
  std::size_t i = 0;
  for_each_model_number(a, [&](const char* key, std::int64_t value) {
    const std::int64_t other = mine[i++].second;
    if (value == other) return;
    const std::string sep = saved_fields.empty() ? "" : ", ";
    saved_fields += sep + key + " " + std::to_string(value);
    run_fields += sep + key + " " + std::to_string(other);
  });
  if (saved_fields.empty()) return "";  // the name alone may differ: a copy of a preset under another name
  return "checkpoint is of model '" + saved.name + "' (" + saved_fields + "); this run's is '" + run.name + "' (" +
         run_fields + ")";
}

std::string lr_schedule_mismatch(const CheckpointLrSchedule& saved, const CheckpointLrSchedule& run) {
  if (saved == run) return "";
  auto text = [](const CheckpointLrSchedule& s) {
    return "lr " + number_text(s.max_lr) + " -> " + number_text(s.min_lr) + ", warmup " +
           std::to_string(s.warmup_steps) + ", decay to step " + std::to_string(s.decay_steps);
  };
  return "checkpoint's learning-rate schedule is " + text(saved) + "; this run's is " + text(run) +
         " (give the same --lr, --min-lr, --warmup-steps, --lr-decay-steps and --steps)";
}

}  // namespace sextant::engine::checkpoint
