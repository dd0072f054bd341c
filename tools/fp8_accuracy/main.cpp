// openmla-fp8-accuracy: decode error of the FP8 KV layouts against the bf16 cache they are quantized
// from, and of bf16 storage against float64 on the unrounded data (docs/fp8-accuracy.md). CPU only.
//
//   openmla-fp8-accuracy [--quick] [--batch N] [--seed S] [--no-unit-scale]
//
// Grid: 4 distributions x {flat, peaky} queries x h_q {16, 128} x s_k {1024, 8192}, s_q = 1,
// softmax scale 576^-0.5; --quick keeps h_q 16, s_k 1024. Batch (requests per case, each with its own
// data), unless --batch: 4 at (h_q 16, s_k 1024), 2 at (16, 8192) and (128, 1024), 1 at (128, 8192).
// OPENMLA_REFERENCE_THREADS caps the worker threads.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fp8_accuracy.h"
#include "openmla/error.h"

#include "openmla_commit.h"  // OPENMLA_GIT_COMMIT, written at build time (cmake/write_commit.cmake)

namespace {

using namespace openmla::fp8_accuracy;

StudyCase study_case(Distribution d, QueryKind q, int num_heads, int seqlen, int batch, uint64_t seed) {
  StudyCase c;
  c.dist = d;
  c.query = q;
  c.num_heads = num_heads;
  c.seqlen = seqlen;
  c.batch = batch;
  c.seed = seed;
  return c;
}

void usage() {
  std::fprintf(stderr, "usage: openmla-fp8-accuracy [--quick] [--batch N] [--seed S] [--no-unit-scale]\n");
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, unit_scale = true;
  int batch = 0;
  uint64_t seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--no-unit-scale") unit_scale = false;
    else if (a == "--batch" && i + 1 < argc) batch = std::atoi(argv[++i]);
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else {
      usage();
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  const std::vector<int> heads = quick ? std::vector<int>{16} : std::vector<int>{16, 128};
  const std::vector<int> seqlens = quick ? std::vector<int>{1024} : std::vector<int>{1024, 8192};
  const Distribution dists[] = {Distribution::kGaussian, Distribution::kChannelOutliers, Distribution::kTokenOutliers,
                               Distribution::kMassiveChannels};
  const QueryKind queries[] = {QueryKind::kFlat, QueryKind::kPeaky};

  std::printf("openmla-fp8-accuracy  commit %s  seed %llu  threads %u%s\n", OPENMLA_GIT_COMMIT,
              static_cast<unsigned long long>(seed), std::thread::hardware_concurrency(), quick ? "  (quick)" : "");
  std::printf("s_q 1, softmax scale 576^-0.5; rows = (request, head). FP8 layouts vs decode over the bf16 cache;\n"
              "bf16 vs float64 attention on the unrounded data. amax: largest |x| of the case's KV data.\n"
              "eff tok: median exp(softmax entropy). out chan max: max over output channels of the\n"
              "channel's relative L2 error over rows. kv chan med/max: median/max over latent channels of\n"
              "||x_q - x|| / ||x|| over the cached tokens. fp8_e4m3: per-tensor scale amax / 448 of the case's\n"
              "data; fp8_e4m3 (scale 1): scale 1.0 (SGLang's default k_scale); fp8_ds_mla: per-token tile scales.\n\n");
  std::printf("| dist | query | h_q | s_k | b | amax | eff tok | layout | vs | rel-L2 max | rel-L2 median | max abs / max ref | lse abs max | out chan max | kv chan med | kv chan max |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|\n");

  // Worst over shapes and queries, per (distribution, layout).
  std::map<std::pair<int, std::string>, LayoutRow> worst;
  std::vector<std::string> layout_order;
  const auto start = std::chrono::steady_clock::now();
  try {
    for (Distribution d : dists)
      for (QueryKind q : queries)
        for (int h : heads)
          for (int s_k : seqlens) {
            const StudyCase c =
                study_case(d, q, h, s_k, batch > 0 ? batch : (h >= 128 ? 1 : 2) * (s_k <= 1024 ? 2 : 1), seed);
            const CaseResult res = run_case(c, unit_scale);
            for (const LayoutRow& row : res.rows) {
              std::printf("| %s | %s | %d | %d | %d | %.3g | %.1f | %s | %s | %.2e | %.2e | %.2e | %.2e | %.2e | %.2e | %.2e |\n",
                          distribution_name(d), query_name(q), h, s_k, c.batch, 448.0 * res.e4m3_scale,
                          res.effective_tokens, row.layout.c_str(), row.reference.c_str(), row.err.max_rel_l2,
                          row.err.median_rel_l2, row.err.max_rel_abs, row.err.max_lse_abs, row.err.max_channel_rel,
                          row.kv_err.median, row.kv_err.max);
              auto key = std::make_pair(static_cast<int>(d), row.layout);
              auto it = worst.find(key);
              if (it == worst.end()) {
                worst.emplace(key, row);
                if (std::find(layout_order.begin(), layout_order.end(), row.layout) == layout_order.end())
                  layout_order.push_back(row.layout);
              } else {
                ErrorStats& w = it->second.err;
                w.max_rel_l2 = std::max(w.max_rel_l2, row.err.max_rel_l2);
                w.median_rel_l2 = std::max(w.median_rel_l2, row.err.median_rel_l2);
                w.max_rel_abs = std::max(w.max_rel_abs, row.err.max_rel_abs);
                w.max_lse_abs = std::max(w.max_lse_abs, row.err.max_lse_abs);
                w.max_channel_rel = std::max(w.max_channel_rel, row.err.max_channel_rel);
                ChannelError& k = it->second.kv_err;
                k.median = std::max(k.median, row.kv_err.median);
                k.max = std::max(k.max, row.kv_err.max);
              }
            }
            std::fflush(stdout);
          }
  } catch (const openmla::Error& e) {
    std::fprintf(stderr, "openmla-fp8-accuracy: %s\n", e.what());
    return 1;
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::printf("\nSummary: worst over queries and shapes, per distribution and layout\n\n");
  std::printf("| dist | layout | vs | rel-L2 max | rel-L2 median (worst case) | max abs / max ref | lse abs max | out chan max | kv chan med | kv chan max |\n");
  std::printf("|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (Distribution d : dists)
    for (const std::string& layout : layout_order) {
      const LayoutRow& row = worst.at(std::make_pair(static_cast<int>(d), layout));
      std::printf("| %s | %s | %s | %.2e | %.2e | %.2e | %.2e | %.2e | %.2e | %.2e |\n", distribution_name(d),
                  layout.c_str(), row.reference.c_str(), row.err.max_rel_l2, row.err.median_rel_l2,
                  row.err.max_rel_abs, row.err.max_lse_abs, row.err.max_channel_rel, row.kv_err.median,
                  row.kv_err.max);
    }

  // FP8 math on the per-tensor e4m3 cache (DecodeOptions::fp8_math), emulated: which of the two
  // products can take e4m3 operands. h_q = 128 (the compute-bound case the mode is for).
  std::printf("\nFP8 math over the per-tensor fp8_e4m3 cache (emulated as DecodeOptions::fp8_math computes; h_q 128,\n"
              "s_q 1). q e4m3: each query row quantized with its own power-of-two scale (the smallest 2^e with\n"
              "amax <= 448 * 2^e). P e4m3: 256 * 2^(x - ceil(max x)) in e4m3 (x = score in log2 units) for P V\n"
              "(the row sum stays exact). Baseline 'e4m3 storage': q exact,\n"
              "P bf16, as the FP8-storage kernels compute. 'bf16 cache': the same with bf16 storage.\n\n");
  std::printf("| dist | query | s_k | math | vs e4m3 storage: rel-L2 median | rel-L2 max | lse abs max | vs bf16 cache: rel-L2 median | rel-L2 max |\n");
  std::printf("|---|---|---:|---|---:|---:|---:|---:|---:|\n");
  const std::vector<int> math_seqlens = quick ? std::vector<int>{1024} : std::vector<int>{1024, 4096};
  const auto math_start = std::chrono::steady_clock::now();
  try {
    for (Distribution d : dists)
      for (QueryKind q : queries)
        for (int s_k : math_seqlens) {
          const StudyData data = make_study_data(study_case(d, q, quick ? 16 : 128, s_k, 1, seed));
          const std::vector<double> bf16_kv = round_to_bf16(data.kv);
          const std::vector<double> e4m3_kv = round_to_e4m3(data.kv);
          const AttentionResult bf16_cache = attention_emulated(data, bf16_kv, MathOptions{false, PFormat::kBf16});
          const AttentionResult storage = attention_emulated(data, e4m3_kv, MathOptions{false, PFormat::kBf16});
          struct Variant {
            const char* name;
            MathOptions math;
          };
          const Variant variants[] = {{"e4m3 storage (baseline)", {false, PFormat::kBf16}},
                                      {"q e4m3, P bf16 (FP8 QK)", {true, PFormat::kBf16}},
                                      {"q bf16, P e4m3 (FP8 PV)", {false, PFormat::kE4m3}},
                                      {"q e4m3, P e4m3 (FP8 QK + PV)", {true, PFormat::kE4m3}}};
          for (const Variant& v : variants) {
            const AttentionResult got = attention_emulated(data, e4m3_kv, v.math);
            const ErrorStats add = compare(got, storage), all = compare(got, bf16_cache);
            std::printf("| %s | %s | %d | %s | %.2e | %.2e | %.2e | %.2e | %.2e |\n", distribution_name(d), query_name(q),
                        s_k, v.name, add.median_rel_l2, add.max_rel_l2, add.max_lse_abs, all.median_rel_l2,
                        all.max_rel_l2);
          }
          std::fflush(stdout);
        }
  } catch (const openmla::Error& e) {
    std::fprintf(stderr, "openmla-fp8-accuracy: %s\n", e.what());
    return 1;
  }
  const double math_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - math_start).count();
  std::printf("\n%.1f s (layouts) + %.1f s (FP8 math)\n", seconds, math_seconds);
  return 0;
}
