#include "anchors.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "core/check.h"

namespace openmla::bench {
namespace {

constexpr double kVarlenMeanTolerance = 0.10;

}  // namespace

Anchors Anchors::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) detail::fail_arg("--anchors", "a readable CSV file", "'" + path + "'");
  Anchors a;
  a.path_ = path;
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line_no == 1) continue;  // header
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) cells.push_back(cell);
    AnchorRow r;
    try {
      if (cells.size() < 7) throw std::invalid_argument("too few columns");
      r.kernel = cells[0];
      r.batch_size = std::stoi(cells[1]);
      r.q_len = std::stoi(cells[2]);
      r.num_heads = std::stoi(cells[3]);
      r.seqlen = std::stod(cells[4]);
      r.varlen = std::stoi(cells[5]) != 0;
      r.time_us = std::stod(cells[6]);
    } catch (const std::exception&) {
      detail::fail_arg(("anchors " + path + ":" + std::to_string(line_no)).c_str(),
                       "kernel,b,s_q,h_q,s_k,varlen,time_us,...", "'" + line + "'");
    }
    a.rows_.push_back(r);
  }
  return a;
}

const AnchorRow* Anchors::find(const std::string& kernel, const BenchConfig& c) const {
  if (c.speculative_form()) return nullptr;  // anchor rows are uniform queries without a tree mask
  for (const AnchorRow& r : rows_) {
    if (r.kernel != kernel || r.batch_size != c.batch_size || r.q_len != c.q_len ||
        r.num_heads != c.num_heads || r.varlen != c.varlen) {
      continue;
    }
    const bool same_length = c.varlen ? std::fabs(r.seqlen - c.seqlen) <= kVarlenMeanTolerance * c.seqlen
                                      : std::fabs(r.seqlen - c.seqlen) < 0.5;
    if (same_length) return &r;
  }
  return nullptr;
}

const char* anchor_kernel_for(KVFormat format) {
  return format == KVFormat::kFP8DsMla ? "flashmla_fp8_sparse_all" : "flashmla_bf16";
}

}  // namespace openmla::bench
