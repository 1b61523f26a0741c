// Inputs a new user gets wrong (issue 17), through the built binary: each is
// refused with one `sextant: error:` line naming the option, and exit code 2.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <string>

#include "tests/support/run_sextant.h"
#include "tests/support/temp_dir.h"

namespace sextant::tools {
namespace {

using sextant::testing::CommandResult;
using sextant::testing::run_sextant;
using sextant::testing::TempDir;
using sextant::testing::write_file;

const std::string kHelp = "Run with --help for more information.\n";

void expect_refused(const CommandResult& r, const std::string& message) {
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, message);
}

TEST(CliInputs, NumericOptionsAreRefusedInPlainWords) {
  TempDir dir;
  expect_refused(run_sextant(dir, "simulate --gpus 0"),
                 "sextant: error: --gpus: expected a whole number from 1 to 16777216, got '0'\n" +
                     kHelp);
  // Once reported back as 9223372036854775807 (saturated).
  expect_refused(run_sextant(dir, "simulate --gpus 99999999999999999999"),
                 "sextant: error: --gpus: expected a whole number from 1 to 16777216, got "
                 "'99999999999999999999'\n" + kHelp);
  expect_refused(run_sextant(dir, "simulate --memory-headroom nan"),
                 "sextant: error: --memory-headroom: expected a number from 0 to 0.9, got 'nan'\n" +
                     kHelp);
  expect_refused(run_sextant(dir, "search --model gpt3-175b --cluster dgx-a100 --gpus 8 --top 1e3"),
                 "sextant: error: --top: expected a whole number from 1 to 1000, got '1e3'\n" +
                     kHelp);
  expect_refused(run_sextant(dir, "run --model gpt-350m --lr inf"),
                 "sextant: error: --lr: expected a number from 0 to 1, got 'inf'\n" + kHelp);
}

// simulate and search plan for the model and cluster the user names: nothing
// is assumed (simulate once answered for GPT-3 175B on DGX A100 when both were
// left out). Both missing are said at once, each with where to find presets.
TEST(CliInputs, ModelAndClusterAreRequiredNotAssumed) {
  TempDir dir;
  const std::string model_missing =
      "sextant: error: --model: required: a model preset name, a model YAML or a HuggingFace config.json "
      "(`sextant presets` lists the presets, e.g. --model gpt3-175b)\n";
  const std::string cluster_missing =
      "sextant: error: --cluster: required: a cluster preset name or a cluster YAML (`sextant presets` lists "
      "the presets, e.g. --cluster dgx-a100)\n";
  for (const std::string command : {"simulate", "search"}) {
    const std::string gpus = " --gpus 1536 --layout tp=8,pp=16,dp=12,mbs=1,gbs=1536";
    expect_refused(run_sextant(dir, command + gpus), model_missing + cluster_missing);
    expect_refused(run_sextant(dir, command + gpus + " --cluster dgx-a100"), model_missing);
    expect_refused(run_sextant(dir, command + gpus + " --model gpt3-175b"), cluster_missing);
    const CommandResult named = run_sextant(dir, command + gpus + " --model gpt3-175b --cluster dgx-a100");
    EXPECT_EQ(named.exit_code, 0) << named.err;
  }
}

// Issue 29: with zero=3 the data-parallel overlaps change nothing in the model
// (ZeRO-3 always overlaps), so =0 is refused by name, and the search table
// shows ZeRO-3 rows with the overlaps the model applies (ovl=gp).
TEST(CliInputs, ZeroThreeOverlapsAreRefusedOffAndShownOn) {
  TempDir dir;
  const CommandResult off = run_sextant(
      dir, "simulate --model llama3-8b --cluster dgx-h100 --gpus 64 --layout tp=1,pp=1,dp=64,zero=3,"
           "overlap_grad_reduce=0,gbs=256");
  EXPECT_EQ(off.exit_code, 2);
  EXPECT_EQ(off.out, "");
  EXPECT_NE(off.err.find("sextant: error: --layout:1:24: overlap_grad_reduce: overlap_grad_reduce=0 cannot be "
                         "modelled with zero=3"),
            std::string::npos) << off.err;
  const CommandResult table = run_sextant(
      dir, "search --model llama3-8b --cluster dgx-h100 --gpus 64 --global-batch 256 --layout zero=3,tp=1 --top 3");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("zero=3 megatron-fsdp ovl=gp "), std::string::npos) << table.out;
}

// Issue 29: the search keeps TP groups inside one node (one NVLink domain) by
// default, as practitioners do, and says when a TP group across nodes would be
// faster and how to allow it. GPT-3 175B on 1,536 A100s: unconstrained, the
// model prefers tp=16 (2 % faster, predicted); by default every row has tp <= 8.
TEST(CliInputs, SearchKeepsTensorParallelismInsideANodeAndSaysWhatItCosts) {
  TempDir dir;
  const std::string args = "search --model gpt3-175b --cluster dgx-a100 --gpus 1536 --global-batch 1536 --top 5";
  const CommandResult within = run_sextant(dir, args);
  ASSERT_EQ(within.exit_code, 0) << within.err;
  for (const char* tp : {"  tp=16 ", "  tp=32 "}) {
    const std::size_t at = within.out.find(tp);
    EXPECT_TRUE(at == std::string::npos || within.out.rfind("note: TP groups", at) != std::string::npos)
        << "a ranked row with " << tp << ":\n" << within.out;
  }
  EXPECT_NE(within.out.find("note: TP groups are kept inside one node (8 GPUs, one NVLink domain), as "
                            "practitioners run them.\n  With tp=16 across nodes the model predicts "),
            std::string::npos) << within.out;
  EXPECT_NE(within.out.find("give --tp-across-nodes to rank such layouts too."), std::string::npos);
  const CommandResult json = run_sextant(dir, args + " --format json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"tp_across_nodes\": {"), std::string::npos);
  const CommandResult across = run_sextant(dir, args + " --tp-across-nodes");
  ASSERT_EQ(across.exit_code, 0) << across.err;
  EXPECT_NE(across.out.find("\n  1  tp=16 "), std::string::npos) << across.out;
  EXPECT_EQ(across.out.find("note: TP groups"), std::string::npos);
  // A tp fixed in --layout is kept, across nodes or not.
  const CommandResult fixed = run_sextant(dir, args + " --layout tp=16");
  ASSERT_EQ(fixed.exit_code, 0) << fixed.err;
  EXPECT_NE(fixed.out.find("\n  1  tp=16 "), std::string::npos) << fixed.out;
}

TEST(CliInputs, AMistypedSubcommandGetsASuggestion) {
  TempDir dir;
  expect_refused(run_sextant(dir, "simulat --gpus 8"),
                 "sextant: error: unknown subcommand 'simulat' (did you mean simulate?); accepted: "
                 "simulate, validate, search, plan, preprocess, run, report, calibrate, presets, list, "
                 "fit-profile\n");
}

// `presets` lists every kind, frameworks included, one line each with what it is.
TEST(CliInputs, PresetsListsFrameworksWithTheirFraction) {
  TempDir dir;
  const CommandResult r = run_sextant(dir, "presets");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\nframeworks (--framework;"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  nemo-24.07               sustained 0.80; NeMo 24.07"), std::string::npos) << r.out;
}

// A fully given layout the named software could not run is refused, naming
// the framework file and its key (issue 29, item 14).
TEST(CliInputs, SimulateRefusesALayoutTheFrameworkCannotRun) {
  TempDir dir;
  const CommandResult r = run_sextant(dir,
                                      "simulate --model narayanan21-1.7b --cluster dgx-a100 --gpus 32 "
                                      "--layout tp=1,pp=1,dp=32,gbs=512,mbs=1,zero=1 --framework megatron-lm-2021");
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find("framework megatron-lm-2021 cannot run zero=1 with pp=1 (at most zero=0) "
                       "(supports.max_zero_without_pipeline) (configs/frameworks/megatron-lm-2021.yaml)"),
            std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST(CliInputs, VersionNamesTheBuild) {
  TempDir dir;
  const CommandResult r = run_sextant(dir, "--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.rfind("sextant 0.1.0\ncommit ", 0), 0u) << r.out;
  // The build-time stamp (tools/git_commit.h): 12 hex digits, "-dirty" for an unclean tree, or unknown.
  const std::size_t from = std::string("sextant 0.1.0\ncommit ").size();
  const std::string commit = r.out.substr(from, r.out.find('\n', from) - from);
  EXPECT_TRUE(std::regex_match(commit, std::regex("[0-9a-f]{12}(-dirty)?|unknown"))) << commit;
  EXPECT_NE(r.out.find("\nbuild type "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("CUDA toolkit "), std::string::npos) << r.out;
}

TEST(CliInputs, PresetsListsEveryKindOneLineEach) {
  TempDir dir;
  const CommandResult r = run_sextant(dir, "list");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 8 x 1,024 = 8,192 GPUs; NVLink 5 900 GB/s and 400 Gb/s = 50 GB/s per GPU.
  EXPECT_NE(r.out.find("  dgx-b200                 1024 nodes x 8 b200-sxm-180gb (8192 GPUs; "
                       "--nodes resizes), 900 GB/s NVLink, 50 GB/s network per GPU\n"),
            std::string::npos)
      << r.out;
  // Dense rates: half the datasheet's sparse 4.5 and 9 PFLOPS.
  EXPECT_NE(r.out.find("  b200-sxm-180gb           2250 TFLOP/s bf16 dense, 4500 fp8, 168 GiB, "
                       "7.70 TB/s\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  mistral-7b               7.2 B parameters, 32 layers, hidden 4096, 32 "
                       "heads (8 KV groups), seq 8192, window 4096\n"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("  gb200-186gb              for gb200-186gb; ASSUMED, not measured: "),
            std::string::npos);
}

// Issue 25's MoE presets are listed and simulate: on one GPU, with experts
// spread over 4 (ep 4 divides tp x cp x dp = 4), and with the event engine.
// Parameters (sim/memory/parameter_count): moe-mixtral-tiny 8 x (2.6 M attention
// + 8 x 3 x 1024 x 3584 experts) + 2 x 50304 x 1024 embeddings = 0.83 B;
// moe-fine-tiny 8 x (0.66 M + 128 x 3 x 512 x 192) + 2 x 50304 x 512 = 0.36 B.
TEST(CliInputs, MoeTinyPresetsAreListedAndSimulate) {
  TempDir dir;
  const CommandResult list = run_sextant(dir, "presets");
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_NE(list.out.find("  moe-mixtral-tiny         0.8 B parameters, 8 layers, hidden 1024, 16 heads "
                          "(4 KV groups), 8 experts top-2, seq 2048\n"),
            std::string::npos)
      << list.out;
  EXPECT_NE(list.out.find("  moe-fine-tiny            0.4 B parameters, 8 layers, hidden 512, 8 heads "
                          "(2 KV groups), 128 experts top-8, seq 2048\n"),
            std::string::npos)
      << list.out;
  for (const char* command :
       {"simulate --model moe-mixtral-tiny --cluster dgx-h100 --gpus 1 --layout tp=1,pp=1,dp=1,ep=1,mbs=2,gbs=16",
        "simulate --model moe-fine-tiny --cluster dgx-h100 --gpus 4 --layout tp=1,pp=1,dp=4,ep=4,mbs=1,gbs=32",
        "simulate --model moe-fine-tiny --cluster dgx-h100 --gpus 4 --layout ep=4,mbs=1,gbs=32 --engine event",
        "simulate --model moe-mixtral-tiny --cluster dgx-h100 --gpus 4 --layout ep=2,dp=4,zero=1,mbs=2,gbs=32"}) {
    const CommandResult r = run_sextant(dir, command);
    EXPECT_EQ(r.exit_code, 0) << command << "\n" << r.err;
    EXPECT_NE(r.out.find("(fits)"), std::string::npos) << command << "\n" << r.out;
  }
}

TEST(CliInputs, ConflictingSearchOptionsAreRefused) {
  TempDir dir;
  const std::string search = "search --model llama3-8b --gpus 8 --global-batch 8 ";
  expect_refused(run_sextant(dir, search + "--cluster dgx-h100 --max-tp 2 --layout tp=8"),
                 "sextant: error: --max-tp: is 2 but --layout fixes tp=8; drop one of them\n");
  expect_refused(run_sextant(dir, search + "--cluster dgx-a100 --fp8"),
                 "sextant: error: --fp8: the cluster's GPU a100-sxm-80gb has no FP8 tensor cores "
                 "(its preset gives no peak_flops_per_s.fp8); FP8 needs Hopper or Blackwell GPUs\n");
  expect_refused(run_sextant(dir, search + "--cluster dgx-h100 --fp8 --layout precision=bf16"),
                 "sextant: error: --fp8: asks to consider FP8 but --layout fixes precision=bf16; "
                 "drop one of them\n");
}

TEST(CliInputs, ExplainOfAnInvalidLayoutExitsTwoAsSimulateDoes) {
  TempDir dir;
  const std::string args = "--model llama3-8b --cluster dgx-h100 --gpus 8 --layout tp=3,gbs=8";
  const CommandResult explain = run_sextant(dir, "search --explain " + args);
  const CommandResult simulate = run_sextant(dir, "simulate " + args);
  EXPECT_EQ(explain.exit_code, 2) << explain.out;
  EXPECT_EQ(simulate.exit_code, 2);
  EXPECT_EQ(explain.err, simulate.err);
  EXPECT_EQ(explain.out, "");
}

TEST(CliInputs, ExplainNamesTheModelStateWhenItAloneDoesNotFit) {
  TempDir dir;
  // Llama 3 70B on 8 H100s, tp=8 zero=1: bf16 weights 70.6e9·2/8 = 16.4 GiB, fp32
  // gradients 32.9 GiB and (zero=1, dp=1) 12 bytes of Adam state per parameter
  // 98.6 GiB: far above 80 GiB before any activation.
  const CommandResult r = run_sextant(
      dir, "search --explain --model llama3-70b --cluster dgx-h100 --gpus 8 "
           "--layout tp=8,pp=1,zero=1,gbs=8");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("parameters, gradients and optimizer states alone need "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("are not the cause, so a smaller micro-batch or recomputation cannot make "
                       "it fit"),
            std::string::npos)
      << r.out;
}

TEST(CliInputs, NodesSizesAPresetCluster) {
  TempDir dir;
  const std::string args =
      "simulate --model llama3-8b --cluster dgx-h100 --gpus 16384 --layout tp=1,pp=1,gbs=16384,mbs=1";
  expect_refused(run_sextant(dir, args),
                 "sextant: error: --gpus: 16384 GPUs asked for; cluster 'dgx-h100' has 8192 (1024 "
                 "nodes of 8); give --nodes 2048 to size it\n");
  const CommandResult r = run_sextant(dir, args + " --nodes 2048 --format json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"gpus\": 16384"), std::string::npos);
}

TEST(CliInputs, DirectoriesAndEmptyPrefixes) {
  TempDir dir;
  std::filesystem::create_directory(dir.file("empty"));
  expect_refused(run_sextant(dir, "simulate --model empty --cluster dgx-a100 --gpus 8"),
                 "sextant: error: --model: 'empty' is a directory without a config.json; give a "
                 "model preset name, a model .yaml file, a HuggingFace config.json or the folder "
                 "holding one\n");
  expect_refused(run_sextant(dir, "simulate --model gpt3-175b --cluster dgx-a100 --profile empty --gpus 8 --layout tp=8,pp=1,dp=1"),
                 "sextant: error: --profile: 'empty' is a directory; give a profile preset name or "
                 "a .yaml file\n");
  write_file(dir.file("c.jsonl"), "{\"text\": \"a\"}\n");
  expect_refused(run_sextant(dir, "preprocess --input c.jsonl --output-prefix ''"),
                 "sextant: error: --output-prefix: '' names no file; give a path prefix such as "
                 "data/corpus (writes data/corpus_text_document.bin and .idx)\n");
  EXPECT_FALSE(std::filesystem::exists(dir.file("_text_document.bin")));
}

// A one-layer model whose name is given by `name` (YAML double-quoted).
std::string tiny_model(const std::string& name) {
  return "name: \"" + name +
         "\"\nnum_layers: 2\nhidden_size: 256\nffn_hidden_size: 1024\nnum_attention_heads: 4\n"
         "vocab_size: 1000\nseq_length: 512\nactivation: gelu\nnormalization: layernorm\n";
}

TEST(CliInputs, NamesAreValidatedAndCsvIsQuoted) {
  TempDir dir;
  write_file(dir.file("bad.yaml"), "name: \"ab\xff\"\n" + tiny_model("x").substr(10));
  expect_refused(run_sextant(dir, "simulate --model ./bad.yaml --cluster dgx-h100 --gpus 1 --format json "
                                  "--layout tp=1,pp=1,dp=1,gbs=1"),
                 "sextant: error: ./bad.yaml:1:7: name: is not valid UTF-8 (byte 0xff at byte 2)\n");
  // A name with a comma and a quote: one field, RFC 4180 (quotes doubled).
  write_file(dir.file("comma.yaml"), tiny_model("my,model \\\"v2\\\""));
  const CommandResult r = run_sextant(dir, "simulate --model ./comma.yaml --cluster dgx-h100 "
                                           "--gpus 1 --format csv --layout tp=1,pp=1,dp=1,gbs=1");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\n\"my,model \"\"v2\"\"\",dgx-h100,1,\"tp=1,"), std::string::npos) << r.out;
}

TEST(CliInputs, MfuConventionIsStatedAndSelectable) {
  TempDir dir;
  const std::string args =
      "simulate --model gpt3-175b --cluster dgx-a100 --gpus 1536 --format json "
      "--layout tp=8,pp=16,dp=12,mbs=1,gbs=1536,recompute=selective,sp=1";
  const CommandResult megatron = run_sextant(dir, args);
  ASSERT_EQ(megatron.exit_code, 0) << megatron.err;
  EXPECT_NE(megatron.out.find("\"mfu_convention\": \"megatron\""), std::string::npos);
  const CommandResult causal = run_sextant(dir, args + " --mfu causal");
  ASSERT_EQ(causal.exit_code, 0) << causal.err;
  EXPECT_NE(causal.out.find("\"mfu_convention\": \"causal\""), std::string::npos);
  expect_refused(run_sextant(dir, args + " --mfu full"),
                 "sextant: error: --mfu: full not in {megatron,causal}\n" + kHelp);
}

TEST(CliInputs, ValidateRefusesABadCaseNamingTheField) {
  TempDir dir;
  write_file(dir.file("cases.yaml"),
             "cases:\n"
             "  - id: bad\n"
             "    gpu: H100-SXM-80GB\n"
             "    num_gpus: -8\n"
             "    global_batch: 8\n"
             "    model: {layers: 2, hidden: 256, ffn_hidden: 1024, heads: 4, vocab: 1000,\n"
             "            seq_len: 512, lyers: 3}\n"
             "    derived: {iteration_time_s: 1.0}\n");
  expect_refused(run_sextant(dir, "validate --cases cases.yaml"),
                 "sextant: error: cases.yaml:4:15: num_gpus: must be positive, got -8\n"
                 "sextant: error: cases.yaml:7:27: model.lyers: unknown key; accepted keys: "
                 "layers, hidden, ffn_hidden, heads, kv_heads, vocab, seq_len, num_experts, topk, "
                 "moe_ffn_hidden, params_billion\n");
}

TEST(CliInputs, SearchTableColumnsLineUpForLongLayoutsAndHaveALegend) {
  TempDir dir;
  // Mixtral on 64 GPUs: ep, etp and overlaps make some layouts long.
  const CommandResult r = run_sextant(
      dir, "search --model mixtral-8x7b --cluster dgx-h100 --gpus 64 --global-batch 256 --top 10");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::size_t header_at = r.out.find("  #  layout");
  ASSERT_NE(header_at, std::string::npos) << r.out;
  const std::string header = r.out.substr(header_at, r.out.find('\n', header_at) - header_at);
  // "MFU" is right-aligned over "%5.1f%%": each row's '%' sits under the header's 'U'.
  const std::size_t mfu_end = header.find("MFU") + 2;
  int rows = 0;
  std::size_t at = r.out.find('\n', header_at) + 1;
  while (at < r.out.size() && r.out[at] != '\n') {
    const std::string row = r.out.substr(at, r.out.find('\n', at) - at);
    ASSERT_GT(row.size(), mfu_end) << row;
    EXPECT_EQ(row[mfu_end], '%') << header << "\n" << row;
    ++rows;
    at += row.size() + 1;
  }
  EXPECT_EQ(rows, 10);
  EXPECT_NE(r.out.find("\nLegend: vpp virtual pipeline stages per GPU;"), std::string::npos);
  EXPECT_NE(r.out.find("  rc= activation recomputation (none|selective|full);"), std::string::npos);
  EXPECT_NE(r.out.find("  ovl= overlaps on: g grad reduce-scatter, p param all-gather, t TP "
                       "communication;"),
            std::string::npos);
}

}  // namespace
}  // namespace sextant::tools

namespace sextant::tools {
namespace {

// Issue 29, items 10 and 11, through the binary: one line naming file:line:col, exit code 2.
TEST(CliInputs, LenientConfigsAndAnImpossiblePipelineAreRefused) {
  TempDir dir;
  write_file(dir.file("config.json"),
             "{\"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 256, "
             "\"intermediate_size\": 1024, \"num_attention_heads\": 8,\n"
             " \"num_hidden_layers\": 4, \"vocab_size\": 1000, \"rope_theta\": NaN}\n");
  expect_refused(run_sextant(dir, "simulate --model config.json --cluster dgx-h100 --gpus 8 "
                                  "--global-batch 8 --seq-length 128"),
                 "sextant: error: config.json:2:60: 'NaN' is not a JSON number (RFC 8259 section 6 "
                 "has no NaN or Infinity); write a number\n");
  write_file(dir.file("m.yaml"),
             "name: m\nnum_layers: 4\nhidden_size: \"4096\"\nffn_hidden_size: 1024\n"
             "num_attention_heads: 8\nvocab_size: 1000\nseq_length: 128\nactivation: gelu\n"
             "normalization: layernorm\n");
  expect_refused(run_sextant(dir, "simulate --model m.yaml --cluster dgx-h100 --gpus 8 --global-batch 8"),
                 "sextant: error: m.yaml:3:14: hidden_size: expected an integer, got the string "
                 "\"4096\"\n");
  // llama3-8b has 32 layers: no split over 64 stages, even or uneven.
  expect_refused(run_sextant(dir, "simulate --model llama3-8b --cluster dgx-h100 --gpus 64 "
                                  "--global-batch 64 --layout pp=64"),
                 "sextant: error: --layout: pp: pp (64) must be at most num_layers (32): an even or "
                 "uneven split gives every pipeline stage at least one layer; "
                 "accepted: pp dividing 32 (1, 2, 4, 8, 16, 32) for an even split, or any pp up to "
                 "32 with an uneven one\n");
}

}  // namespace
}  // namespace sextant::tools
