// The reader against files built here byte by byte to Megatron-LM's format
// (megatron/core/datasets/indexed_dataset.py: _IndexWriter), so a dataset written
// by Megatron's tools loads unchanged; and against every kind of damage.
#include "engine/data/indexed_dataset_reader.h"

#include <gtest/gtest.h>

#include <cstring>

#include "engine/data/data_error.h"
#include "tests/support/temp_dir.h"

namespace sextant::engine::data {
namespace {

using sextant::testing::TempDir;
using sextant::testing::write_file;

// Two documents at sentence level, as preprocess_data.py --split-sentences writes
// them: document 0 is sequences 0 and 1, document 1 is sequence 2. uint16 tokens.
//   sequence 0: {10, 11}          bytes [0, 4)
//   sequence 1: {12}              bytes [4, 6)
//   sequence 2: {500, 65535, 0}   bytes [6, 12)
// .idx: 34 header + 3·4 lengths + 3·8 pointers + 3·8 document indices = 94 bytes.
const unsigned char kHandBuiltIdx[] = {
    'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0,  // magic
    1, 0, 0, 0, 0, 0, 0, 0,                   // version 1 (uint64)
    8,                                        // dtype code 8: uint16
    3, 0, 0, 0, 0, 0, 0, 0,                   // sequence count 3 (uint64)
    3, 0, 0, 0, 0, 0, 0, 0,                   // document count 3 = 2 documents + leading 0
    2, 0, 0, 0,                               // sequence lengths (int32): 2
    1, 0, 0, 0,                               //   1
    3, 0, 0, 0,                               //   3
    0, 0, 0, 0, 0, 0, 0, 0,                   // sequence pointers (int64, bytes): 0
    4, 0, 0, 0, 0, 0, 0, 0,                   //   4
    6, 0, 0, 0, 0, 0, 0, 0,                   //   6
    0, 0, 0, 0, 0, 0, 0, 0,                   // document indices (int64): 0
    2, 0, 0, 0, 0, 0, 0, 0,                   //   2
    3, 0, 0, 0, 0, 0, 0, 0,                   //   3
};
const unsigned char kHandBuiltBin[] = {
    10, 0, 11, 0,            // sequence 0
    12, 0,                   // sequence 1
    0xF4, 0x01, 0xFF, 0xFF,  // sequence 2: 500, 65535,
    0, 0,                    //   0
};

std::string bytes_of(const unsigned char* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}
std::string hand_built_idx() { return bytes_of(kHandBuiltIdx, sizeof kHandBuiltIdx); }
std::string hand_built_bin() { return bytes_of(kHandBuiltBin, sizeof kHandBuiltBin); }

// Overwrites sizeof(T) bytes at `offset` with `value`, little-endian.
template <typename T>
std::string patched(std::string bytes, size_t offset, T value) {
  std::memcpy(bytes.data() + offset, &value, sizeof(T));
  return bytes;
}

class IndexedDatasetReaderTest : public ::testing::Test {
 protected:
  std::string write(const std::string& idx, const std::string& bin) {
    const std::string prefix = dir_.file("corpus");
    write_file(prefix + ".idx", idx);
    write_file(prefix + ".bin", bin);
    return prefix;
  }
  // The message a corrupt .idx gives, or "" if it opened.
  std::string error_for(const std::string& idx, const std::string& bin = hand_built_bin()) {
    const std::string prefix = write(idx, bin);
    try {
      IndexedDatasetReader reader(prefix);
    } catch (const DataError& e) {
      EXPECT_EQ(e.file(), prefix + ".idx");
      return e.reason();
    }
    return "";
  }
  TempDir dir_;
};

TEST_F(IndexedDatasetReaderTest, HandBuiltDatasetLoadsUnchanged) {
  const IndexedDatasetReader reader(write(hand_built_idx(), hand_built_bin()));
  EXPECT_EQ(reader.dtype(), TokenDtype::kUint16);
  EXPECT_EQ(reader.num_sequences(), 3);
  EXPECT_EQ(reader.num_documents(), 2);
  EXPECT_EQ(reader.num_tokens(), 6);
  EXPECT_EQ(reader.sequence_length(2), 3);
  EXPECT_EQ(reader.sequence_offset_bytes(2), 6);
  EXPECT_EQ(reader.document_sequences(0).first, 0);
  EXPECT_EQ(reader.document_sequences(0).last, 2);
  EXPECT_EQ(reader.document_sequences(1).first, 2);
  EXPECT_EQ(reader.document_sequences(1).last, 3);
  EXPECT_EQ(reader.tokens(0), (std::vector<int32_t>{10, 11}));
  EXPECT_EQ(reader.tokens(1), (std::vector<int32_t>{12}));
  EXPECT_EQ(reader.tokens(2), (std::vector<int32_t>{500, 65535, 0}));
  const std::span<const uint16_t> in_place = reader.sequence_as<uint16_t>(2);
  EXPECT_EQ(std::vector<uint16_t>(in_place.begin(), in_place.end()),
            (std::vector<uint16_t>{500, 65535, 0}));
}

TEST_F(IndexedDatasetReaderTest, ReadsARangeOfASequence) {
  const IndexedDatasetReader reader(write(hand_built_idx(), hand_built_bin()));
  EXPECT_EQ(reader.tokens(2, 1, 2), (std::vector<int32_t>{65535, 0}));
  EXPECT_EQ(reader.tokens(2, 0, 1), (std::vector<int32_t>{500}));
  EXPECT_EQ(reader.tokens(2, 3, 0), (std::vector<int32_t>{}));
  EXPECT_THROW(reader.tokens(2, 2, 2), std::out_of_range);
  EXPECT_THROW(reader.tokens(2, -1, 1), std::out_of_range);
}

TEST_F(IndexedDatasetReaderTest, Int32DatasetLoads) {
  // One document, one sequence of int32 tokens {-1, 100000}: what Megatron writes
  // for vocabularies of 65,500 ids or more. .idx: 34 + 4 + 8 + 2·8 = 62 bytes.
  std::string idx = hand_built_idx().substr(0, 34);
  idx[17] = 4;                                   // dtype int32
  idx = patched<uint64_t>(idx, 18, 1);           // 1 sequence
  idx = patched<uint64_t>(idx, 26, 2);           // document indices {0, 1}
  idx += std::string("\x02\x00\x00\x00", 4);     // length 2
  idx += std::string(8, '\0');                   // pointer 0
  idx += std::string(8, '\0') + std::string("\x01\0\0\0\0\0\0\0", 8);  // {0, 1}
  const std::string bin("\xFF\xFF\xFF\xFF\xA0\x86\x01\x00", 8);  // -1, 100000 (0x186A0)
  const IndexedDatasetReader reader(write(idx, bin));
  EXPECT_EQ(reader.dtype(), TokenDtype::kInt32);
  EXPECT_EQ(reader.tokens(0), (std::vector<int32_t>{-1, 100000}));
  EXPECT_EQ(reader.sequence_as<int32_t>(0)[1], 100000);
}

TEST_F(IndexedDatasetReaderTest, EmptyDocumentsAndEmptyDataset) {
  // Document indices {0, 0, 3}: document 0 has no sequences (an empty line).
  std::string idx = hand_built_idx();
  idx = patched<int64_t>(idx, 34 + 12 + 24 + 8, 0);
  const IndexedDatasetReader reader(write(idx, hand_built_bin()));
  EXPECT_EQ(reader.document_sequences(0).last, 0);
  EXPECT_EQ(reader.document_sequences(1).last, 3);

  // No sequences at all: header + the leading 0, and an empty .bin (not mappable).
  std::string empty = hand_built_idx().substr(0, 34);
  empty = patched<uint64_t>(empty, 18, 0);
  empty = patched<uint64_t>(empty, 26, 1);
  empty += std::string(8, '\0');
  const IndexedDatasetReader nothing(write(empty, ""));
  EXPECT_EQ(nothing.num_sequences(), 0);
  EXPECT_EQ(nothing.num_documents(), 0);
}

TEST_F(IndexedDatasetReaderTest, MultimodalModesAreAcceptedAndIgnored) {
  // Megatron appends one int8 mode per sequence for multimodal datasets.
  const IndexedDatasetReader reader(write(hand_built_idx() + std::string(3, '\1'), hand_built_bin()));
  EXPECT_EQ(reader.tokens(2), (std::vector<int32_t>{500, 65535, 0}));
}

TEST_F(IndexedDatasetReaderTest, HeaderErrors) {
  EXPECT_EQ(error_for(hand_built_idx().substr(0, 20)),
            "truncated: 20 bytes, but the header alone is 34");
  EXPECT_EQ(error_for(patched<char>(hand_built_idx(), 0, 'X')),
            "not a Megatron indexed dataset index: it does not start with the magic bytes "
            "\"MMIDIDX\\0\\0\"");
  EXPECT_EQ(error_for(patched<uint64_t>(hand_built_idx(), 9, 2)),
            "version 2 is not supported; expected 1");
  EXPECT_EQ(error_for(patched<uint8_t>(hand_built_idx(), 17, 9)),
            "dtype code 9 is unknown; accepted: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, "
            "6 float64, 7 float32, 8 uint16");
  EXPECT_EQ(error_for(patched<uint8_t>(hand_built_idx(), 17, 0)),
            "dtype code 0 is unknown; accepted: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64, "
            "6 float64, 7 float32, 8 uint16");
}

TEST_F(IndexedDatasetReaderTest, SizeErrors) {
  // 34 + 12·3 + 8·3 = 94 bytes needed.
  EXPECT_EQ(error_for(hand_built_idx().substr(0, 93)),
            "truncated: 3 sequences and 3 document indices need 94 bytes, the file has 93");
  EXPECT_EQ(error_for(patched<uint64_t>(hand_built_idx(), 18, uint64_t{1} << 62)),
            "truncated: 4611686018427387904 sequences and 3 document indices need more bytes, "
            "the file has 94");
  EXPECT_EQ(error_for(patched<uint64_t>(hand_built_idx(), 26, ~uint64_t{0})),
            "truncated: 3 sequences and 18446744073709551615 document indices need more "
            "bytes, the file has 94");
  EXPECT_EQ(error_for(hand_built_idx() + "xy"),
            "has 96 bytes, but 3 sequences and 3 document indices need 94 (97 with multimodal "
            "sequence modes)");
}

TEST_F(IndexedDatasetReaderTest, DocumentIndexErrors) {
  const size_t documents = 34 + 12 + 24;  // where the document indices start
  std::string none = patched<uint64_t>(hand_built_idx(), 26, 0).substr(0, documents);
  EXPECT_EQ(error_for(none), "has no document indices; there is at least one, the leading 0");
  EXPECT_EQ(error_for(patched<int64_t>(hand_built_idx(), documents, 1)),
            "document index 0 is 1; it must be 0");
  EXPECT_EQ(error_for(patched<int64_t>(hand_built_idx(), documents + 16, 1)),
            "document index 2 (1) is less than document index 1 (2)");
  EXPECT_EQ(error_for(patched<int64_t>(hand_built_idx(), documents + 16, 2)),
            "the last document index is 2; it must equal the sequence count (3)");
}

TEST_F(IndexedDatasetReaderTest, SequenceErrors) {
  const size_t lengths = 34, pointers = 34 + 12;
  EXPECT_EQ(error_for(patched<int32_t>(hand_built_idx(), lengths + 4, -3)),
            "sequence 1 has negative length -3");
  EXPECT_EQ(error_for(patched<int64_t>(hand_built_idx(), pointers + 8, 5)),
            "sequence 1 starts at byte 5, which is not a non-negative multiple of the uint16 "
            "size (2)");
  EXPECT_EQ(error_for(patched<int64_t>(hand_built_idx(), pointers + 8, -4)),
            "sequence 1 starts at byte -4, which is not a non-negative multiple of the uint16 "
            "size (2)");
  // Sequence 2 is bytes [6, 12); a .bin of 10 bytes is one token short.
  const std::string prefix = dir_.file("corpus");
  EXPECT_EQ(error_for(hand_built_idx(), hand_built_bin().substr(0, 10)),
            "sequence 2 is bytes [6, 12) of " + prefix + ".bin, which has 10");
  EXPECT_EQ(error_for(patched<int64_t>(hand_built_idx(), pointers + 16, int64_t{1} << 62)),
            "sequence 2 is bytes [4611686018427387904, 4611686018427387910) of " + prefix +
                ".bin, which has 12");
  // The largest even offset: its end, 2^63 - 2 + 6, is past int64 and must not overflow.
  EXPECT_EQ(error_for(patched<int64_t>(hand_built_idx(), pointers + 16, INT64_MAX - 1)),
            "sequence 2 is bytes [9223372036854775806, 9223372036854775812) of " + prefix +
                ".bin, which has 12");
}

// Any prefix of a valid .idx or .bin either opens or is a DataError; none crashes.
TEST_F(IndexedDatasetReaderTest, EveryTruncationIsAnErrorNotACrash) {
  const std::string idx = hand_built_idx(), bin = hand_built_bin();
  for (size_t size = 0; size < idx.size(); ++size) {
    EXPECT_NE(error_for(idx.substr(0, size)), "") << "idx truncated to " << size;
  }
  for (size_t size = 0; size < bin.size(); ++size) {
    EXPECT_NE(error_for(idx, bin.substr(0, size)), "") << "bin truncated to " << size;
  }
}

TEST_F(IndexedDatasetReaderTest, MissingFiles) {
  const std::string prefix = dir_.file("absent");
  try {
    IndexedDatasetReader reader(prefix);
    FAIL() << "opened a missing dataset";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), (prefix + ".idx: cannot open: No such file or directory").c_str());
  }
  write_file(prefix + ".idx", hand_built_idx());
  try {
    IndexedDatasetReader reader(prefix);
    FAIL() << "opened a dataset without .bin";
  } catch (const DataError& e) {
    EXPECT_STREQ(e.what(), (prefix + ".bin: cannot open: No such file or directory").c_str());
  }
}

TEST_F(IndexedDatasetReaderTest, WrongTypedAccessAndRange) {
  const IndexedDatasetReader reader(write(hand_built_idx(), hand_built_bin()));
  try {
    reader.sequence_as<int32_t>(0);
    FAIL() << "read uint16 tokens as int32";
  } catch (const DataError& e) {
    EXPECT_EQ(e.reason(), "holds uint16 tokens, not int32");
  }
  EXPECT_THROW(reader.tokens(3), std::out_of_range);
  EXPECT_THROW(reader.sequence_length(-1), std::out_of_range);
  EXPECT_THROW(reader.document_sequences(2), std::out_of_range);
}

}  // namespace
}  // namespace sextant::engine::data
