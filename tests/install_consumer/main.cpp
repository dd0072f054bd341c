// Uses the installed package the way an application does: the one public header, a CPU reference decode (from
// openmla_core) and DecodePlan's shape validation (from openmla, which pulls in the kernels and the static CUDA
// runtime at link time). Needs no GPU: the invalid shape is rejected before any device query.
#include <openmla/openmla.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace {

// Every value used below is exact in bf16: its upper 16 bits are the float's.
uint16_t to_bf16(float x) {
  uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  return static_cast<uint16_t>(bits >> 16);
}

int fail(const char* what) {
  std::fprintf(stderr, "install consumer: %s\n", what);
  return 1;
}

}  // namespace

int main() {
  using namespace openmla;
  if (std::strcmp(kVersion, OPENMLA_PACKAGE_VERSION) != 0) return fail("openmla::kVersion differs from the package's");

  // One request, one query token, 8 heads, one cached token: the output of each head is that token's 512 latent
  // values, and the LSE is softmax_scale * q.k.
  constexpr int kHeads = 8;
  DecodeShape shape;
  shape.batch_size = 1;
  shape.q_len = 1;
  shape.num_heads = kHeads;
  shape.q_dtype = DType::kBFloat16;
  shape.kv_format = KVFormat::kBF16;

  std::vector<float> row(kHeadDimQK);
  for (int i = 0; i < kHeadDimQK; ++i) row[i] = 0.25f * static_cast<float>(i % 8) - 1.0f;
  std::vector<uint16_t> cache(static_cast<size_t>(kPageSize) * kHeadDimQK, 0);
  std::vector<uint16_t> q(static_cast<size_t>(kHeads) * kHeadDimQK);
  double q_dot_k[kHeads] = {};
  for (int h = 0; h < kHeads; ++h) {
    const float qh = 0.125f * static_cast<float>(h + 1);
    for (int i = 0; i < kHeadDimQK; ++i) {
      q[static_cast<size_t>(h) * kHeadDimQK + i] = to_bf16(qh);
      q_dot_k[h] += static_cast<double>(qh) * row[i];
    }
  }
  for (int i = 0; i < kHeadDimQK; ++i) cache[i] = to_bf16(row[i]);
  int32_t block_table[1] = {0};
  int32_t seqlens[1] = {1};
  std::vector<float> out(static_cast<size_t>(kHeads) * kHeadDimV, -1.0f);
  std::vector<float> lse(kHeads, 0.0f);

  DecodeArgs args;
  args.q = make_tensor(q.data(), DType::kBFloat16, {1, 1, kHeads, kHeadDimQK});
  args.kv.data = make_tensor(cache.data(), DType::kBFloat16, {1, kPageSize, 1, kHeadDimQK});
  args.kv.format = KVFormat::kBF16;
  args.block_table = make_tensor(block_table, DType::kInt32, {1, 1});
  args.cache_seqlens = make_tensor(seqlens, DType::kInt32, {1});
  args.softmax_scale = 0.0625f;
  args.out = make_tensor(out.data(), DType::kFloat32, {1, 1, kHeads, kHeadDimV});
  args.lse = make_tensor(lse.data(), DType::kFloat32, {1, 1, kHeads});

  if (reference::decode(args, shape) != kDeviceErrorNone) return fail("reference::decode raised device errors");
  for (int h = 0; h < kHeads; ++h) {
    for (int d = 0; d < kHeadDimV; ++d) {
      if (out[static_cast<size_t>(h) * kHeadDimV + d] != row[d]) return fail("reference::decode: wrong output");
    }
    const double expected_lse = args.softmax_scale * q_dot_k[h];
    if (std::fabs(lse[h] - expected_lse) > 1e-5 * (1.0 + std::fabs(expected_lse)))
      return fail("reference::decode: wrong LSE");
  }

  // 129 heads is not a supported head count: DecodePlan rejects the shape before it looks for a device.
  DecodeShape bad = shape;
  bad.num_heads = 129;
  try {
    DecodePlan plan(bad);
    return fail("DecodePlan accepted num_heads = 129");
  } catch (const Error& e) {
    if (e.status() != Status::kInvalidArgument) {
      std::fprintf(stderr, "install consumer: DecodePlan(num_heads = 129): %s: %s\n", status_name(e.status()), e.what());
      return 1;
    }
  }

  std::printf("openmla %s: reference decode and shape validation ok\n", kVersion);
  return 0;
}
