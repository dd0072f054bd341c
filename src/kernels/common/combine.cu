// Combine: merges the partial (normalized o_i, lse_i) results of a split request by LSE:
//   lse = log(sum_i exp(lse_i)),   out = sum_i exp(lse_i - lse) * o_i.
// Empty partials (lse_i = -inf, every key masked) weigh 0; all empty -> out 0, lse -inf.
// A NaN partial (a guarded bad input) makes the row NaN: fmaxf would silently drop it.
//
// The partial rows are fp16 with a scale per 64 columns, or fp32 (partial_rows.h; p.fp16_partials, as the decode
// kernel wrote them); the combine reads them in column groups of 4 (one 8-byte load and its block's scale, or one
// 16-byte load) and accumulates in fp32.
//
// Work decomposition. A CTA owns a tile of kF column groups of one request's output (kF < 128: a
// column chunk of one row; kF >= 128: kF / 128 whole rows) and spreads the request's splits over
// its threads: kLanes = 256 / kF split lanes (one when kF >= 256), lane s taking splits s, s +
// kLanes, ... Each thread keeps kCombineLoadsPerThread group loads in flight (kUnroll splits of kVec
// groups) and merges them with an online (running-max) LSE update, so no pass over the LSEs has to
// finish before the first partial is read. With several lanes, the lanes' (max, sum, acc) are merged
// in shared memory in a fixed order (deterministic: graph replays are bit-identical to eager runs).
//
// Grid: x = tiles of one request, y = request groups (combine_groups); the tile width is
// choose_combine_tile (combine_config.h), from upper bounds on the splits, since the host
// does not know the lengths. With batch <= num_parts - 1, group g is request g; otherwise group g is the
// part g + 1, which maps to the split request whose second part it is (that part begins in the
// request, at a block > 0), so a large batch launches num_parts - 1 groups instead of batch. Groups
// without a split request exit after one or two small loads.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/arch/sync.cuh"
#include "kernels/common/combine.h"
#include "kernels/common/combine_config.h"
#include "kernels/common/convert.cuh"
#include "kernels/common/launch_kernel.h"
#include "kernels/common/partial_rows.h"
#include "kernels/common/segment.cuh"

namespace openmla::kernels {
namespace {

template <int kF>
struct TileShape {
  static_assert(kF >= kCombineMinTile && kF <= kCombineMaxTile && (kF & (kF - 1)) == 0,
                "tile: power of two in [8, 1024] column groups");
  static constexpr int kRows = kF >= 128 ? kF / 128 : 1;         // rows per tile
  static constexpr int kCols4 = kF >= 128 ? 128 : kF;            // column groups per tile row
  static constexpr int kChunks = 128 / kCols4;                   // tiles along one row
  static constexpr int kLanes = kF <= kCombineThreads ? kCombineThreads / kF : 1;  // split lanes
  static constexpr int kThreadsPerRow = kCombineThreads / (kLanes * kRows);  // threads of one (lane, row)
  static constexpr int kVec = kCols4 / kThreadsPerRow;           // float4 per thread and split
  static constexpr int kUnroll = kCombineLoadsPerThread / kVec;         // splits per batch of loads
  static_assert(kLanes == 1 || kRows == 1, "several lanes only within one row");
  static_assert(kVec >= 1 && kUnroll >= 1 && kLanes * kRows * kThreadsPerRow == kCombineThreads, "tile shape");
};

__device__ __forceinline__ void fma4(float4& acc, float w, const float4& v) {
  acc.x = fmaf(w, v.x, acc.x);
  acc.y = fmaf(w, v.y, acc.y);
  acc.z = fmaf(w, v.z, acc.z);
  acc.w = fmaf(w, v.w, acc.w);
}
// A column group's four fp16 partial values (one 8-byte load; whole sectors over a warp), unscaled.
__device__ __forceinline__ float4 unpack_partial4(uint2 w) {
  const float2 a = unpack2<__half>(w.x), b = unpack2<__half>(w.y);
  return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ void scale4(float4& acc, float s) {
  acc.x *= s;
  acc.y *= s;
  acc.z *= s;
  acc.w *= s;
}

// Finds the split request of group g (see the header); false when the group has none. By part:
// the planner sets parts[q].begin_req = r, begin_block > 0 for every part q after r's first one,
// and only r's first part + 1 passes the first_part check, so each split request has one group.
__device__ __forceinline__ bool group_request(const DecodeParams& p, int g, bool by_part, int& req,
                                              RequestSplit& split) {
  if (by_part) {
    const int q = g + 1;
    const SplitPart part = p.parts[q];
    if (part.begin_req > part.end_req || part.begin_block <= 0) return false;
    req = part.begin_req;
    if (req < 0 || req >= p.batch) return false;
    split = p.splits[req];
    if (split.first_part != q - 1) return false;
  } else {
    req = g;
    split = p.splits[req];
  }
  return split.num_splits > 1;  // one split: written directly by the decode kernel
}

// rq: the request's queries in the general-query form (ragged counts, padded heads), nullptr for uniform ones.
template <typename T, int kF, bool kFp16>
__device__ __forceinline__ void combine_tile(const DecodeParams& p, int req, const RequestQueries* rq,
                                             const RequestSplit& split, int tile) {
  using S = TileShape<kF>;
  constexpr int kLanes = S::kLanes, kVec = S::kVec, kUnroll = S::kUnroll, kTpr = S::kThreadsPerRow;

  const int tid = threadIdx.x;
  const int lane = tid / (S::kRows * kTpr);  // split lane
  const int rem = tid % (S::kRows * kTpr);
  const int c = rem % kTpr;
  const int chunk = tile % S::kChunks;
  const int row = (tile / S::kChunks) * S::kRows + rem / kTpr;
  // False only past the request's rows (the last tile) and, in the general form, for padding heads.
  const bool row_ok = rq ? request_row(p, *rq, row) : row < p.rows;
  const int col4 = chunk * S::kCols4 + c;  // first column group; then + v * kTpr

  const int n = split.num_splits;
  const size_t rows = static_cast<size_t>(p.rows);
  const size_t slot = static_cast<size_t>(split.partial_base) + lane;
  // Column groups: 4 fp16 values (8 bytes) with their block's scale (partial_rows.h), or 4 floats.
  using Group = std::conditional_t<kFp16, uint2, float4>;
  const Group* o_base = static_cast<const Group*>(p.o_partial);
  const Group* o_ptr = o_base + (slot * rows + row) * 128 + col4;
  const float* l_ptr = p.lse_partial + slot * rows + row;
  const size_t o_step = static_cast<size_t>(kLanes) * rows * 128;  // column groups between a lane's splits
  const size_t l_step = static_cast<size_t>(kLanes) * rows;

  // Online merge of this lane's splits: acc = sum_i exp(l_i - m) o_i, sum = sum_i exp(l_i - m).
  float m = -INFINITY, sum = 0.f;
  bool has_nan = false;
  float4 acc[kVec];
#pragma unroll
  for (int v = 0; v < kVec; ++v) acc[v] = make_float4(0.f, 0.f, 0.f, 0.f);

  if (row_ok) {
    for (int i0 = lane; i0 < n; i0 += kUnroll * kLanes) {
      float l[kUnroll];
      Group o[kUnroll][kVec];   // fp16 values are converted where they are used (3 registers a group, not 4)
      float sc[kUnroll][kVec];  // fp16: their blocks' scales (0 for a split past n); fp32: unused
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        const bool valid = i0 + j * kLanes < n;
        l[j] = valid ? l_ptr[j * l_step] : -INFINITY;
#pragma unroll
        for (int v = 0; v < kVec; ++v) {
          o[j][v] = valid ? __ldcg(o_ptr + j * o_step + v * kTpr) : Group{};
          if constexpr (kFp16) {
            // [slot, row, 8] scales beside [slot, row, 128] groups: a group's scale is at its index / 16.
            const size_t group = static_cast<size_t>(o_ptr + j * o_step + v * kTpr - o_base);
            sc[j][v] = valid ? __ldcg(p.o_partial_scale + group / (kPartialBlockCols / 4)) : 0.f;
          }
        }
      }
      float new_m = m;
#pragma unroll
      for (int j = 0; j < kUnroll; ++j) {
        has_nan |= isnan(l[j]);
        new_m = fmaxf(new_m, l[j]);
      }
      if (new_m != -INFINITY) {  // else every split so far is empty: acc and sum stay 0
        const float rescale = __expf(m - new_m);  // 0 when m = -inf, 1 when the max is unchanged
        sum *= rescale;
#pragma unroll
        for (int v = 0; v < kVec; ++v) scale4(acc[v], rescale);
#pragma unroll
        for (int j = 0; j < kUnroll; ++j) {
          const float w = __expf(l[j] - new_m);  // invalid / empty: exp(-inf) = 0
          sum += w;
#pragma unroll
          for (int v = 0; v < kVec; ++v) {
            if constexpr (kFp16) {
              fma4(acc[v], w * sc[j][v], unpack_partial4(o[j][v]));
            } else {
              fma4(acc[v], w, o[j][v]);
            }
          }
        }
        m = new_m;
      }
      o_ptr += kUnroll * o_step;
      l_ptr += kUnroll * l_step;
    }
  }

  bool writer = row_ok;
  if constexpr (kLanes > 1) {
    // Merge the lanes (one row; kTpr = kF threads per lane, kVec = 1) in lane order.
    __shared__ float4 s_acc[kLanes][kTpr];
    __shared__ float s_m[kLanes], s_sum[kLanes];
    __shared__ int s_nan[kLanes];
    s_acc[lane][c] = acc[0];
    if (c == 0) {
      s_m[lane] = m;
      s_sum[lane] = sum;
      s_nan[lane] = has_nan;
    }
    __syncthreads();
    writer = row_ok && lane == 0;
    if (writer) {
      float mm = -INFINITY;
      int any_nan = 0;
#pragma unroll
      for (int s = 0; s < kLanes; ++s) {
        mm = fmaxf(mm, s_m[s]);
        any_nan |= s_nan[s];
      }
      float total = 0.f;
      float4 a = make_float4(0.f, 0.f, 0.f, 0.f);
      if (mm != -INFINITY) {
#pragma unroll
        for (int s = 0; s < kLanes; ++s) {
          const float f = __expf(s_m[s] - mm);  // empty lane: exp(-inf) = 0 (and its acc, sum are 0)
          total = fmaf(f, s_sum[s], total);
          fma4(a, f, s_acc[s][c]);
        }
      }
      m = mm;
      sum = total;
      has_nan = any_nan != 0;
      acc[0] = a;
    }
    __syncthreads();  // shared memory is reused by the next group of a grid-stride loop
  }

  if (writer) {
    float inv = sum > 0.f ? 1.f / sum : 0.f;
    const auto [qi, head] = query_row(p, row);
    // General form only: sparse decode's requests are query tokens (sparse_out_row), and its attention sink.
    const OutRow at = rq && p.sparse_q_len > 0 ? sparse_out_row(p, req) : OutRow{rq ? rq->base : req, qi};
    if (rq) inv *= sink_factor(p, head, has_nan ? NAN : (sum > 0.f ? m + logf(sum) : -INFINITY));
    T* out = static_cast<T*>(p.out) + out_offset(p, at.req, at.token, head);
#pragma unroll
    for (int v = 0; v < kVec; ++v) {
      const int col = (col4 + v * kTpr) * 4;
      uint2 packed;
      packed.x = pack2<T>(has_nan ? NAN : acc[v].x * inv, has_nan ? NAN : acc[v].y * inv);
      packed.y = pack2<T>(has_nan ? NAN : acc[v].z * inv, has_nan ? NAN : acc[v].w * inv);
      *reinterpret_cast<uint2*>(out + col) = packed;
    }
    if (chunk == 0 && c == 0) {
      p.lse[lse_offset(p, at.req, at.token, head)] = has_nan ? NAN : (sum > 0.f ? m + logf(sum) : -INFINITY);
    }
  }
}

// The schedule (parts, splits) is read before griddepcontrol.wait: the planner wrote it before the
// decode kernel, whose CTAs passed their own wait before they let this grid launch, so it is complete
// and visible. Only the partials need the decode grid finished, so a CTA whose groups hold no split
// request exits while the decode still runs (whole-request plans, large batches: the wait and the loads
// after the decode would add microseconds to every call). One CTA always waits: this grid
// must not complete before the decode grid, since the next kernel's wait covers only this grid.
// kGeneral: the general-query form (ragged queries, padded heads or sparse decode: request_queries, request_row); a
// request with a malformed offset pair is not written.
template <typename T, int kF, bool kFp16, bool kGeneral>
__global__ void __launch_bounds__(kCombineThreads, kCombineMinCtasPerSm)
    combine_kernel(DecodeParams p, int num_groups) {
  const bool by_part = num_groups < p.batch;
  bool waited = false;
  for (int g = blockIdx.y; g < num_groups; g += gridDim.y) {  // one pass unless groups > 65535
    int req;
    RequestSplit split;
    if (!group_request(p, g, by_part, req, split)) continue;  // uniform over the CTA
    if (!waited) {
      wait_for_preceding_grids();  // the partials come from the decode kernel
      waited = true;
    }
    if constexpr (kGeneral) {
      const RequestQueries rq = p.q_indptr ? request_queries<true>(p, req) : request_queries<false>(p, req);
      if (rq.malformed) continue;  // uniform over the CTA
      combine_tile<T, kF, kFp16>(p, req, &rq, split, blockIdx.x);
    } else {
      combine_tile<T, kF, kFp16>(p, req, nullptr, split, blockIdx.x);
    }
  }
  if (!waited && blockIdx.x == 0 && blockIdx.y == 0) wait_for_preceding_grids();
}

template <typename T, int kF>
cudaError_t launch_tile(const DecodeParams& p, int num_groups, bool programmatic, cudaStream_t stream) {
  using S = TileShape<kF>;
  const int tiles = (p.rows + S::kRows - 1) / S::kRows * S::kChunks;
  const dim3 grid(tiles, std::min(num_groups, 65535));
  const bool general = p.q_indptr != nullptr || p.heads != p.num_heads || p.sparse_q_len > 0;
  auto* kernel = general ? (p.fp16_partials ? combine_kernel<T, kF, true, true> : combine_kernel<T, kF, false, true>)
                            : (p.fp16_partials ? combine_kernel<T, kF, true, false> : combine_kernel<T, kF, false, false>);
  return launch_kernel(kernel, grid, kCombineThreads, 0, stream, programmatic, p, num_groups);
}

template <typename T>
cudaError_t launch_typed(const DecodeParams& p, int tile_f4, int num_groups, bool programmatic, cudaStream_t stream) {
  switch (tile_f4) {
    case 8: return launch_tile<T, 8>(p, num_groups, programmatic, stream);
    case 16: return launch_tile<T, 16>(p, num_groups, programmatic, stream);
    case 32: return launch_tile<T, 32>(p, num_groups, programmatic, stream);
    case 64: return launch_tile<T, 64>(p, num_groups, programmatic, stream);
    case 128: return launch_tile<T, 128>(p, num_groups, programmatic, stream);
    case 256: return launch_tile<T, 256>(p, num_groups, programmatic, stream);
    case 512: return launch_tile<T, 512>(p, num_groups, programmatic, stream);
    default: return launch_tile<T, 1024>(p, num_groups, programmatic, stream);
  }
}

}  // namespace

cudaError_t launch_combine(const DecodeParams& p, bool q_is_bf16, bool programmatic, cudaStream_t stream) {
  if (p.batch <= 0 || p.rows <= 0 || p.num_parts <= 1) return cudaSuccess;  // nothing can be split
  const int num_groups = combine_groups(p.batch, p.num_parts);
  const int tile_f4 = choose_combine_tile(p.batch, p.rows, p.num_parts, p.max_pages);
  return q_is_bf16 ? launch_typed<__nv_bfloat16>(p, tile_f4, num_groups, programmatic, stream)
                   : launch_typed<__half>(p, tile_f4, num_groups, programmatic, stream);
}

}  // namespace openmla::kernels
