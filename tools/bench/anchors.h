// Reference times of other kernels on the same shapes, measured elsewhere with the same method (--anchors FILE:
// e.g. FlashMLA and SGLang's Triton kernel on an H200), for the speedup column. --peer times FlashMLA in the
// same process instead.
#pragma once

#include <string>
#include <vector>

#include "bench_config.h"
#include "openmla/kv_format.h"

namespace openmla::bench {

struct AnchorRow {
  std::string kernel;  // "flashmla_bf16", "flashmla_fp8_sparse_all", "triton_sglang_bf16"
  int batch_size = 0, q_len = 0, num_heads = 0;
  double seqlen = 0.0;  // s_k, or the measured mean length of a varlen batch
  bool varlen = false;
  double time_us = 0.0;
};

class Anchors {
 public:
  // Columns: kernel,b,s_q,h_q,s_k,varlen,time_us,... (header line first). Throws
  // Error(kInvalidArgument) naming the file and line when a row does not parse.
  static Anchors load(const std::string& path);

  bool empty() const { return rows_.empty(); }
  const std::string& path() const { return path_; }
  // The row of `kernel` for config c; a varlen row matches when its mean length is within 10% of
  // the config's nominal mean (FlashMLA's draw of N(4096, 2048) averaged 4116.9). nullptr if none, and for
  // ragged or tree-masked configs (the anchors are uniform queries without a tree mask).
  const AnchorRow* find(const std::string& kernel, const BenchConfig& c) const;

 private:
  std::string path_;
  std::vector<AnchorRow> rows_;
};

// The anchor kernel a format is compared with: FlashMLA's dense bf16 kernel for bf16, fp16 and
// per-tensor fp8 (FlashMLA has no dense fp8 decode), its sparse-FP8 kernel with every token
// selected for ds_mla (the same cache layout).
const char* anchor_kernel_for(KVFormat format);

}  // namespace openmla::bench
