#include "openmla/error.h"

#include <string>

namespace openmla {

const char* status_name(Status s) noexcept {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kInvalidArgument: return "invalid_argument";
    case Status::kUnsupported: return "unsupported";
    case Status::kWorkspaceTooSmall: return "workspace_too_small";
    case Status::kCudaError: return "cuda_error";
    case Status::kInternal: return "internal";
  }
  return "unknown_status";
}

std::string describe_device_errors(unsigned word) {
  if (word == kDeviceErrorNone) return "none";
  struct NamedBit {
    unsigned bit;
    const char* name;
  };
  static constexpr NamedBit kBits[] = {
      {kDeviceErrorNegativeSeqlen, "negative_seqlen"},
      {kDeviceErrorSeqlenBeyondTable, "seqlen_beyond_table"},
      {kDeviceErrorSeqlenBelowQueryLen, "seqlen_below_query_len"},
      {kDeviceErrorPageIdOutOfRange, "page_id_out_of_range"},
      {kDeviceErrorSlotOutOfRange, "slot_out_of_range"},
      {kDeviceErrorPlanMismatch, "plan_mismatch"},
      {kDeviceErrorQueryOffsets, "query_offsets"},
      {kDeviceErrorScale, "scale"},
      {kDeviceErrorSparseIndex, "sparse_index"},
  };
  std::string text;
  unsigned known = 0;
  for (const NamedBit& b : kBits) {
    known |= b.bit;
    if (word & b.bit) {
      if (!text.empty()) text += '|';
      text += b.name;
    }
  }
  // Bits no name covers (a newer kernel, or a corrupted word) stay visible instead of vanishing.
  if (unsigned unknown = word & ~known) {
    char hex[16];
    static const char* kDigits = "0123456789abcdef";
    int n = 0;
    for (int shift = 28; shift >= 0; shift -= 4) {
      unsigned nibble = (unknown >> shift) & 0xFu;
      if (n == 0 && nibble == 0 && shift > 0) continue;
      hex[n++] = kDigits[nibble];
    }
    hex[n] = '\0';
    if (!text.empty()) text += '|';
    text += "unknown(0x";
    text += hex;
    text += ')';
  }
  return text;
}

}  // namespace openmla
