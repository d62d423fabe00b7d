// Data type and op names (as nccl-tests prints them) and their parsers.
#include "braid/types.hpp"

#include <gtest/gtest.h>

namespace braid {
namespace {

TEST(Types, NamesMatchNcclTests) {
  const char* want[] = {"int8",   "uint8", "int32", "uint32", "int64",
                        "uint64", "half",  "float", "double", "bfloat16"};
  for (int i = 0; i < kNumDataTypes; ++i) {
    EXPECT_STREQ(dataTypeName(static_cast<DataType>(i)), want[i]);
    DataType t;
    ASSERT_TRUE(parseDataType(want[i], &t)) << want[i];
    EXPECT_EQ(static_cast<int>(t), i);
  }
  const char* ops[] = {"sum", "prod", "max", "min", "avg"};
  for (int i = 0; i < kNumRedOps; ++i) {
    EXPECT_STREQ(redOpName(static_cast<RedOp>(i)), ops[i]);
    RedOp op;
    ASSERT_TRUE(parseRedOp(ops[i], &op)) << ops[i];
    EXPECT_EQ(static_cast<int>(op), i);
  }
  EXPECT_STREQ(dataTypeName(static_cast<DataType>(99)), "unknown");
  EXPECT_STREQ(redOpName(static_cast<RedOp>(99)), "unknown");
}

TEST(Types, ParsesAliases) {
  const std::pair<const char*, DataType> aliases[] = {
      {"float32", DataType::kFloat32}, {"fp32", DataType::kFloat32},
      {"float16", DataType::kFloat16}, {"fp16", DataType::kFloat16},
      {"bf16", DataType::kBFloat16},   {"float64", DataType::kFloat64},
      {"fp64", DataType::kFloat64},    {"char", DataType::kInt8},
      {"int", DataType::kInt32},       {"FLOAT", DataType::kFloat32},
  };
  for (const auto& [name, type] : aliases) {
    DataType t = DataType::kUint64;
    ASSERT_TRUE(parseDataType(name, &t)) << name;
    EXPECT_EQ(t, type) << name;
  }
  DataType t = DataType::kUint64;
  EXPECT_FALSE(parseDataType("all", &t));
  EXPECT_FALSE(parseDataType("float8", &t));
  EXPECT_FALSE(parseDataType("", &t));
  EXPECT_FALSE(parseDataType(nullptr, &t));
  EXPECT_EQ(t, DataType::kUint64);  // untouched on failure
  RedOp op = RedOp::kMin;
  EXPECT_FALSE(parseRedOp("mean", &op));
  EXPECT_EQ(op, RedOp::kMin);
}

TEST(Types, Sizes) {
  EXPECT_EQ(dataTypeSize(DataType::kInt8), 1u);
  EXPECT_EQ(dataTypeSize(DataType::kBFloat16), 2u);
  EXPECT_EQ(dataTypeSize(DataType::kFloat32), 4u);
  EXPECT_EQ(dataTypeSize(DataType::kUint64), 8u);
}

}  // namespace
}  // namespace braid
