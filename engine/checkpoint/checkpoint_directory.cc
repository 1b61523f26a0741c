#include "engine/checkpoint/checkpoint_directory.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <system_error>
#include <vector>

#include "engine/checkpoint/checkpoint_error.h"
#include "engine/checkpoint/durable_file.h"
#include "engine/checkpoint/shard_file.h"

namespace sextant::engine::checkpoint {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMetadataFile = "metadata.json";
constexpr const char* kLatestFile = "latest";

std::string step_folder_name(std::int64_t step) { return "step-" + std::to_string(step); }
std::string tmp_folder(const std::string& root, std::int64_t step) {
  return (fs::path(root) / ("tmp-" + std::to_string(step))).string();
}

void remove_folder(const fs::path& path) {
  std::error_code error;
  fs::remove_all(path, error);
  if (error) throw_checkpoint_error(path.string(), "cannot remove: " + error.message());
}

// The step of a "step-<N>" folder name; -1 for any other name.
std::int64_t step_of(const std::string& name) {
  if (name.rfind("step-", 0) != 0 || name.size() == 5) return -1;
  std::int64_t step = 0;
  for (std::size_t i = 5; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

void prune(const fs::path& root, std::int64_t kept_step, int keep) {
  std::vector<std::int64_t> steps;
  std::vector<fs::path> stale_tmp;
  for (const fs::directory_entry& e : fs::directory_iterator(root)) {
    if (!e.is_directory()) continue;
    const std::string name = e.path().filename().string();
    if (const std::int64_t s = step_of(name); s >= 0) steps.push_back(s);
    else if (name.rfind("tmp-", 0) == 0) stale_tmp.push_back(e.path());
  }
  std::sort(steps.rbegin(), steps.rend());
  int kept = 0;
  for (const std::int64_t s : steps) {
    if (s == kept_step || kept < keep - 1) {
      kept += s == kept_step ? 0 : 1;
      continue;
    }
    remove_folder(root / step_folder_name(s));
  }
  for (const fs::path& p : stale_tmp) remove_folder(p);
}

}  // namespace

std::string begin_save(const std::string& root, std::int64_t step) {
  std::error_code error;
  fs::create_directories(root, error);
  if (error) throw_checkpoint_error(root, "cannot create the checkpoint folder: " + error.message());
  const std::string tmp = tmp_folder(root, step);
  remove_folder(tmp);  // a save of this step that was interrupted
  fs::create_directory(tmp, error);
  if (error) throw_checkpoint_error(tmp, "cannot create: " + error.message());
  return tmp;
}

void write_rank_shard(const std::string& root, std::int64_t step, int rank, const TrainerState& state) {
  write_shard_file((fs::path(tmp_folder(root, step)) / shard_file_name(rank)).string(), state);
}

std::string commit_save(const std::string& root, CheckpointMetadata metadata, int keep) {
  if (keep < 1) throw_checkpoint_error(root, "keep " + std::to_string(keep) + ": at least 1");
  const fs::path tmp = tmp_folder(root, metadata.step);
  metadata.files.clear();
  for (int r = 0; r < metadata.world_size; ++r) {
    ShardFileEntry e;
    e.rank = r;
    e.name = shard_file_name(r);
    const std::string path = (tmp / e.name).string();
    std::error_code error;
    e.bytes = fs::file_size(path, error);
    if (error) throw_checkpoint_error(path, "rank " + std::to_string(r) + "'s shard is missing: " + error.message());
    e.crc32 = file_crc32(path);
    metadata.files.push_back(e);
  }
  {
    const std::string text = to_json(metadata);
    DurableFile file((tmp / kMetadataFile).string());
    file.write(text.data(), text.size());
    file.sync_and_close();
  }
  sync_directory(tmp.string());
  const fs::path final_folder = fs::path(root) / step_folder_name(metadata.step);
  // The same step saved again (a rerun): `latest` may name it, so it is moved
  // aside rather than deleted until the new one is in place.
  const fs::path replaced = fs::path(root) / ("old-" + step_folder_name(metadata.step));
  const bool had_it = fs::exists(final_folder);
  if (had_it) {
    remove_folder(replaced);
    if (std::rename(final_folder.c_str(), replaced.c_str()) != 0) throw_system_error(final_folder.string(), "cannot move aside");
  }
  if (std::rename(tmp.c_str(), final_folder.c_str()) != 0)
    throw_system_error(tmp.string(), "cannot rename to " + final_folder.string());
  sync_directory(root);
  replace_file_atomically((fs::path(root) / kLatestFile).string(), step_folder_name(metadata.step) + "\n");
  if (had_it) remove_folder(replaced);
  prune(root, metadata.step, keep);
  return final_folder.string();
}

OpenedCheckpoint open_checkpoint(const std::string& path) {
  fs::path folder = path;
  if (!fs::is_directory(folder)) throw_checkpoint_error(path, "no such checkpoint folder");
  if (!fs::exists(folder / kMetadataFile)) {
    const fs::path latest = folder / kLatestFile;
    std::ifstream in(latest);
    if (!in)
      throw_checkpoint_error(path, "neither a step folder (no metadata.json) nor a checkpoint folder (no `latest`)");
    std::string name;
    in >> name;
    if (step_of(name) < 0)
      throw_checkpoint_error(latest.string(), "'" + name + "': expected a step folder name such as step-100");
    folder /= name;
    if (!fs::is_directory(folder))
      throw_checkpoint_error(latest.string(), "names " + name + ", which is not in " + path);
  }
  OpenedCheckpoint c;
  c.folder = folder.string();
  c.metadata = read_metadata((folder / kMetadataFile).string());
  return c;
}

TrainerState read_rank_state(const OpenedCheckpoint& c, int rank) {
  const std::string metadata_file = (fs::path(c.folder) / kMetadataFile).string();
  if (rank < 0 || rank >= static_cast<int>(c.metadata.files.size()))
    throw_checkpoint_error(metadata_file, "no shard for rank " + std::to_string(rank) + " (world_size " +
                                              std::to_string(c.metadata.world_size) + ")");
  const ShardFileEntry& e = c.metadata.files[static_cast<std::size_t>(rank)];
  TrainerState s = read_shard_file((fs::path(c.folder) / e.name).string(), e.bytes, e.crc32);
  if (s.steps_done != c.metadata.step)
    throw_checkpoint_error((fs::path(c.folder) / e.name).string(),
                           "holds step " + std::to_string(s.steps_done) + ", the metadata says " +
                               std::to_string(c.metadata.step));
  return s;
}

TrainerState read_resharded_state(const OpenedCheckpoint& c, const ReshardPlan& plan) {
  const std::string metadata_file = (fs::path(c.folder) / kMetadataFile).string();
  std::map<int, std::unique_ptr<ShardReader>> readers;  // opened once each, checksum checked
  auto reader = [&](int rank) -> const ShardReader& {
    std::unique_ptr<ShardReader>& r = readers[rank];
    if (r) return *r;
    if (rank < 0 || rank >= static_cast<int>(c.metadata.files.size()))
      throw_checkpoint_error(metadata_file, "no shard for rank " + std::to_string(rank) + " (world_size " +
                                                std::to_string(c.metadata.world_size) + ")");
    const ShardFileEntry& e = c.metadata.files[static_cast<std::size_t>(rank)];
    const std::string path = (fs::path(c.folder) / e.name).string();
    r = std::make_unique<ShardReader>(path, e.bytes, e.crc32);
    if (r->steps_done() != c.metadata.step)
      throw_checkpoint_error(path, "holds step " + std::to_string(r->steps_done()) + ", the metadata says " +
                                       std::to_string(c.metadata.step));
    return *r;
  };
  TrainerState s;
  s.steps_done = c.metadata.step;
  s.weights_bf16.assign(plan.weight_elements, 0);
  for (std::vector<float>* v : {&s.master, &s.adam_m, &s.adam_v}) v->assign(plan.optimizer_elements, 0.0f);
  for (const ArrayCopy& copy : plan.weights) {
    if (copy.target_offset + copy.elements > plan.weight_elements)
      throw_checkpoint_error(metadata_file, "a piece runs past this rank's weights (damaged metadata?)");
    reader(copy.source_rank).read_weights(copy.source_offset, copy.elements, s.weights_bf16.data() + copy.target_offset);
  }
  for (const ArrayCopy& copy : plan.optimizer) {
    if (copy.target_offset + copy.elements > plan.optimizer_elements)
      throw_checkpoint_error(metadata_file, "a piece runs past this rank's optimizer shard (damaged metadata?)");
    const ShardReader& r = reader(copy.source_rank);
    r.read_fp32(ShardReader::Fp32Array::kMaster, copy.source_offset, copy.elements, s.master.data() + copy.target_offset);
    r.read_fp32(ShardReader::Fp32Array::kAdamM, copy.source_offset, copy.elements, s.adam_m.data() + copy.target_offset);
    r.read_fp32(ShardReader::Fp32Array::kAdamV, copy.source_offset, copy.elements, s.adam_v.data() + copy.target_offset);
  }
  // DeepSeek-V3's expert biases where the saved run kept them (empty where it kept none).
  for (const ArrayCopy& copy : plan.expert_biases) {
    const ShardReader& r = reader(copy.source_rank);
    if (r.bias_elements() == 0) continue;
    if (copy.target_offset + copy.elements > plan.bias_elements)
      throw_checkpoint_error(metadata_file, "a piece runs past this rank's expert biases (damaged metadata?)");
    s.expert_biases.resize(plan.bias_elements, 0.0f);
    r.read_expert_biases(copy.source_offset, copy.elements, s.expert_biases.data() + copy.target_offset);
  }
  return s;
}

}  // namespace sextant::engine::checkpoint
