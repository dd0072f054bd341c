// TensorView helpers, dtype tables, KV format names, status names and device-error text.
#include <gtest/gtest.h>

#include <string>

#include "openmla/error.h"
#include "openmla/kv_format.h"
#include "openmla/tensor.h"

namespace openmla {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_size(DType::kFloat32), 4);
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2);
  EXPECT_EQ(dtype_size(DType::kFloat16), 2);
  EXPECT_EQ(dtype_size(DType::kFloat8E4M3), 1);
  EXPECT_EQ(dtype_size(DType::kUInt8), 1);
  EXPECT_EQ(dtype_size(DType::kInt32), 4);
  EXPECT_EQ(dtype_size(DType::kInt64), 8);
  EXPECT_EQ(dtype_size(DType::kFloat64), 8);
  EXPECT_EQ(dtype_size(DType::kUndefined), 0);
  EXPECT_STREQ(dtype_name(DType::kBFloat16), "bfloat16");
  EXPECT_STREQ(dtype_name(DType::kFloat8E4M3), "float8_e4m3");
  EXPECT_STREQ(dtype_name(DType::kFloat64), "float64");
}

TEST(TensorView, MakeTensorIsRowMajor) {
  int32_t storage[24];
  TensorView t = make_tensor(storage, DType::kInt32, {2, 3, 4});
  EXPECT_TRUE(t.defined());
  EXPECT_EQ(t.ndim, 3);
  EXPECT_EQ(t.numel(), 24);
  EXPECT_EQ(t.strides[0], 12);
  EXPECT_EQ(t.strides[1], 4);
  EXPECT_EQ(t.strides[2], 1);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.shape_str(), "[2, 3, 4]");
  EXPECT_EQ(t.strides_str(), "[12, 4, 1]");
  EXPECT_EQ(t.device, DeviceType::kCPU);
  EXPECT_EQ(t.device_id, 0);
}

TEST(TensorView, UndefinedView) {
  TensorView t;
  EXPECT_FALSE(t.defined());
  EXPECT_EQ(t.numel(), 0);
  EXPECT_FALSE(t.is_contiguous());
  EXPECT_EQ(t.shape_str(), "[]");
}

TEST(TensorView, StridedViewsAndContiguity) {
  float storage[64];
  // FlashMLA's lse [b, h_q, s_q] storage seen as [b, s_q, h_q]: not contiguous.
  TensorView lse = make_tensor_strided(storage, DType::kFloat32, {2, 4, 8}, {32, 1, 4});
  EXPECT_FALSE(lse.is_contiguous());
  EXPECT_EQ(lse.numel(), 64);
  EXPECT_EQ(lse.strides_str(), "[32, 1, 4]");
  // Size-1 dimensions may carry any stride and stay contiguous.
  TensorView unit = make_tensor_strided(storage, DType::kFloat32, {1, 8, 1, 8}, {999, 8, 123, 1});
  EXPECT_TRUE(unit.is_contiguous());
  // A gap between rows is not contiguous.
  TensorView padded = make_tensor_strided(storage, DType::kFloat32, {4, 8}, {16, 1});
  EXPECT_FALSE(padded.is_contiguous());
  // Empty tensors are trivially contiguous.
  TensorView empty = make_tensor_strided(nullptr, DType::kFloat32, {0, 8}, {5, 1});
  EXPECT_TRUE(empty.is_contiguous());
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_TRUE(empty.defined());
}

TEST(TensorView, RejectsBadConstruction) {
  try {
    make_tensor_strided(nullptr, DType::kFloat32, {2, 3}, {3});
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.status(), Status::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("strides"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("[3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(make_tensor(nullptr, DType::kFloat32, {1, 2, 3, 4, 5, 6, 7}), Error);
  EXPECT_THROW(make_tensor(nullptr, DType::kFloat32, {2, -1}), Error);
}

TEST(KVFormat, NamesRoundTripAndAliases) {
  for (KVFormat f : {KVFormat::kBF16, KVFormat::kFP16, KVFormat::kFP8E4M3, KVFormat::kFP8DsMla}) {
    KVFormat parsed = KVFormat::kBF16;
    ASSERT_TRUE(parse_kv_format(kv_format_name(f), &parsed)) << kv_format_name(f);
    EXPECT_EQ(parsed, f);
  }
  EXPECT_STREQ(kv_format_name(KVFormat::kFP8DsMla), "fp8_ds_mla");
  EXPECT_STREQ(kv_format_name(KVFormat::kFP8E4M3), "fp8_e4m3");
  struct Alias {
    const char* name;
    KVFormat format;
  };
  for (Alias a : {Alias{"fp8", KVFormat::kFP8E4M3}, Alias{"FP8-E4M3", KVFormat::kFP8E4M3},
                  Alias{"ds_mla", KVFormat::kFP8DsMla}, Alias{"bfloat16", KVFormat::kBF16},
                  Alias{"half", KVFormat::kFP16}}) {
    KVFormat parsed = KVFormat::kBF16;
    EXPECT_TRUE(parse_kv_format(a.name, &parsed)) << a.name;
    EXPECT_EQ(parsed, a.format) << a.name;
  }
  KVFormat untouched = KVFormat::kFP16;
  EXPECT_FALSE(parse_kv_format("fp4", &untouched));
  EXPECT_FALSE(parse_kv_format("", &untouched));
  EXPECT_FALSE(parse_kv_format(nullptr, &untouched));
  EXPECT_EQ(untouched, KVFormat::kFP16);
  EXPECT_EQ(kv_bytes_per_token(KVFormat::kBF16), 1152);
  EXPECT_EQ(kv_bytes_per_token(KVFormat::kFP8E4M3), 576);
  EXPECT_EQ(kv_bytes_per_token(KVFormat::kFP8DsMla), 656);
  EXPECT_EQ(kDsMlaRopeOffset + kRopeDim * 2, kDsMlaBytesPerToken);
}

TEST(Errors, StatusNamesAndDeviceErrorText) {
  EXPECT_STREQ(status_name(Status::kOk), "ok");
  EXPECT_STREQ(status_name(Status::kInvalidArgument), "invalid_argument");
  EXPECT_STREQ(status_name(Status::kWorkspaceTooSmall), "workspace_too_small");
  EXPECT_STREQ(status_name(Status::kInternal), "internal");
  EXPECT_EQ(describe_device_errors(0), "none");
  EXPECT_EQ(describe_device_errors(kDeviceErrorNegativeSeqlen | kDeviceErrorPageIdOutOfRange),
            "negative_seqlen|page_id_out_of_range");
  EXPECT_EQ(describe_device_errors(kDeviceErrorSlotOutOfRange | kDeviceErrorPlanMismatch),
            "slot_out_of_range|plan_mismatch");
  EXPECT_EQ(describe_device_errors(kDeviceErrorSeqlenBeyondTable | (1u << 9)), "seqlen_beyond_table|unknown(0x200)");
}

}  // namespace
}  // namespace openmla
