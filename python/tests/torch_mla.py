"""GPU test data and a PyTorch float32 reference: paged caches with shuffled pages, NaN in unused
pages and in the tail of each request's last page, and the comparison the C++ suite uses
(identical NaN/inf positions, then per-request relative error)."""

from __future__ import annotations

import dataclasses
from typing import Any, Optional

import numpy as np

import openmla

PAGE = openmla.PAGE_SIZE
UNUSED_PAGE = 2_147_480_000


@dataclasses.dataclass
class Paged:
    cache: Any        # torch [num_pages, 64, 1, W] in the format's dtype (uint8 for FP8)
    values: Any       # torch [num_pages, 64, 576] float32: what decode reads (NaN where unused)
    block_table: Any  # torch [b, max_pages] int32 (CUDA)
    seqlens: Any      # torch [b] int32 (CUDA)
    kv_format: str


def make_paged(torch, kv_format: str, lengths, seed: int = 0, extra_pages: int = 2, page_capacity: int = 0,
               kv_scale: float = 1.0) -> Paged:
    """A cache holding len(lengths) requests. page_capacity > 0 makes every block-table row that
    wide (room to grow, for graph tests), with the extra pages allocated too. kv_format "fp8_e4m3":
    576 e4m3 codes per token (uint8), value = code * kv_scale."""
    rng = np.random.default_rng(seed)
    lengths = [int(n) for n in lengths]
    pages_per = [max(-(-n // PAGE), page_capacity) for n in lengths]
    max_pages = max(pages_per) + 1
    num_pages = sum(pages_per) + extra_pages
    order = rng.permutation(num_pages)
    table = np.full((len(lengths), max_pages), UNUSED_PAGE, np.int32)
    used = 0
    for r, n in enumerate(pages_per):
        table[r, :n] = order[used:used + n]
        used += n
    latent = rng.standard_normal((num_pages, PAGE, 512)).astype(np.float32)
    rope = rng.standard_normal((num_pages, PAGE, 64)).astype(np.float32)
    valid = np.zeros((num_pages, PAGE), bool)
    for r, n in enumerate(lengths):
        for p in range(pages_per[r]):
            count = PAGE if page_capacity else min(PAGE, n - p * PAGE)
            valid[table[r, p], :max(count, 0)] = True
    if kv_format == "fp8_ds_mla":
        tokens = openmla.fp8.ds_mla_encode(latent.reshape(-1, 512), rope.reshape(-1, 64))
        tokens[~valid.reshape(-1)] = 0x7F  # e4m3 NaN latent; scales 0x7F7F7F7F
        values = openmla.fp8.ds_mla_decode(tokens).reshape(num_pages, PAGE, 576)
        cache = torch.from_numpy(tokens.reshape(num_pages, PAGE, 1, 656))
    elif kv_format == "fp8_e4m3":
        tokens = openmla.fp8.e4m3_encode_scaled(np.concatenate([latent, rope], axis=-1).reshape(-1, 576), kv_scale)
        tokens[~valid.reshape(-1)] = 0x7F  # e4m3 NaN
        values = openmla.fp8.e4m3_to_float(tokens).reshape(num_pages, PAGE, 576) * np.float32(kv_scale)
        cache = torch.from_numpy(tokens.reshape(num_pages, PAGE, 1, 576))
    else:
        dtype = torch.bfloat16 if kv_format == "bf16" else torch.float16
        cache = torch.from_numpy(np.concatenate([latent, rope], axis=-1)).to(dtype)
        values = cache.float().numpy()
        cache = cache.unsqueeze(2)
    values = np.where(valid[..., None], values, np.nan).astype(np.float32)
    cache[torch.from_numpy(~valid)] = 0x7F if kv_format.startswith("fp8") else float("nan")
    return Paged(cache.cuda(), torch.from_numpy(values).cuda(), torch.from_numpy(table).cuda(),
                 torch.tensor(lengths, dtype=torch.int32, device="cuda"), kv_format)


def reference(torch, q, paged: Paged, scale: float, causal: bool, seqlens: Optional[list] = None,
              q_scale: float = 1.0, flashmla_lse: bool = False):
    """float32 attention: out [b, s_q, h, 512], lse [b, s_q, h] (length 0: out 0, lse -inf, or +inf
    with flashmla_lse, as FlashMLA and openmla.flash_mla return it). A float8 q is read as code *
    q_scale."""
    b, s_q, h, _ = q.shape
    lengths = paged.seqlens.tolist() if seqlens is None else seqlens
    table = paged.block_table.cpu()
    out = torch.zeros((b, s_q, h, 512), dtype=torch.float32, device=q.device)
    lse = torch.full((b, s_q, h), float("inf") if flashmla_lse else float("-inf"), dtype=torch.float32,
                     device=q.device)
    qf = q.float() * q_scale if q.element_size() == 1 else q.float()
    for r, n in enumerate(lengths):
        if n == 0:
            continue
        pages = table[r, : -(-n // PAGE)].to(q.device).long()
        k = paged.values[pages].reshape(-1, 576)[:n]
        scores = torch.einsum("ihd,nd->ihn", qf[r], k) * scale
        if causal:
            pos = torch.arange(n, device=q.device)
            limit = n - s_q + torch.arange(s_q, device=q.device)
            scores = scores.masked_fill(pos[None, None, :] > limit[:, None, None], float("-inf"))
        lse[r] = torch.logsumexp(scores, dim=-1)
        out[r] = torch.einsum("ihn,nd->ihd", torch.softmax(scores, dim=-1), k[:, :512])
    return out, lse


def assert_close(torch, out, lse, ref_out, ref_lse, out_tol=1e-2, lse_tol=1e-4, what=""):
    """NaN/inf positions identical; per request max|out - ref| <= out_tol * max|ref|, and
    |lse - ref| <= lse_tol * max(1, |ref|) where finite."""
    out, lse = out.float(), lse.float()
    assert torch.equal(torch.isnan(out), torch.isnan(ref_out)), f"{what}: NaN positions differ in out"
    assert torch.equal(torch.isinf(lse), torch.isinf(ref_lse)) and torch.equal(
        lse[torch.isinf(lse)], ref_lse[torch.isinf(ref_lse)]), f"{what}: inf positions differ in lse"
    for r in range(out.shape[0]):
        err = (out[r] - ref_out[r]).abs().nan_to_num(0).max().item()
        scale = max(ref_out[r].abs().nan_to_num(0).max().item(), 1e-30)
        assert err <= out_tol * scale, f"{what}: request {r}: out relative error {err / scale:.3g} > {out_tol}"
    finite = torch.isfinite(ref_lse)
    lerr = ((lse - ref_lse).abs() / ref_lse.abs().clamp(min=1.0))[finite]
    assert lerr.numel() == 0 or lerr.max().item() <= lse_tol, f"{what}: lse relative error {lerr.max().item():.3g}"


def random_q(torch, b, s_q, h, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return torch.randn((b, s_q, h, 576), generator=g, device="cuda", dtype=torch.float32).to(dtype)


def reference64(torch, q, cache, block_table, seqlens, scale: float, causal: bool):
    """openmla.reference.decode (float64 accumulation, the CPU oracle) on CPU copies of the inputs:
    out [b, s_q, h, 512], lse [b, s_q, h] as float64 torch tensors on q's device."""
    result = openmla.reference.decode(q.cpu(), cache.cpu(), block_table.cpu().contiguous(), seqlens.cpu(), scale,
                                      causal=causal)
    return torch.from_numpy(result.out).to(q.device), torch.from_numpy(result.lse).to(q.device)
