// OpenMLA: MLA decode attention for serving engines. One include for the whole public API.
#pragma once

#include "openmla/decode.h"
#include "openmla/error.h"
#include "openmla/fp8.h"
#include "openmla/kv_format.h"
#include "openmla/move_kv.h"
#include "openmla/reference.h"
#include "openmla/sparse_decode.h"
#include "openmla/tensor.h"
#include "openmla/tree_mask.h"
#include "openmla/version.h"
#include "openmla/write_kv.h"
