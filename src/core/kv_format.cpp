#include "openmla/kv_format.h"

#include <cctype>
#include <cstring>

namespace openmla {

const char* kv_format_name(KVFormat f) noexcept {
  switch (f) {
    case KVFormat::kBF16: return "bf16";
    case KVFormat::kFP16: return "fp16";
    case KVFormat::kFP8E4M3: return "fp8_e4m3";
    case KVFormat::kFP8DsMla: return "fp8_ds_mla";
  }
  return "invalid_kv_format";
}

bool parse_kv_format(const char* name, KVFormat* out) noexcept {
  if (name == nullptr || out == nullptr) return false;
  // Case-insensitive, '-' accepted for '_': engines spell these "fp8_e4m3", "FP8-E4M3", "bfloat16"...
  char key[32];
  size_t n = std::strlen(name);
  if (n == 0 || n >= sizeof(key)) return false;
  for (size_t i = 0; i < n; ++i) {
    char c = static_cast<char>(std::tolower(static_cast<unsigned char>(name[i])));
    key[i] = c == '-' ? '_' : c;
  }
  key[n] = '\0';
  struct Alias {
    const char* name;
    KVFormat format;
  };
  static constexpr Alias kAliases[] = {
      {"bf16", KVFormat::kBF16},           {"bfloat16", KVFormat::kBF16},
      {"fp16", KVFormat::kFP16},           {"float16", KVFormat::kFP16},
      {"half", KVFormat::kFP16},           {"fp8_e4m3", KVFormat::kFP8E4M3},
      {"fp8", KVFormat::kFP8E4M3},         {"e4m3", KVFormat::kFP8E4M3},
      {"fp8_e4m3fn", KVFormat::kFP8E4M3},  {"fp8_ds_mla", KVFormat::kFP8DsMla},
      {"ds_mla", KVFormat::kFP8DsMla},     {"fp8_dsmla", KVFormat::kFP8DsMla},
  };
  for (const Alias& a : kAliases) {
    if (std::strcmp(key, a.name) == 0) {
      *out = a.format;
      return true;
    }
  }
  return false;
}

}  // namespace openmla
