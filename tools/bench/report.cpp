#include "report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "core/check.h"

namespace openmla::bench {
namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

// Finite numbers as %.6g; NaN, inf and the "not measured" negatives as null.
std::string json_number(double v, bool negative_is_null = true) {
  if (!std::isfinite(v) || (negative_is_null && v < 0)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string cell(double v, const char* fmt) {
  if (!std::isfinite(v) || v < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string seqlen_cell(const BenchResult& r) {
  if (!r.config.varlen) return std::to_string(r.config.seqlen);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "~%d (%.0f)", r.config.seqlen, r.mean_seqlen);
  return buf;
}

// A result row of `format` for config c, or nullptr.
const BenchResult* find_row(const std::vector<BenchResult>& results, const BenchConfig& c, KVFormat format) {
  for (const BenchResult& r : results)
    if (r.format == format && r.config == c) return &r;
  return nullptr;
}

const char* ratio_kind_name(RatioKind k) {
  switch (k) {
    case RatioKind::kTime: return "time";
    case RatioKind::kTflopsOverBest: return "tflops_over_best";
    case RatioKind::kPeerTime: return "peer_time";
    case RatioKind::kPeerTimeWorst: return "peer_time_worst";
    case RatioKind::kGbpsOverCopy: return "gbps_over_copy";
  }
  return "";
}

bool reads_peer(RatioKind k) { return k == RatioKind::kPeerTime || k == RatioKind::kPeerTimeWorst; }

std::string target_text(const RatioDef& d) {
  if (d.target_max < 0) return "";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "<= %.2f", d.target_max);
  return buf;
}

}  // namespace

std::vector<RatioResult> evaluate_ratios(const std::vector<RatioDef>& defs, const std::vector<BenchResult>& results,
                                         double copy_gbps) {
  std::vector<KVFormat> formats;
  for (const BenchResult& r : results)
    if (std::find(formats.begin(), formats.end(), r.format) == formats.end()) formats.push_back(r.format);
  std::vector<RatioResult> out;
  for (KVFormat format : formats) {
    for (const RatioDef& d : defs) {
      RatioResult rr;
      rr.def = d;
      rr.format = format;
      // The rows it reads, each timed; the first that is not ends the evaluation.
      auto rows_of = [&](const std::vector<BenchConfig>& configs, std::vector<const BenchResult*>& rows) {
        for (const BenchConfig& c : configs) {
          const BenchResult* r = find_row(results, c, format);
          if (r == nullptr || r->status != "ok" || !(r->time_us > 0)) {
            rr.status = "missing: " + c.label() + " (" + (r == nullptr ? std::string("not run") : r->status) + ")";
            return false;
          }
          if (reads_peer(d.kind) && (r->peer_status != "ok" || !(r->peer_time_us > 0))) {
            rr.status = "missing: " + c.label() + " (peer: " +
                        (r->peer.empty() ? std::string("none, --peer flashmla") : r->peer_status) + ")";
            return false;
          }
          rows.push_back(r);
        }
        return true;
      };
      std::vector<const BenchResult*> num, den;
      if (rows_of(d.numerator, num) && rows_of(d.denominator, den)) {
        if (d.kind == RatioKind::kTime) {
          double t_num = 0.0, t_den = 0.0;
          for (const BenchResult* r : num) t_num += r->time_us;
          for (const BenchResult* r : den) t_den += r->time_us;
          rr.value = t_num / t_den;
        } else if (d.kind == RatioKind::kPeerTime) {
          double t_peer = 0.0, t_ours = 0.0;
          for (const BenchResult* r : num) {
            t_peer += r->peer_time_us;
            t_ours += r->time_us;
          }
          rr.value = t_peer / t_ours;
        } else if (d.kind == RatioKind::kPeerTimeWorst) {
          for (const BenchResult* r : num) {
            const double v = r->peer_time_us / r->time_us;
            rr.value = rr.value < 0 ? v : std::min(rr.value, v);
          }
        } else if (d.kind == RatioKind::kGbpsOverCopy) {
          if (copy_gbps > 0) {
            rr.value = num.front()->gbps / copy_gbps;
          } else {
            rr.status = "missing: the device copy bandwidth (not measured: memory budget below 2 GiB)";
          }
        } else {
          double best = 0.0;
          for (const BenchResult* r : den) best = std::max(best, r->tflops);
          rr.value = best > 0 ? num.front()->tflops / best : -1.0;
        }
      }
      out.push_back(rr);
    }
  }
  return out;
}

std::string describe(const BenchResult& r) {
  return r.config.label() + " " + kv_format_name(r.format);
}

void print_table(std::FILE* out, const RunInfo& info, const std::vector<BenchResult>& results,
                 const std::vector<RatioResult>& ratios) {
  std::fprintf(out, "\nopenmla-bench %s  commit %s  %s\n", info.tool_version.c_str(), info.commit.c_str(),
               info.date.c_str());
  std::fprintf(out, "device: %s (sm_%d%d, %d SMs, %.0f GB), driver %s\n", info.device_name.c_str(), info.compute_major,
               info.compute_minor, info.num_sms, info.device_memory_gb, info.driver.c_str());
  if (info.ceilings.copy_gbps > 0) {
    std::fprintf(out,
                 "measured ceiling: device-to-device copy %.0f GB/s (read + write bytes counted; a pure read "
                 "stream, as decode does, reaches a little more)\n",
                 info.ceilings.copy_gbps);
  }
  std::fprintf(out, "per call = CUDA-graph replay of R calls / R, median of %d replays; planning excluded\n",
               info.replays);
  if (info.sustain_ms > 0) {
    std::fprintf(out,
                 "sustained: each configuration replayed back to back for %.0f ms first, the timed replays back to "
                 "back too (the GPU in its power state under load)\n",
                 info.sustain_ms);
  }
  if (info.allocation != "arena")
    std::fprintf(out, "allocation: %s (cudaMalloc / cudaFree per buffer of each config)\n", info.allocation.c_str());
  std::fprintf(out, "anchors: %s\n", info.anchors_file.empty() ? "none (--anchors FILE)" : info.anchors_file.c_str());
  const bool peer = !info.peer.empty();
  if (peer) {
    std::fprintf(out,
                 "peer: %s, on the same inputs by the same method in this process, its replays interleaved with "
                 "OpenMLA's;\n      %s_us its median per call, ratio = %s_us / us (> 1: OpenMLA faster)\n",
                 info.peer.c_str(), info.peer.c_str(), info.peer.c_str());
  }
  std::fprintf(out, "\n");

  // The queries column when a row has a speculative form or counts FLOPs over the visible keys (the spec grid).
  bool spec = false, sparse = false, padded_peer = false;
  for (const BenchResult& r : results) {
    spec = spec || r.config.speculative_form() || r.config.visible_key_flops;
    sparse = sparse || r.config.sparse();
    padded_peer = padded_peer || r.peer_heads > r.config.num_heads;
  }
  std::fprintf(out, "%-10s %4s %4s %4s %14s ", "format", "b", "s_q", "h_q", "s_k");
  if (spec) std::fprintf(out, "%-12s ", "queries");
  if (sparse) std::fprintf(out, "%5s ", "topk");
  std::fprintf(out, "%9s %4s %10s %8s %8s %9s %10s %8s", "backend", "R", "us", "GB/s", "TFLOP/s", "rel_err",
               "anchor_us", "speedup");
  if (peer) {
    const std::string us = info.peer + "_us", err = info.peer + "_err";
    std::fprintf(out, " %12s %7s %12s", us.c_str(), "ratio", err.c_str());
  }
  std::fprintf(out, "\n");
  for (const BenchResult& r : results) {
    std::fprintf(out, "%-10s %4d %4d %4d %14s ", kv_format_name(r.format), r.config.batch_size, r.config.q_len,
                 r.config.num_heads, seqlen_cell(r).c_str());
    if (spec) std::fprintf(out, "%-12s ", r.config.query_form().c_str());
    if (sparse) std::fprintf(out, "%5s ", r.config.sparse() ? std::to_string(r.config.topk).c_str() : "-");
    if (r.status != "ok") {
      std::fprintf(out, "%9s  %s\n", r.backend.c_str(), r.status.c_str());
      continue;
    }
    std::fprintf(out, "%9s %4d %10s %8s %8s %9s %10s %8s", r.backend.c_str(), r.input_sets,
                 cell(r.time_us, "%.1f").c_str(), cell(r.gbps, "%.0f").c_str(), cell(r.tflops, "%.1f").c_str(),
                 cell(r.max_rel_err, "%.2e").c_str(), cell(r.anchor_us, "%.1f").c_str(),
                 cell(r.speedup, "%.2fx").c_str());
    if (peer) {
      std::fprintf(out, " %12s %7s %12s", cell(r.peer_time_us, "%.1f").c_str(), cell(r.peer_ratio, "%.3f").c_str(),
                   cell(r.peer_max_rel_err, "%.2e").c_str());
      if (r.peer_status != "ok") std::fprintf(out, "  %s: %s", r.peer.c_str(), r.peer_status.c_str());
      if (r.peer_status == "ok" && r.peer_heads > r.config.num_heads)
        std::fprintf(out, "  (%s: h_q %d padded)", r.peer.c_str(), r.peer_heads);
    }
    std::fprintf(out, "%s\n", r.device_errors != 0 ? "  DEVICE ERRORS" : "");
  }
  std::fprintf(out,
               "\nGB/s = (sum(s_k) * bytes/token + b*s_q*h_q*1088*2) / time; TFLOP/s = 2*s_q*h_q*sum(s_k)*1088 / "
               "time;\nrel_err = max |out - reference| / max |reference| over the sampled requests; speedup = "
               "anchor_us / us (anchor: FlashMLA on the same shape, see docs/benchmarking.md).\n");
  if (peer) {
    std::fprintf(out, "%s_err: the same measure of the peer's output over the same sample.\n", info.peer.c_str());
  }
  if (sparse) {
    std::fprintf(out,
                 "topk rows (sparse decode): every query token attends to topk distinct random slots of its request's "
                 "s_k cached tokens;\nGB/s = b*s_q*(topk*(bytes/token + 4) + h_q*1088*2) / time (selected KV + "
                 "indices + q + out), TFLOP/s = 2*b*s_q*h_q*topk*1088 / time.\n");
  }
  if (padded_peer) {
    std::fprintf(out,
                 "(%s: h_q N padded): the peer ran the same requests with q padded to N heads, as engines run it "
                 "today (its sparse kernels\ntake 64 or 128); its time is the decode alone, the padding copy not "
                 "counted; its output is checked on the real heads.\n",
                 info.peer.c_str());
  }
  if (spec) {
    std::fprintf(out,
                 "queries: 1 = one token; chain = s_q tokens, causal; tree/shared = s_q tokens under one tree mask; "
                 "ragged a/b = request r has\nthe pattern's (r mod its length)-th count, s_q the largest. These rows "
                 "count q and out bytes over the tokens there are, and\nFLOPs over the keys each token sees (causal: "
                 "s_k - n + i + 1; tree: the prefix and the draft tokens of its mask row).\n");
  }
  if (!ratios.empty()) {
    std::fprintf(out, "\nratios (time: sum of the numerator rows' us / the denominator rows'; TFLOP/s: the row's / the "
                      "best of the reference rows;\nflashmla/openmla: the peer's us / OpenMLA's, summed over the rows "
                      "or the worst row; GB/s / copy: the row's GB/s / the copy ceiling):\n");
    for (const RatioResult& rr : ratios) {
      const int meets = rr.meets_target();
      const char* verdict = rr.status != "ok" ? rr.status.c_str()
                            : meets == 1      ? "meets target"
                            : meets == 0      ? "ABOVE TARGET"
                                              : "";
      std::fprintf(out, "  %-50s %-10s %8s  %-9s %s\n", rr.def.name.c_str(), kv_format_name(rr.format),
                   cell(rr.value, "%.3f").c_str(), target_text(rr.def).c_str(), verdict);
    }
  }
}

void write_json(const std::string& path, const RunInfo& info, const std::vector<BenchResult>& results,
                const std::vector<RatioResult>& ratios) {
  std::ostringstream js;
  js << "{\n";
  js << "  \"tool\": \"openmla-bench\",\n";
  js << "  \"version\": " << json_string(info.tool_version) << ",\n";
  js << "  \"commit\": " << json_string(info.commit) << ",\n";
  js << "  \"date\": " << json_string(info.date) << ",\n";
  js << "  \"command\": " << json_string(info.command_line) << ",\n";
  js << "  \"device\": {\"name\": " << json_string(info.device_name) << ", \"compute_capability\": \""
     << info.compute_major << "." << info.compute_minor << "\", \"num_sms\": " << info.num_sms
     << ", \"memory_gb\": " << json_number(info.device_memory_gb) << ", \"driver\": " << json_string(info.driver)
     << "},\n";
  js << "  \"method\": {\"grid\": " << json_string(info.grid) << ", \"formats\": " << json_string(info.formats)
     << ", \"backend_requested\": " << json_string(info.backend_requested)
     << ", \"fp8_math\": " << json_string(info.fp8_math) << ", \"fp8_query\": " << json_string(info.fp8_query)
     << ", \"min_kv_bytes_per_pass\": " << json_number(info.min_kv_bytes_per_pass)
     << ", \"replays\": " << info.replays << ", \"sustain_ms\": " << json_number(info.sustain_ms)
     << ", \"allocation\": " << json_string(info.allocation)
     << ", \"check_samples\": " << info.check_samples
     << ", \"check_heads\": " << info.check_heads << ", \"seed\": " << info.seed
     << ", \"head_dim_qk\": 576, \"head_dim_v\": 512, \"page_size\": 64, \"softmax_scale\": \"576^-0.5\""
     << ", \"causal\": \"s_q > 1\", \"anchors_file\": " << json_string(info.anchors_file)
     << ", \"peer\": " << (info.peer.empty() ? "null" : json_string(info.peer)) << "},\n";
  js << "  \"ceilings\": {\"device_copy_gbps_read_plus_write\": " << json_number(info.ceilings.copy_gbps)
     << ", \"device_copy_bytes\": " << json_number(info.ceilings.copy_bytes) << "},\n";
  js << "  \"results\": [";
  for (size_t i = 0; i < results.size(); ++i) {
    const BenchResult& r = results[i];
    js << (i ? ",\n" : "\n") << "    {";
    js << "\"b\": " << r.config.batch_size << ", \"s_q\": " << r.config.q_len << ", \"h_q\": " << r.config.num_heads
       << ", \"s_k\": " << r.config.seqlen << ", \"varlen\": " << (r.config.varlen ? "true" : "false")
       << ", \"causal\": " << (r.config.causal() ? "true" : "false")
       << ", \"layout\": " << json_string(query_layout_name(r.config.layout))
       << ", \"tree_mask\": " << json_string(tree_mask_name(r.config.tree_mask))
       << ", \"q_counts\": " << json_string(r.config.q_counts_description())
       << ", \"total_q\": " << query_inputs(r.config).total_q << ", \"topk\": " << r.config.topk
       << ", \"tree_parents\": [";
    for (size_t k = 0; k < r.config.tree_parents.size(); ++k) js << (k ? ", " : "") << r.config.tree_parents[k];
    js << "], \"flops_count\": "
       << json_string(r.config.sparse() ? "s_q*topk" : r.config.visible_key_flops ? "visible_keys" : "s_q*s_k")
       << ", \"format\": "
       << json_string(kv_format_name(r.format)) << ", \"bytes_per_token\": " << kv_bytes_per_token(r.format)
       << ", \"backend\": " << json_string(r.backend) << ", \"status\": " << json_string(r.status)
       << ", \"total_seqlen\": " << r.total_seqlen << ", \"mean_seqlen\": " << json_number(r.mean_seqlen)
       << ", \"max_seqlen\": " << r.max_seqlen << ", \"input_sets\": " << r.input_sets
       << ", \"set_bytes\": " << json_number(r.set_bytes) << ", \"kv_bytes_per_pass\": "
       << json_number(r.kv_bytes_per_pass) << ", \"replays\": " << r.replays
       << ", \"time_us\": " << json_number(r.time_us) << ", \"time_us_min\": " << json_number(r.time_us_min)
       << ", \"time_us_max\": " << json_number(r.time_us_max) << ", \"replay_us\": [";
    for (size_t k = 0; k < r.replay_us.size(); ++k) js << (k ? ", " : "") << json_number(r.replay_us[k]);
    js << "], \"gbps\": " << json_number(r.gbps)
       << ", \"tflops\": " << json_number(r.tflops) << ", \"max_rel_err\": " << json_number(r.max_rel_err)
       << ", \"max_lse_err\": " << json_number(r.max_lse_err) << ", \"checked_requests\": " << r.checked_requests
       << ", \"checked_heads\": " << r.checked_heads << ", \"device_errors\": " << r.device_errors
       << ", \"anchor_kernel\": " << json_string(r.anchor_kernel) << ", \"anchor_us\": " << json_number(r.anchor_us)
       << ", \"speedup\": " << json_number(r.speedup);
    if (!r.peer.empty()) {
      // "<peer>_us" etc.: the peer's per-call median, spread, replays and check, as OpenMLA's fields above.
      const std::string p = "\"" + r.peer;
      js << ", " << p << "_status\": " << json_string(r.peer_status) << ", " << p
         << "_num_sm_parts\": " << r.peer_num_sm_parts << ", " << p << "_heads\": " << r.peer_heads << ", " << p
         << "_us\": " << json_number(r.peer_time_us)
         << ", " << p << "_us_min\": " << json_number(r.peer_time_us_min) << ", " << p
         << "_us_max\": " << json_number(r.peer_time_us_max) << ", " << p << "_replay_us\": [";
      for (size_t k = 0; k < r.peer_replay_us.size(); ++k) js << (k ? ", " : "") << json_number(r.peer_replay_us[k]);
      js << "], " << p << "_rel_err\": " << json_number(r.peer_max_rel_err) << ", " << p
         << "_lse_err\": " << json_number(r.peer_max_lse_err) << ", \"ratio_vs_" << r.peer
         << "\": " << json_number(r.peer_ratio);
    }
    js << "}";
  }
  js << (results.empty() ? "],\n" : "\n  ],\n");
  // Ratios between rows (the spec grid): what each compares, its value per format, its target.
  js << "  \"ratios\": [";
  for (size_t i = 0; i < ratios.size(); ++i) {
    const RatioResult& rr = ratios[i];
    auto labels = [](const std::vector<BenchConfig>& configs) {
      std::string s = "[";
      for (size_t k = 0; k < configs.size(); ++k) s += (k ? ", " : "") + json_string(configs[k].label());
      return s + "]";
    };
    const int meets = rr.meets_target();
    js << (i ? ",\n" : "\n") << "    {\"name\": " << json_string(rr.def.name)
       << ", \"format\": " << json_string(kv_format_name(rr.format))
       << ", \"kind\": " << json_string(ratio_kind_name(rr.def.kind)) << ", \"value\": " << json_number(rr.value)
       << ", \"target_max\": " << json_number(rr.def.target_max)
       << ", \"meets_target\": " << (meets < 0 ? "null" : meets ? "true" : "false")
       << ", \"status\": " << json_string(rr.status) << ", \"numerator\": " << labels(rr.def.numerator)
       << ", \"denominator\": " << labels(rr.def.denominator) << ", \"meaning\": " << json_string(rr.def.meaning)
       << "}";
  }
  js << (ratios.empty() ? "]\n" : "\n  ]\n") << "}\n";

  std::ofstream f(path);
  if (!f) detail::fail_arg("--json", "a writable file path", "'" + path + "'");
  f << js.str();
  if (!f) detail::fail_arg("--json", "a writable file path", "'" + path + "' (write failed)");
}

}  // namespace openmla::bench
