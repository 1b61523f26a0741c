// Where training sequences come from: windows of seq + 1 tokens, split into the
// model's inputs (the first seq) and targets (the last seq, shifted by one).
//
// - SyntheticTokens: uniformly random tokens from a seed; no files. The loss
//   stays near ln(vocab), which is what a speed measurement needs.
// - DatasetTokens: Megatron's indexed dataset read as one stream of tokens (its
//   sequences, i.e. documents with their end-of-document tokens, one after
//   another) cut into consecutive windows overlapping by one token, as
//   Megatron's GPTDataset builds samples (Shoeybi et al. 2019; its
//   _build_sample_idx), visited in an order shuffled by the seed, reshuffled
//   each epoch.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "engine/data/indexed_dataset_reader.h"

namespace sextant::engine::data {

class TokenBatches {
 public:
  virtual ~TokenBatches() = default;
  /// Fills inputs and targets (equal sizes, a multiple of seq) with the next
  /// inputs.size() / seq sequences.
  virtual void next(std::span<std::int32_t> inputs, std::span<std::int32_t> targets) = 0;
  /// One line for people: "synthetic (uniform over 51200 tokens, seed 1)".
  virtual std::string describe() const = 0;
};

class SyntheticTokens : public TokenBatches {
 public:
  SyntheticTokens(int vocab, int seq, std::uint64_t seed);
  void next(std::span<std::int32_t> inputs, std::span<std::int32_t> targets) override;
  std::string describe() const override;

 private:
  int vocab_;
  int seq_;
  std::uint64_t seed_;
  std::mt19937_64 rng_;
};

class DatasetTokens : public TokenBatches {
 public:
  /// Opens <prefix>.bin/.idx. Throws DataError when the files are unreadable or
  /// hold fewer than seq + 1 tokens, or (when a window is read) a token is not
  /// below `vocab`.
  DatasetTokens(const std::string& prefix, int vocab, int seq, std::uint64_t seed);
  void next(std::span<std::int32_t> inputs, std::span<std::int32_t> targets) override;
  std::string describe() const override;

  std::int64_t windows() const { return static_cast<std::int64_t>(order_.size()); }
  int epoch() const { return epoch_; }

 private:
  /// Tokens [start, start + count) of the stream, in order.
  void read_stream(std::int64_t start, std::span<std::int32_t> out) const;
  void reshuffle();

  std::unique_ptr<IndexedDatasetReader> reader_;
  int vocab_;
  int seq_;
  std::uint64_t seed_;
  std::vector<std::int64_t> sequence_starts_;  // stream position of each sequence, plus the end
  std::vector<std::int64_t> order_;            // window indices of this epoch
  std::size_t cursor_ = 0;
  int epoch_ = 0;
  std::vector<std::int32_t> window_;
};

}  // namespace sextant::engine::data
