#include "kernels/common/schedule.h"

#include <algorithm>

namespace openmla::kernels {

int choose_num_parts(int num_sms, int ctas_per_sm, int m_tiles) noexcept {
  const int slots = std::max(1, num_sms) * std::max(1, ctas_per_sm);
  return std::max(1, slots / std::max(1, m_tiles));
}

}  // namespace openmla::kernels
