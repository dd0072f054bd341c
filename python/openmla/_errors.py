"""openmla.DeviceError: the bits of the sticky device error word as an enum.IntFlag."""

from __future__ import annotations

import enum

from . import _C


class DeviceError(enum.IntFlag):
    """Bits of the device error word that kernels set when device-resident inputs are bad.

    Kernels never dereference a bad page id or read past a request's pages: the affected output
    rows are NaN (a skipped write_kv slot is not written) and the bit is OR-ed into the word.
    Returned by Decoder.device_errors(), openmla.reference.decode(...).device_errors and
    openmla.reference.write_kv(); ``DeviceError(0)`` (NONE) means no guard fired. Combinations
    print as e.g. ``DeviceError.NEGATIVE_SEQLEN|PAGE_ID_OUT_OF_RANGE``;
    openmla.describe_device_errors(word) gives the C++ library's text.
    """

    NONE = 0
    #: cache_seqlens[r] < 0.
    NEGATIVE_SEQLEN = _C.DEVICE_ERROR_NEGATIVE_SEQLEN
    #: cache_seqlens[r] > max_pages * 64 (more positions than the block-table row holds).
    SEQLEN_BEYOND_TABLE = _C.DEVICE_ERROR_SEQLEN_BEYOND_TABLE
    #: causal or a tree mask, n > 1 query tokens and 0 < cache_seqlens[r] < n.
    SEQLEN_BELOW_QUERY_LEN = _C.DEVICE_ERROR_SEQLEN_BELOW_QUERY_LEN
    #: a block-table entry a request reads is outside [0, num_pages).
    PAGE_ID_OUT_OF_RANGE = _C.DEVICE_ERROR_PAGE_ID_OUT_OF_RANGE
    #: a write_kv slot outside [0, num_pages * 64) (negative slots are skipped, not flagged).
    SLOT_OUT_OF_RANGE = _C.DEVICE_ERROR_SLOT_OUT_OF_RANGE
    #: run() saw another cache_seqlens tensor than the plan() it follows.
    PLAN_MISMATCH = _C.DEVICE_ERROR_PLAN_MISMATCH
    #: ragged q_indptr negative, decreasing, past total_q, or a request with more than q_len tokens
    #: (its rows are not written).
    QUERY_OFFSETS = _C.DEVICE_ERROR_QUERY_OFFSETS
    #: a device-held FP8 scale (a tensor kv_scale or q_scale) that is not finite and > 0: decode gives
    #: NaN rows, write_kv writes nothing.
    SCALE = _C.DEVICE_ERROR_SCALE
    #: sparse decode: an index other than -1 outside its cache (that query token's rows are NaN).
    SPARSE_INDEX = _C.DEVICE_ERROR_SPARSE_INDEX


def as_device_error(word: int) -> DeviceError:
    """The error word (an int from the native layer) as DeviceError flags."""
    return DeviceError(int(word))
