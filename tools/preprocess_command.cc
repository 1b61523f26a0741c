// `sextant preprocess`: loose JSON lines → Megatron's indexed dataset (.bin/.idx).
#include <chrono>
#include <cstdio>
#include <memory>

#include "engine/data/data_error.h"
#include "engine/data/preprocess_jsonl.h"
#include "sim/core/config_error.h"
#include "tools/commands.h"

namespace sextant::tools {

namespace {
int run_preprocess(const engine::data::PreprocessOptions& o, std::ostream& out) {
  // "" or "data/" would write "_text_document.bin" into that folder, a name nobody asked for.
  if (o.output_prefix.empty() || o.output_prefix.back() == '/') {
    throw sim::ConfigError({{"--output-prefix", 0, 0, "",
                             "'" + o.output_prefix + "' names no file; give a path prefix such "
                             "as data/corpus (writes data/corpus_" + o.json_key +
                             "_document.bin and .idx)"}});
  }
  const auto start = std::chrono::steady_clock::now();
  engine::data::PreprocessStats stats;
  try {
    stats = engine::data::preprocess_jsonl(o);
  } catch (const engine::data::DataError& e) {
    // Bad input data is bad input, exit code 2, like a bad preset.
    throw sim::ConfigError({{e.file(), static_cast<int>(e.line()), static_cast<int>(e.column()),
                             "", e.reason()}});
  }
  const double elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  char line[256];
  out << "wrote " << stats.dataset_prefix << ".bin and .idx (" << stats.tokenizer << ", vocab "
      << stats.vocab_size << ")\n";
  std::snprintf(line, sizeof line, "documents: %lld\ntokens: %lld\n",
                static_cast<long long>(stats.documents), static_cast<long long>(stats.tokens));
  out << line;
  std::snprintf(line, sizeof line, "bytes read: %lld\nbytes written: %lld (.bin %lld, .idx %lld)\n",
                static_cast<long long>(stats.input_bytes),
                static_cast<long long>(stats.bin_bytes + stats.idx_bytes),
                static_cast<long long>(stats.bin_bytes), static_cast<long long>(stats.idx_bytes));
  out << line;
  std::snprintf(line, sizeof line, "time: %.3f s (%.1f MB/s of input)\n", elapsed_s,
                elapsed_s > 0 ? static_cast<double>(stats.input_bytes) / elapsed_s / 1e6 : 0.0);
  out << line;
  return 0;
}
}  // namespace

CommandRunner add_preprocess_command(CLI::App& app, const CommonOptions&) {
  auto o = std::make_shared<engine::data::PreprocessOptions>();
  CLI::App* cmd = app.add_subcommand(
      "preprocess",
      "Turn loose JSON lines into a Megatron indexed dataset for `sextant run --data`.\n"
      "Each line is one document: the string under --json-key, tokenized byte by byte\n"
      "(vocab 257: bytes 0-255 and end-of-document 256), or with GPT-2's BPE when\n"
      "--vocab-file and --merge-file are given (end-of-document <|endoftext|>). Writes\n"
      "<output-prefix>_<json-key>_document.bin and .idx, as Megatron's\n"
      "tools/preprocess_data.py names them, and creates the folder if needed.\n"
      "A malformed line or tokenizer file stops it (exit 2, file:line) with no output\n"
      "written.\n\n"
      "Examples:\n"
      "  sextant preprocess --input corpus.jsonl --json-key text --output-prefix data/corpus\n"
      "  sextant preprocess --input corpus.jsonl --output-prefix data/corpus --append-eod \\\n"
      "      --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt");
  cmd->add_option("--input", o->input_path, "JSON lines file, one object per line")->required();
  cmd->add_option("--json-key", o->json_key, "key whose string value is the document")
      ->capture_default_str();
  cmd->add_option("--output-prefix", o->output_prefix, "path prefix of the dataset")->required();
  cmd->add_flag("--append-eod", o->append_eod,
                "append the end-of-document token to each non-empty document");
  cmd->add_option("--tokenizer-type", o->tokenizer_type,
                  "byte, or GPT2BPETokenizer (needs --vocab-file and --merge-file); default:\n"
                  "GPT2BPETokenizer when those are given, else byte")
      ->check(CLI::IsMember({engine::data::kByteTokenizerType,
                             engine::data::kGpt2BpeTokenizerType}));
  cmd->add_option("--vocab-file", o->vocab_file,
                  "GPT-2 BPE vocabulary: vocab.json, token strings to ids");
  // Megatron's preprocess_data.py spells it --merge-file; --merge-files is accepted too.
  cmd->add_option("--merge-file,--merge-files", o->merges_file,
                  "GPT-2 BPE merges: merges.txt, one pair per line in merge order");
  return [o](std::ostream& out) { return run_preprocess(*o, out); };
}

}  // namespace sextant::tools
