#include "kernels/sm90/decode/launch_config.h"

#include <string>

#include "core/check.h"
#include "kernels/common/kv_kind.h"
#include "kernels/sm90/decode/fp8_math/config.h"
#include "kernels/sm90/decode/narrow/config.h"
#include "kernels/sm90/decode/wide/config.h"

namespace openmla::kernels::sm90 {

// The table's forms are the kernels' own.
static_assert(kWide.rows_per_cta == WideConfig::kRows && kWide.ctas_per_sm == 1);
static_assert(kWideSeesaw.rows_per_cta == WideConfig::kRows && kWideSeesaw.ctas_per_sm == 1);
static_assert(kNarrow16.rows_per_cta == NarrowConfig<16, kKvE4M3, 1>::kRows &&
              kNarrow16.ctas_per_sm == NarrowConfig<16, kKvE4M3, 1>::kCtasPerSm &&
              kNarrow16.producer_warps == NarrowConfig<16, kKvE4M3, 1>::kProducerWarps);
static_assert(kNarrow16Split.rows_per_cta == NarrowConfig<16, kKvE4M3, 2>::kRows &&
              kNarrow16Split.ctas_per_sm == NarrowConfig<16, kKvE4M3, 2>::kCtasPerSm &&
              kNarrow16Split.producer_warps == NarrowConfig<16, kKvE4M3, 2>::kProducerWarps);
static_assert(kNarrow32.rows_per_cta == NarrowConfig<32>::kRows && kNarrow32.ctas_per_sm == NarrowConfig<32>::kCtasPerSm &&
              kNarrow32.producer_warps == NarrowConfig<32>::kProducerWarps);
static_assert(kNarrow16Bit16.rows_per_cta == NarrowConfig<16, kKv16Bit>::kRows &&
              kNarrow16Bit16.ctas_per_sm == NarrowConfig<16, kKv16Bit>::kCtasPerSm &&
              kNarrow16Bit16.producer_warps == NarrowConfig<16, kKv16Bit>::kProducerWarps);
static_assert(kNarrow16Bit32.rows_per_cta == NarrowConfig<32, kKv16Bit>::kRows &&
              kNarrow16Bit32.ctas_per_sm == NarrowConfig<32, kKv16Bit>::kCtasPerSm &&
              kNarrow16Bit32.producer_warps == NarrowConfig<32, kKv16Bit>::kProducerWarps);
static_assert(kFp8Math.rows_per_cta == Fp8MathConfig::kRows && kFp8Math.ctas_per_sm == 1 && kFp8Math.seesaw);

Schedule choose_schedule(KVFormat format, bool q_is_bf16, int rows, int batch_size, int requested_rows,
                         Fp8Math math) noexcept {
  if (math != Fp8Math::kOff) {
    const bool runs = format == KVFormat::kFP8E4M3 && (requested_rows == 0 || requested_rows == 64);
    return runs ? kFp8Math : Schedule{};
  }
  // ds_mla's rope is bf16, and the narrow kernel multiplies it with the query as stored.
  const bool narrow_format = format == KVFormat::kFP8E4M3 || (format == KVFormat::kFP8DsMla && q_is_bf16);
  const Schedule wide = kv_format_is_16bit(format) && rows >= kSeesawMinRows ? kWideSeesaw : kWide;
  const Schedule narrow16 =
      format == KVFormat::kFP8DsMla && batch_size >= kNarrow16SplitMinBatch ? kNarrow16Split : kNarrow16;
  switch (requested_rows) {
    case 0:
      if (kv_format_is_16bit(format)) {
        if (rows <= 16 && (batch_size >= kNarrow16BitMinBatch || batch_size <= kNarrow16BitMaxFewBatch))
          return kNarrow16Bit16;
        if (rows <= 32 && batch_size >= kNarrow16Bit32MinBatch) return kNarrow16Bit32;
        return wide;
      }
      if (narrow_format && rows <= 16) return narrow16;
      if (narrow_format && rows <= 32 && batch_size >= kNarrow32MinBatch) return kNarrow32;
      return wide;
    case 16:
      if (kv_format_is_16bit(format)) return rows <= 16 ? kNarrow16Bit16 : Schedule{};
      return narrow_format && rows <= 16 ? narrow16 : Schedule{};
    case 32:
      if (kv_format_is_16bit(format)) return rows <= 32 ? kNarrow16Bit32 : Schedule{};
      return narrow_format && rows <= 32 ? kNarrow32 : Schedule{};
    case 64: return wide;
    default: return Schedule{};
  }
}

LaunchConfig choose_launch(const DecodeShape& shape, const DecodeOptions& options, const DeviceFacts&,
                           const testing::DecodeOverrides& overrides) {
  LaunchConfig c;
  c.kv_format = shape.kv_format;
  c.q_is_bf16 = shape.q_dtype == DType::kBFloat16;
  c.rows = shape.q_len * shape.num_heads;
  c.schedule = choose_schedule(shape.kv_format, c.q_is_bf16, c.rows, shape.batch_size, overrides.sm90_rows_per_cta,
                               options.fp8_math);
  if (!c.schedule.runs())
    detail::fail_arg("overrides.sm90_rows_per_cta",
                     options.fp8_math != Fp8Math::kOff
                         ? "0 or 64 with options.fp8_math (FP8 math runs the 64-row kernel)"
                         : "0, 64, or 16 / 32 for at most that many query rows (ds_mla: bf16 query)",
                     std::to_string(overrides.sm90_rows_per_cta) + " for " + std::to_string(c.rows) + " rows, " +
                         kv_format_name(shape.kv_format) + ", q " + dtype_name(shape.q_dtype));
  // With 2+ m-tiles a split costs each m-tile's CTA a segment (schedule.h).
  const bool multi_tile = c.rows > c.schedule.rows_per_cta;
  c.split = multi_tile ? SplitTuning{kSm90MinUnitsPerPart, kSm90WholeRequestSlackPercent, kSm90MultiTileOverheadUnits}
                       : SplitTuning{kSm90MinUnitsPerPart, 0, kRequestOverheadUnits};
  return c;
}

bool fp16_partials(const LaunchConfig& config, int batch_size, int num_parts, int max_pages) noexcept {
  switch (config.schedule.variant) {
    case Variant::kFp8Math: return kFp8MathFp16Partials;
    case Variant::kNarrow:
      return with_kv_kind(config.kv_format, [](auto kind) { return kNarrowFp16Partials<decltype(kind)::value>; });
    case Variant::kWide:
      return wide_fp16_partials(config.rows, config.schedule.seesaw, batch_size, num_parts, max_pages);
    case Variant::kNone: break;
  }
  return false;
}

}  // namespace openmla::kernels::sm90
