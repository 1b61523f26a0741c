#include "engine/data/preprocess_jsonl.h"

#include <filesystem>
#include <system_error>
#include <vector>

#include "engine/data/byte_tokenizer.h"
#include "engine/data/data_error.h"
#include "engine/data/gpt2_bpe_tokenizer.h"
#include "engine/data/indexed_dataset_format.h"
#include "engine/data/indexed_dataset_writer.h"
#include "engine/data/jsonl_reader.h"

namespace sextant::engine::data {

std::unique_ptr<Tokenizer> make_tokenizer(const PreprocessOptions& options) {
  const bool vocab = !options.vocab_file.empty(), merges = !options.merges_file.empty();
  std::string type = options.tokenizer_type;
  if (type.empty()) type = vocab || merges ? kGpt2BpeTokenizerType : kByteTokenizerType;

  if (type == kByteTokenizerType) {
    if (vocab || merges)
      throw DataError(vocab ? options.vocab_file : options.merges_file,
                      std::string("--vocab-file and --merge-file are for --tokenizer-type ") +
                          kGpt2BpeTokenizerType + ", not " + kByteTokenizerType);
    return std::make_unique<ByteTokenizer>();
  }
  if (type != kGpt2BpeTokenizerType)
    throw DataError("--tokenizer-type", "unknown tokenizer \"" + type + "\" (accepted: " +
                                            kByteTokenizerType + ", " + kGpt2BpeTokenizerType +
                                            ")");
  if (!vocab && !merges)
    throw DataError("--tokenizer-type", std::string(kGpt2BpeTokenizerType) +
                                            " needs --vocab-file (vocab.json) and --merge-file "
                                            "(merges.txt)");
  if (!merges)
    throw DataError(options.vocab_file,
                    "--vocab-file needs --merge-file too: GPT-2 BPE reads both vocab.json and "
                    "merges.txt");
  if (!vocab)
    throw DataError(options.merges_file,
                    "--merge-file needs --vocab-file too: GPT-2 BPE reads both vocab.json and "
                    "merges.txt");
  return std::make_unique<Gpt2BpeTokenizer>(
      Gpt2BpeTokenizer::from_files(options.vocab_file, options.merges_file));
}

PreprocessStats preprocess_jsonl(const PreprocessOptions& options) {
  const std::unique_ptr<const Tokenizer> owned = make_tokenizer(options);
  const Tokenizer& tokenizer = *owned;
  PreprocessStats stats;
  stats.dataset_prefix = document_dataset_prefix(options.output_prefix, options.json_key);
  stats.vocab_size = tokenizer.vocab_size();
  stats.tokenizer = tokenizer.description();

  JsonlReader reader(options.input_path, options.json_key);  // fails before any output exists
  std::string text;
  // An empty dataset would fail later, in training, far from its cause: refuse
  // it here, before any folder or file is made.
  if (!reader.next(text)) {
    throw DataError(options.input_path,
                    "no documents: the file holds no JSON line (it is empty or blank); nothing "
                    "was written");
  }
  const std::filesystem::path folder = std::filesystem::path(stats.dataset_prefix).parent_path();
  if (!folder.empty()) {
    std::error_code error;
    std::filesystem::create_directories(folder, error);
    if (error) throw DataError(folder.string(), "cannot create the folder: " + error.message());
  }

  IndexedDatasetWriter writer(stats.dataset_prefix, optimal_token_dtype(tokenizer.vocab_size()));
  std::vector<int32_t> tokens;
  do {
    tokens.clear();
    tokenizer.encode(text, tokens);
    if (options.append_eod && !tokens.empty()) tokens.push_back(tokenizer.end_of_document());
    writer.add_document(tokens);
  } while (reader.next(text));
  writer.finish();

  stats.documents = writer.num_documents();
  stats.tokens = writer.num_tokens();
  stats.input_bytes = reader.bytes_read();
  stats.bin_bytes = writer.bin_bytes();
  stats.idx_bytes = writer.idx_bytes();
  return stats;
}

}  // namespace sextant::engine::data
