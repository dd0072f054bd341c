// Host builders of tree-mask rows (DecodeArgs::mask, TreeMask in decode.h) for speculative tree verify.
//
// A mask row is one 64-bit word per query token: bit j set = the token sees draft token j of its request
// (the request's j-th query token). Every query token also sees the whole prefix, which the rows do not
// encode. In a token tree, row i holds bit i and the bits of all of token i's ancestors.
//
// The builders run on the host and write caller-owned memory; copy the rows to the device for decode.
// Bad input throws openmla::Error(Status::kInvalidArgument) naming the argument, the expectation and the value.
#pragma once

#include <cstdint>
#include <vector>

namespace openmla {

// Rows of a token tree given by parent indices: parents[i] is the index of token i's parent among the
// n draft tokens, or -1 when token i hangs directly off the prefix (a root). Parents come before their
// children (parents[i] in [-1, i - 1]), as in EAGLE's and vLLM's token-tree orderings, so the rows are
// built in one pass: rows[i] = bit i | rows[parents[i]]. 1 <= n <= kMaxTreeQueryLen (64); rows has n words.
void tree_mask_from_parents(const int32_t* parents, int n, int64_t* rows);

// Rows of a causal chain of n tokens (row i = bits 0..i), 1 <= n <= kMaxTreeQueryLen: the tree in which
// token i's parent is token i - 1 (linear speculative decoding, MTP).
std::vector<int64_t> causal_chain_mask(int n);

// Rows from SGLang's EAGLE verify mask (EagleVerifyInput.custom_mask, built by build_tree_kernel_efficient
// with TreeMaskMode.FULL_MASK, the mode of its GPU attention backends). Layout: a flat bool tensor, the
// concatenation over requests r of a row-major block of num_draft rows x (prefix_lens[r] + num_draft)
// columns; request r's block starts at num_draft * (prefix_lens[0] + ... + prefix_lens[r-1]) +
// r * num_draft * num_draft (the attention backends' mask_indptr: the cumulative sum of
// num_draft * (seq_lens + num_draft)). Row i, column c: draft token i sees prefix position c
// (c < prefix_lens[r]) or draft token c - prefix_lens[r]. prefix_lens are SGLang's seq_lens in target verify:
// the committed length without the drafts (our cache_seqlens[r] - num_draft).
// Elements are bytes, nonzero = true. With check_prefix, every prefix column must be true (here every query
// token sees the whole prefix); SGLang leaves those columns unwritten when built with fill_prefix_mask=False,
// which check_prefix=false accepts. Writes batch * num_draft rows (request r's row i at r * num_draft + i: the
// packed layout of TreeMask::kPacked with q_indptr[r] = r * num_draft, or kPerRequest as [batch, num_draft]).
// 1 <= num_draft <= kMaxTreeQueryLen, batch >= 0, prefix_lens[r] >= 0.
void tree_mask_from_sglang_custom_mask(const uint8_t* custom_mask, const int64_t* prefix_lens, int batch,
                                       int num_draft, int64_t* rows_out, bool check_prefix = true);

// Rows from SGLang's prefix-less verify mask (TreeMaskMode.QLEN_ONLY, used by its CPU attention backend):
// [batch, num_draft, num_draft] bool, row-major, no prefix columns. Same output as above.
void tree_mask_from_sglang_qlen_mask(const uint8_t* mask, int batch, int num_draft, int64_t* rows_out);

}  // namespace openmla
