"""CPU oracle (float64 accumulation) on CPU tensors."""

import numpy
from numpy.typing import NDArray

import openmla._C


def decode(q: object | None, kv_cache: object | None, block_table: object | None, cache_seqlens: object | None, softmax_scale: float, out: object | None, lse: object | None, kv_format: openmla._C.KVFormat, kv_scale: float = 1.0, causal: bool = True, fp8_math: openmla._C.Fp8Math = openmla._C.Fp8Math.off, q_indptr: object | None = None, mask: object | None = None, query_layout: openmla._C.QueryLayout = openmla._C.QueryLayout.uniform, tree_mask: openmla._C.TreeMask = openmla._C.TreeMask.none, q_len: int = 0, q_scale: object | None = None, kv_device_scale: object | None = None) -> int:
    """
    Exact attention (float64 accumulation; fp8_math qk_and_pv: the FP8-math kernel's arithmetic) on CPU tensors, arguments as DecodePlan.run; out (float64, float32, bfloat16 or float16) and lse (float64 or float32) are required here. The shape comes from q: [b, s_q, h_q, 576], or with query_layout ragged [total_q, h_q, 576] and b = len(q_indptr) - 1, q_len (the most tokens of a request; 0: min(total_q, MAX_QUERY_LEN, or MAX_TREE_QUERY_LEN with a tree mask)). kv_device_scale: the fp8_e4m3 cache's scale as a float32 tensor of one element (the GPU's device-held scale; kv_scale is then ignored); q_scale: with a float8_e4m3fn query (which needs kv_device_scale), value = code * q_scale[0]. Returns the device error word (DEVICE_ERROR_* bits) the GPU kernel would set for the same input; the rows it guards are NaN. Raises ValueError / TypeError for bad arguments.
    """

def sparse_decode(q: object | None, kv_cache: object | None, indices: object | None, softmax_scale: float, out: object | None, lse: object | None, kv_format: openmla._C.KVFormat, kv_scale: float = 1.0, kv_device_scale: object | None = None, topk_length: object | None = None, attn_sink: object | None = None, extra_kv_cache: object | None = None, extra_indices: object | None = None, extra_topk_length: object | None = None) -> int:
    """
    Exact (float64) sparse top-k decode on CPU tensors, arguments as SparseDecodePlan.run (the shape from q, indices and the optional tensors given); out float64/float32/bfloat16/float16 [b, s_q, h_q, 512], lse float64/float32 [b, s_q, h_q]. Returns the device error word the GPU kernels would set. A query token with nothing to attend gets out 0 and lse -inf.
    """

def write_kv(kv_latent: object | None, k_rope: object | None, slots: object | None, kv_cache: object | None, kv_format: openmla._C.KVFormat, kv_scale: float = 1.0, device_scale: object | None = None, overflow: openmla._C.E4M3Overflow = openmla._C.E4M3Overflow.saturate) -> int:
    """
    CPU write_kv with the GPU writer's codecs and skip rules, arguments as write_kv on CPU tensors (a device_scale is a one-element float32 CPU tensor here); returns the device error word (DEVICE_ERROR_SLOT_OUT_OF_RANGE for slots beyond the cache, which are skipped; DEVICE_ERROR_SCALE alone for a device_scale that is not finite and > 0, which writes nothing).
    """

def move_kv(caches: object | None, src_slots: object | None, dst_slots: object | None, row_indptr: object | None, kv_format: openmla._C.KVFormat) -> int:
    """
    CPU move_kv with the GPU kernel's moves, guards and error bits, arguments as move_kv on CPU tensors (the caches written in place); returns the device error word (DEVICE_ERROR_SLOT_OUT_OF_RANGE for a slot beyond the caches, whose row is skipped; DEVICE_ERROR_QUERY_OFFSETS for a bad group range, whose group moves nothing).
    """

def read_kv_token(kv_cache: object | None, page: int, offset: int, kv_format: openmla._C.KVFormat, kv_scale: float = 1.0) -> NDArray[numpy.float32]:
    """
    The 576 values decode reads for one token (float32 NumPy array: 512 latent, then 64 rope); page in [0, num_pages), offset in [0, 64), ValueError otherwise.
    """
