#include "engine/data/token_batches.h"

#include <algorithm>
#include <stdexcept>

#include "engine/data/data_error.h"

namespace sextant::engine::data {

namespace {
void check_spans(std::span<std::int32_t> inputs, std::span<std::int32_t> targets, int seq) {
  if (inputs.size() != targets.size() || inputs.size() % static_cast<std::size_t>(seq) != 0)
    throw std::invalid_argument("TokenBatches::next: inputs and targets must both hold whole sequences");
}
}  // namespace

SyntheticTokens::SyntheticTokens(int vocab, int seq, std::uint64_t seed)
    : vocab_(vocab), seq_(seq), seed_(seed), rng_(seed) {}

void SyntheticTokens::next(std::span<std::int32_t> inputs, std::span<std::int32_t> targets) {
  check_spans(inputs, targets, seq_);
  std::uniform_int_distribution<std::int32_t> token(0, vocab_ - 1);
  const std::size_t seq = static_cast<std::size_t>(seq_);
  for (std::size_t first = 0; first < inputs.size(); first += seq) {
    std::int32_t previous = token(rng_);
    for (std::size_t t = 0; t < seq; ++t) {
      inputs[first + t] = previous;
      previous = token(rng_);
      targets[first + t] = previous;
    }
  }
}

std::string SyntheticTokens::describe() const {
  return "synthetic (uniform over " + std::to_string(vocab_) + " tokens, seed " +
         std::to_string(seed_) + ")";
}

DatasetTokens::DatasetTokens(const std::string& prefix, int vocab, int seq, std::uint64_t seed)
    : reader_(std::make_unique<IndexedDatasetReader>(prefix)),
      vocab_(vocab),
      seq_(seq),
      seed_(seed),
      window_(static_cast<std::size_t>(seq) + 1) {
  sequence_starts_.reserve(static_cast<std::size_t>(reader_->num_sequences()) + 1);
  std::int64_t position = 0;
  for (std::int64_t i = 0; i < reader_->num_sequences(); ++i) {
    sequence_starts_.push_back(position);
    position += reader_->sequence_length(i);
  }
  sequence_starts_.push_back(position);
  // Windows of seq + 1 tokens starting every seq tokens (the last token of one
  // window is the first of the next): (tokens - 1) / seq of them.
  const std::int64_t count = (position - 1) / seq_;
  if (count < 1)
    throw DataError(reader_->bin_path(), "holds " + std::to_string(position) +
                                             " tokens; one training sequence needs " +
                                             std::to_string(seq_ + 1));
  order_.resize(static_cast<std::size_t>(count));
  reshuffle();
}

void DatasetTokens::reshuffle() {
  for (std::size_t i = 0; i < order_.size(); ++i) order_[i] = static_cast<std::int64_t>(i);
  std::mt19937_64 rng(seed_ + static_cast<std::uint64_t>(epoch_));
  std::shuffle(order_.begin(), order_.end(), rng);
  cursor_ = 0;
}

void DatasetTokens::read_stream(std::int64_t start, std::span<std::int32_t> out) const {
  // The sequence holding `start`: the last one starting at or before it.
  auto it = std::upper_bound(sequence_starts_.begin(), sequence_starts_.end(), start);
  std::int64_t sequence = (it - sequence_starts_.begin()) - 1;
  std::size_t written = 0;
  while (written < out.size()) {
    // Only the part of the sequence the window covers: documents can be far
    // longer than a window.
    const std::int64_t skip = start + static_cast<std::int64_t>(written) -
                              sequence_starts_[static_cast<std::size_t>(sequence)];
    const std::int64_t count = std::min<std::int64_t>(
        reader_->sequence_length(sequence) - skip, static_cast<std::int64_t>(out.size() - written));
    const std::vector<std::int32_t> tokens = reader_->tokens(sequence, skip, count);
    std::copy(tokens.begin(), tokens.end(), out.begin() + static_cast<std::ptrdiff_t>(written));
    written += tokens.size();
    ++sequence;
  }
}

void DatasetTokens::next(std::span<std::int32_t> inputs, std::span<std::int32_t> targets) {
  check_spans(inputs, targets, seq_);
  const std::size_t seq = static_cast<std::size_t>(seq_);
  for (std::size_t first = 0; first < inputs.size(); first += seq) {
    if (cursor_ == order_.size()) {
      ++epoch_;
      reshuffle();
    }
    const std::int64_t window = order_[cursor_++];
    read_stream(window * seq_, window_);
    for (std::size_t t = 0; t <= seq; ++t) {
      if (window_[t] < 0 || window_[t] >= vocab_)
        throw DataError(reader_->bin_path(),
                        "token " + std::to_string(window_[t]) + " at stream position " +
                            std::to_string(window * seq_ + static_cast<std::int64_t>(t)) +
                            " is outside the model's vocabulary [0, " + std::to_string(vocab_) +
                            "); was the dataset made with another tokenizer?");
    }
    std::copy(window_.begin(), window_.end() - 1, inputs.begin() + static_cast<std::ptrdiff_t>(first));
    std::copy(window_.begin() + 1, window_.end(), targets.begin() + static_cast<std::ptrdiff_t>(first));
  }
}

std::string DatasetTokens::describe() const {
  return reader_->bin_path() + " (" + std::to_string(reader_->num_documents()) + " documents, " +
         std::to_string(sequence_starts_.back()) + " tokens, " + std::to_string(order_.size()) +
         " windows of " + std::to_string(seq_ + 1) + ", epoch " + std::to_string(epoch_) + ")";
}

}  // namespace sextant::engine::data
