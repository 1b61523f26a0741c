// The checkpoint format on the CPU: the metadata's round trip, a shard's
// round trip and its damage named, the atomic save (a crash before the
// rename leaves `latest` on the previous step), keeping the last K, and the
// exact messages for a layout or model that differs.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint_directory.h"
#include "engine/checkpoint/checkpoint_metadata.h"
#include "engine/checkpoint/shard_file.h"
#include "sim/core/config_error.h"

namespace sextant::engine::checkpoint {
namespace {

namespace fs = std::filesystem;

class CheckpointFormatTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("sextant-ckpt-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "-" +
             std::to_string(::getpid()));
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  std::string root() const { return root_.string(); }
  fs::path root_;
};

CheckpointMetadata example_metadata(std::int64_t step, int world_size) {
  CheckpointMetadata m;
  m.step = step;
  m.data_batches = step + 1;  // one skipped step
  m.seed = 1234;
  m.model = {"tiny-gpt", 2, 128, 512, 2, 2, 64, 160, 48, 431232};
  m.layout = {1, world_size, 1};
  m.world_size = world_size;
  m.lr_schedule = {1e-3, 1e-4, 2, 6};
  // A tp=1 layout of two tensors (3 + 1 elements, the second at offset 64);
  // with dp > 1 each dp rank's ZeRO shard is one block of a 128-element bucket.
  m.sharding.flat_elements = 128;
  m.sharding.tensors = {{"wte", 1, 3, 0, -1, {}}, {"layers.0.qkv_weight", 1, 1, 64, 0, {1}}};
  for (int d = 0; d < world_size && world_size > 1; ++d)
    m.sharding.optimizer_shards.push_back({{static_cast<std::uint64_t>(d) * 128 / world_size,
                                            128u / static_cast<std::uint64_t>(world_size), 0}});
  return m;
}

TrainerState example_state(std::int64_t step, float base) {
  TrainerState s;
  s.steps_done = step;
  s.weights_bf16 = {0x3f80, 0xbf80, 0x0000, 0x7fc0};  // 1, -1, 0, NaN in bf16
  s.master = {base, -2.5f, 1e-30f};
  s.adam_m = {0.125f, 0.0f, -3.0f};
  s.adam_v = {1e-8f, 2.0f, 0.5f};
  return s;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s;
}

// The sim::ConfigError's one diagnostic as "file: message".
template <typename F>
std::string error_of(F f) {
  try {
    f();
  } catch (const sim::ConfigError& e) {
    return e.diagnostics().at(0).file + ": " + e.diagnostics().at(0).message;
  }
  return "(no error)";
}

void save(const std::string& root, std::int64_t step, int ranks, int keep) {
  begin_save(root, step);
  for (int r = 0; r < ranks; ++r) write_rank_shard(root, step, r, example_state(step, static_cast<float>(r)));
  commit_save(root, example_metadata(step, ranks), keep);
}

TEST_F(CheckpointFormatTest, MetadataRoundTripsThroughJson) {
  CheckpointMetadata m = example_metadata(3, 2);
  m.files = {{0, "rank-00000.bin", 88, 0x1a2b3c4du}, {1, "rank-00001.bin", 88, 0xdeadbeefu}};
  const std::string text = to_json(m);
  EXPECT_NE(text.find("\"crc32\": \"1a2b3c4d\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"format_version\": 2"), std::string::npos) << text;
  m.format_version = 2;  // pp = 1 is still written as version 2, which older sextants read
  EXPECT_EQ(parse_metadata(text, "m.json"), m);
  // Without a sharding it is written as version 1, which still reads (pp = 1).
  m.sharding = {};
  m.format_version = 1;
  EXPECT_EQ(parse_metadata(to_json(m), "m.json"), m);
}

TEST_F(CheckpointFormatTest, MetadataErrorsNameTheKey) {
  EXPECT_EQ(error_of([] { parse_metadata("{\"format\": \"sextant-checkpoint\", \"format_version\": 4}", "m.json"); }),
            "m.json: format_version 4: this sextant reads versions 1-3");
  CheckpointMetadata m = example_metadata(3, 1);
  m.files = {{0, "rank-00000.bin", 88, 0x1a2b3c4du}};
  std::string text = to_json(m);
  text.replace(text.find("\"shape\": ["), 11, "\"shape\": [7, ");  // three numbers
  EXPECT_EQ(error_of([&] { parse_metadata(text, "m.json"); }),
            "m.json: sharding.tensors[0]: shape: expected [rows, cols]");
  const std::string no_step = "{\"format\": \"sextant-checkpoint\", \"format_version\": 1}";
  EXPECT_EQ(error_of([&] { parse_metadata(no_step, "m.json"); }).rfind("m.json: step: missing or of the wrong type", 0), 0u);
  EXPECT_EQ(error_of([] { parse_metadata("{\"format\": ", "m.json"); }).rfind("m.json: not valid JSON", 0), 0u);
}

TEST_F(CheckpointFormatTest, ShardRoundTripsBitForBit) {
  fs::create_directories(root_);
  const std::string path = (root_ / "rank-00000.bin").string();
  const TrainerState s = example_state(7, 0.1f);
  write_shard_file(path, s);
  // 32 header bytes + 4 bf16 weights x 2 + 3 x 3 fp32 x 4 = 32 + 8 + 36 = 76.
  EXPECT_EQ(fs::file_size(path), 76u);
  EXPECT_EQ(shard_file_bytes(s), 76u);
  const TrainerState back = read_shard_file(path, 76, file_crc32(path));
  EXPECT_EQ(back.steps_done, 7);
  EXPECT_EQ(back.weights_bf16, s.weights_bf16);
  EXPECT_EQ(std::memcmp(back.master.data(), s.master.data(), 12), 0);
  EXPECT_EQ(back.adam_m, s.adam_m);
  EXPECT_EQ(back.adam_v, s.adam_v);
}

// With DeepSeek-V3's expert biases the shard is of version 2: 8 more header
// bytes (their count) and the biases last; a reader takes both versions.
TEST_F(CheckpointFormatTest, ShardWithExpertBiasesRoundTrips) {
  fs::create_directories(root_);
  const std::string path = (root_ / "rank-00000.bin").string();
  TrainerState s = example_state(7, 0.1f);
  s.expert_biases = {0.0009765625f, -0.001953125f, 0.0f};
  write_shard_file(path, s);
  // 40 header bytes + 4 bf16 weights x 2 + 3 x 3 fp32 x 4 + 3 biases x 4 = 40 + 8 + 36 + 12 = 96.
  EXPECT_EQ(fs::file_size(path), 96u);
  EXPECT_EQ(shard_file_bytes(s), 96u);
  EXPECT_EQ(read_shard_file(path, 96, file_crc32(path)), s);
  const ShardReader reader(path, 96, file_crc32(path));
  EXPECT_EQ(reader.bias_elements(), 3u);
  float middle = 0;
  reader.read_expert_biases(1, 1, &middle);
  EXPECT_EQ(middle, -0.001953125f);
  std::vector<float> master(3);
  reader.read_fp32(ShardReader::Fp32Array::kAdamV, 0, 3, master.data());
  EXPECT_EQ(master, s.adam_v);
  EXPECT_EQ(error_of([&] { reader.read_expert_biases(2, 2, &middle); }),
            path + ": expert biases [2, +2) run past its 3");
}

TEST_F(CheckpointFormatTest, DamagedShardsAreNamedWithTheReason) {
  fs::create_directories(root_);
  const std::string path = (root_ / "rank-00000.bin").string();
  write_shard_file(path, example_state(7, 0.1f));
  const std::uint32_t crc = file_crc32(path);
  {  // one bit flipped in the master weights (offset 40 = 32 header + 8 weight bytes)
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(40);
    f.put(static_cast<char>(0x01));
  }
  const std::string flipped = error_of([&] { read_shard_file(path, 76, crc); });
  EXPECT_EQ(flipped.rfind(path + ": checksum mismatch: CRC-32 ", 0), 0u) << flipped;
  EXPECT_NE(flipped.find("the metadata says " + crc32_hex(crc) + " (the file is damaged)"), std::string::npos);
  fs::resize_file(path, 50);
  EXPECT_EQ(error_of([&] { read_shard_file(path, 76, crc); }),
            path + ": truncated: 50 bytes, the metadata says 76");
  fs::remove(path);
  EXPECT_EQ(error_of([&] { read_shard_file(path, 76, crc); }),
            path + ": cannot open the shard: No such file or directory");
}

TEST_F(CheckpointFormatTest, SaveCommitsAtomicallyAndLoadsBack) {
  save(root(), 3, 2, 2);
  EXPECT_EQ(read_text(root_ / "latest"), "step-3\n");
  EXPECT_FALSE(fs::exists(root_ / "tmp-3"));
  const OpenedCheckpoint c = open_checkpoint(root());
  EXPECT_EQ(c.folder, (root_ / "step-3").string());
  EXPECT_EQ(c.metadata.step, 3);
  ASSERT_EQ(c.metadata.files.size(), 2u);
  EXPECT_EQ(c.metadata.files[1].name, "rank-00001.bin");
  EXPECT_EQ(c.metadata.files[1].bytes, 76u);
  EXPECT_EQ(read_rank_state(c, 1), example_state(3, 1.0f));
  // The step folder itself loads too.
  EXPECT_EQ(open_checkpoint((root_ / "step-3").string()).metadata, c.metadata);
}

TEST_F(CheckpointFormatTest, CrashBeforeTheRenameLeavesLatestOnTheOldStep) {
  save(root(), 3, 1, 2);
  // Step 6: the shard written, then the process dies before commit_save.
  begin_save(root(), 6);
  write_rank_shard(root(), 6, 0, example_state(6, 0.0f));
  EXPECT_EQ(read_text(root_ / "latest"), "step-3\n");
  EXPECT_FALSE(fs::exists(root_ / "step-6"));
  EXPECT_EQ(open_checkpoint(root()).metadata.step, 3);
  // The next save removes the leftover.
  save(root(), 9, 1, 2);
  EXPECT_FALSE(fs::exists(root_ / "tmp-6"));
  EXPECT_EQ(open_checkpoint(root()).metadata.step, 9);
}

TEST_F(CheckpointFormatTest, SavingTheSameStepAgainReplacesIt) {
  save(root(), 3, 1, 2);
  begin_save(root(), 3);
  write_rank_shard(root(), 3, 0, example_state(3, 42.0f));
  commit_save(root(), example_metadata(3, 1), 2);
  EXPECT_EQ(read_text(root_ / "latest"), "step-3\n");
  EXPECT_FALSE(fs::exists(root_ / "old-step-3"));
  const OpenedCheckpoint c = open_checkpoint(root());
  EXPECT_EQ(read_rank_state(c, 0).master[0], 42.0f);
}

TEST_F(CheckpointFormatTest, KeepsTheLastK) {
  for (const int step : {2, 4, 6, 8}) save(root(), step, 1, 2);
  EXPECT_FALSE(fs::exists(root_ / "step-2"));
  EXPECT_FALSE(fs::exists(root_ / "step-4"));
  EXPECT_TRUE(fs::exists(root_ / "step-6"));
  EXPECT_TRUE(fs::exists(root_ / "step-8"));
  save(root(), 10, 1, 1);
  EXPECT_FALSE(fs::exists(root_ / "step-6"));
  EXPECT_FALSE(fs::exists(root_ / "step-8"));
  EXPECT_TRUE(fs::exists(root_ / "step-10"));
}

TEST_F(CheckpointFormatTest, ChecksumMismatchNamesTheFile) {
  save(root(), 3, 2, 2);
  const fs::path shard = root_ / "step-3" / "rank-00001.bin";
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(60);
    f.put(static_cast<char>(0x55));
  }
  const OpenedCheckpoint c = open_checkpoint(root());
  EXPECT_NO_THROW(read_rank_state(c, 0));
  const std::string message = error_of([&] { read_rank_state(c, 1); });
  EXPECT_EQ(message.rfind(shard.string() + ": checksum mismatch", 0), 0u) << message;
}

TEST_F(CheckpointFormatTest, MissingPiecesAreNamed) {
  EXPECT_EQ(error_of([&] { open_checkpoint(root()); }), root() + ": no such checkpoint folder");
  fs::create_directories(root_);
  EXPECT_EQ(error_of([&] { open_checkpoint(root()); }),
            root() + ": neither a step folder (no metadata.json) nor a checkpoint folder (no `latest`)");
  save(root(), 3, 1, 2);
  fs::remove(root_ / "step-3" / "metadata.json");
  EXPECT_EQ(error_of([&] { open_checkpoint(root()); }),
            (root_ / "step-3" / "metadata.json").string() +
                ": cannot open the checkpoint's metadata: No such file or directory");
  fs::remove_all(root_ / "step-3");
  EXPECT_EQ(error_of([&] { open_checkpoint(root()); }),
            (root_ / "latest").string() + ": names step-3, which is not in " + root());
}

TEST_F(CheckpointFormatTest, LayoutMismatchSaysWhatDiffers) {
  // A version-2 checkpoint (its sharding known) loads into another tp, dp or zero.
  EXPECT_EQ(layout_mismatch({2, 1, 0}, {1, 2, 1}, true), "");
  // Version 1 does not say where its tensors lie, in the order the engine no longer uses: refused in any layout.
  EXPECT_EQ(layout_mismatch({2, 1, 0}, {1, 2, 0}, false),
            "checkpoint has tp=2, dp=1, zero=0; this run has tp=1, dp=2, zero=0: its metadata (format version 1) "
            "does not say where its tensors lie, and this sextant lays them out in another order; load it with the "
            "sextant that wrote it");
  EXPECT_NE(layout_mismatch({1, 2, 1}, {1, 2, 1}, false), "");
  // Version 3 describes each pipeline stage: another pp, vpp, tp or dp loads by tensor name.
  EXPECT_EQ(layout_mismatch({1, 1, 0, 2}, {2, 1, 0, 1}, true), "");
  EXPECT_EQ(layout_mismatch({1, 1, 0, 2, 2}, {2, 2, 0, 4, 1}, true), "");
  EXPECT_EQ(layout_mismatch({1, 2, 1}, {1, 1, 0, 2}, true), "");  // ZeRO-1 without a pipeline, into one
  EXPECT_NE(layout_mismatch({1, 1, 0, 2}, {1, 1, 0, 1}, false), "");
  // The distributed optimizer with a pipeline: its stages' shards are described too.
  EXPECT_EQ(layout_mismatch({1, 2, 1, 2}, {1, 2, 1, 2}, true), "");
  EXPECT_EQ(layout_mismatch({1, 2, 0, 2, 2}, {1, 2, 1, 2, 2}, true), "");
}

TEST_F(CheckpointFormatTest, ModelMismatchListsTheFields) {
  const CheckpointModel saved{"tiny-gpt", 2, 128, 512, 2, 2, 64, 160, 48, 431232};
  CheckpointModel run = saved;
  EXPECT_EQ(model_mismatch(saved, run), "");
  run.name = "other";
  run.hidden_size = 256;
  run.parameters_per_rank = 900000;
  EXPECT_EQ(model_mismatch(saved, run),
            "checkpoint is of model 'tiny-gpt' (hidden_size 128, parameters_per_rank 431232); this run's is "
            "'other' (hidden_size 256, parameters_per_rank 900000)");
  EXPECT_EQ(lr_schedule_mismatch({1e-3, 1e-4, 2, 6}, {1e-3, 1e-4, 2, 12}),
            "checkpoint's learning-rate schedule is lr 0.001 -> 0.0001, warmup 2, decay to step 6; this run's "
            "is lr 0.001 -> 0.0001, warmup 2, decay to step 12 (give the same --lr, --min-lr, --warmup-steps, "
            "--lr-decay-steps and --steps)");
}

}  // namespace
}  // namespace sextant::engine::checkpoint
