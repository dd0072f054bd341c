// OpenMLA errors: one exception type for the C++ API, carrying one status code per kind of failure.
#pragma once

#include <stdexcept>
#include <string>

namespace openmla {

// Stable numeric codes (Error::status()).
enum class Status : int {
  kOk = 0,
  kInvalidArgument = 1,   // a shape, dtype, stride, alignment or value the operation does not accept
  kUnsupported = 2,       // a valid request this build/device does not implement (e.g. sm90 kernel on sm80)
  kWorkspaceTooSmall = 3, // caller-owned workspace smaller than workspace_bytes()
  kCudaError = 4,         // a CUDA runtime call failed; the message carries cudaGetErrorString
  kInternal = 5,          // a broken invariant inside the library (a bug: please report)
};

const char* status_name(Status s) noexcept;

// Thrown by every C++ entry point. what() names the argument, what was expected and what came,
// e.g. "q: expected shape [b, s_q, h_q, 576], got [4, 1, 16, 512]".
class Error : public std::runtime_error {
 public:
  Error(Status status, const std::string& message) : std::runtime_error(message), status_(status) {}
  Status status() const noexcept { return status_; }

 private:
  Status status_;
};

// Device-side error word: bits set by kernels when device-resident inputs are bad. Kernels never
// dereference a bad page id or read past a request's pages; the affected output rows are NaN and
// the corresponding bit is OR-ed into the word (read with read_device_errors(), no sync otherwise).
enum DeviceErrorBits : unsigned {
  kDeviceErrorNone = 0u,
  kDeviceErrorNegativeSeqlen = 1u << 0,      // cache_seqlens[i] < 0
  kDeviceErrorSeqlenBeyondTable = 1u << 1,   // cache_seqlens[i] > max_pages * 64
  kDeviceErrorSeqlenBelowQueryLen = 1u << 2, // causal or tree, n > 1 query tokens and 0 < cache_seqlens[i] < n
  kDeviceErrorPageIdOutOfRange = 1u << 3,    // block_table entry outside [0, num_pages)
  kDeviceErrorSlotOutOfRange = 1u << 4,      // write_kv slot outside [0, num_pages * 64) (negative = skip);
                                             // move_kv slot outside [0, num_pages * 64), negative included
  kDeviceErrorPlanMismatch = 1u << 5,        // run() saw other cache_seqlens than plan() planned for
  kDeviceErrorQueryOffsets = 1u << 6,        // ragged q_indptr: negative, decreasing, past total_q, or a request
                                             // with more than DecodeShape::q_len tokens. Such a request's rows are
                                             // not written; as its pair is checked alone, an array that is not
                                             // monotone may also let two requests' rows overlap. Likewise
                                             // move_kv's row_indptr (past m, or a group of more than
                                             // kMaxMoveRowsPerGroup rows: the group moves nothing)
  kDeviceErrorScale = 1u << 7,               // a device-held FP8 scale (KVCache::device_scale, DecodeArgs::q_scale)
                                             // that is not finite and > 0: decode outputs NaN, write_kv writes
                                             // nothing
  kDeviceErrorSparseIndex = 1u << 8,         // sparse decode: an index other than -1 outside [0, num_pages *
                                             // page_block_size) of its cache (never dereferenced; that query
                                             // token's rows are NaN)
};

// "negative_seqlen|page_id_out_of_range" style text for a device error word.
std::string describe_device_errors(unsigned word);

}  // namespace openmla
