#include "engine/data/preprocess_jsonl.h"

#include <filesystem>
#include <system_error>
#include <vector>

#include "engine/data/byte_tokenizer.h"
#include "engine/data/data_error.h"
#include "engine/data/indexed_dataset_format.h"
#include "engine/data/indexed_dataset_writer.h"
#include "engine/data/jsonl_reader.h"

namespace sextant::engine::data {

PreprocessStats preprocess_jsonl(const PreprocessOptions& options) {
  const ByteTokenizer tokenizer;
  PreprocessStats stats;
  stats.dataset_prefix = document_dataset_prefix(options.output_prefix, options.json_key);
  stats.vocab_size = tokenizer.vocab_size();

  JsonlReader reader(options.input_path, options.json_key);  // fails before any output exists
  const std::filesystem::path folder = std::filesystem::path(stats.dataset_prefix).parent_path();
  if (!folder.empty()) {
    std::error_code error;
    std::filesystem::create_directories(folder, error);
    if (error) throw DataError(folder.string(), "cannot create the folder: " + error.message());
  }

  IndexedDatasetWriter writer(stats.dataset_prefix, optimal_token_dtype(tokenizer.vocab_size()));
  std::string text;
  std::vector<int32_t> tokens;
  while (reader.next(text)) {
    tokens.clear();
    tokenizer.encode(text, tokens);
    if (options.append_eod && !tokens.empty()) tokens.push_back(tokenizer.end_of_document());
    writer.add_document(tokens);
  }
  writer.finish();

  stats.documents = writer.num_documents();
  stats.tokens = writer.num_tokens();
  stats.input_bytes = reader.bytes_read();
  stats.bin_bytes = writer.bin_bytes();
  stats.idx_bytes = writer.idx_bytes();
  return stats;
}

}  // namespace sextant::engine::data
