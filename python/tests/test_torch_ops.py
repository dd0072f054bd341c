"""The torch custom operators without a GPU: registered with the tensors they write marked mutable,
fake (meta) implementations that give the outputs' shapes, and torch.compile(fullgraph=True)
tracing each public entry point into its operator on meta tensors."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch.library, "custom_op"):
    pytest.skip("torch.library.custom_op needs PyTorch 2.4 or newer", allow_module_level=True)

import openmla  # noqa: E402
from openmla import flash_mla  # noqa: E402

B, S, H = 2, 1, 16


def _meta_inputs(s_q=S):
    q = torch.empty(B, s_q, H, 576, dtype=torch.bfloat16, device="meta")
    cache = torch.empty(4, 64, 576, dtype=torch.bfloat16, device="meta")
    table = torch.empty(B, 2, dtype=torch.int32, device="meta")
    seqlens = torch.empty(B, dtype=torch.int32, device="meta")
    return q, cache, table, seqlens


def test_operators_are_registered_with_their_writes_marked():
    ops = torch.ops.openmla
    schemas = {name: str(getattr(ops, name).default._schema)
               for name in ("decode", "decode_out", "write_kv", "move_kv", "decoder_plan", "decoder_run",
                            "flash_mla_with_kvcache")}
    assert "!" not in schemas["decode"] and "!" not in schemas["flash_mla_with_kvcache"]
    for name, written in [("decode_out", ["out", "lse"]), ("write_kv", ["kv_cache", "workspace"]),
                          ("move_kv", ["caches", "workspace"]),
                          ("decoder_plan", ["workspace"]), ("decoder_run", ["out", "lse", "workspace"])]:
        for arg in written:
            assert any(f"!){kind} {arg}" in schemas[name] for kind in ("", "?", "[]")), (name, arg, schemas[name])


def test_fake_implementations_give_the_output_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        q = torch.empty(B, 2, H, 576, dtype=torch.bfloat16, device="cuda")
        cache = torch.empty(4, 64, 576, dtype=torch.bfloat16, device="cuda")
        table = torch.empty(B, 2, dtype=torch.int32, device="cuda")
        seqlens = torch.empty(B, dtype=torch.int32, device="cuda")
        out, lse = torch.ops.openmla.decode(q, cache, table, seqlens, 0.1, True, None, 1.0, "auto", 0)
        assert out.shape == (B, 2, H, 512) and out.dtype == torch.bfloat16 and out.device.type == "cuda"
        assert lse.shape == (B, 2, H) and lse.dtype == torch.float32
        out, lse = torch.ops.openmla.flash_mla_with_kvcache(q, cache.view(4, 64, 1, 576), table, seqlens, 512, None,
                                                            True, False)
        assert out.shape == (B, 2, H, 512) and lse.shape == (B, H, 2)


def test_compile_fullgraph_decode_and_decode_out():
    q, cache, table, seqlens = _meta_inputs(s_q=2)

    def step(q, cache, table, seqlens):
        out, lse = openmla.decode(q, cache, table, seqlens, 0.1, kv_format="bf16")
        return out.float() * 2, lse

    out, lse = torch.compile(step, fullgraph=True, backend="eager")(q, cache, table, seqlens)
    assert out.shape == (B, 2, H, 512) and lse.shape == (B, 2, H)

    def into(q, cache, table, seqlens, out, lse):
        openmla.decode(q, cache, table, seqlens, 0.1, out=out, lse=lse, kv_format=openmla.KVFormat.bf16)
        return out

    o = torch.empty(B, 2, H, 512, dtype=torch.bfloat16, device="meta")
    l = torch.empty(B, 2, H, device="meta")
    assert torch.compile(into, fullgraph=True, backend="aot_eager")(q, cache, table, seqlens, o, l).shape == o.shape


def test_compile_fullgraph_write_kv_and_flash_mla():
    q, cache, table, seqlens = _meta_inputs()

    def write(latent, rope, slots, cache):
        openmla.write_kv(latent, rope, slots, cache)
        return cache

    latent = torch.empty(3, 512, dtype=torch.bfloat16, device="meta")
    rope = torch.empty(3, 64, dtype=torch.bfloat16, device="meta")
    slots = torch.empty(3, dtype=torch.int32, device="meta")
    assert torch.compile(write, fullgraph=True, backend="aot_eager")(latent, rope, slots, cache).shape == cache.shape

    def attend(q, cache, table, seqlens):
        meta, _ = flash_mla.get_mla_metadata()
        return flash_mla.flash_mla_with_kvcache(q, cache.view(4, 64, 1, 576), table, seqlens, 512, meta, None,
                                                causal=True)

    out, lse = torch.compile(attend, fullgraph=True, backend="aot_eager")(q, cache, table, seqlens)
    assert out.shape == (B, S, H, 512) and lse.shape == (B, H, S)


def test_compile_fullgraph_move_kv():
    """move_kv traces into openmla::move_kv, for one cache or a list (every layer's)."""
    caches = [torch.empty(4, 64, 576, dtype=torch.bfloat16, device="meta") for _ in range(3)]
    src = torch.empty(5, dtype=torch.int32, device="meta")
    dst = torch.empty(5, dtype=torch.int32, device="meta")
    indptr = torch.empty(3, dtype=torch.int32, device="meta")

    def compact(caches, src, dst, indptr):
        openmla.move_kv(caches, src, dst, indptr)
        openmla.move_kv(caches[0], src, dst, indptr, kv_format="bf16")
        return caches[0]

    assert torch.compile(compact, fullgraph=True, backend="aot_eager")(caches, src, dst, indptr).shape == (4, 64, 576)


def test_eager_move_kv_names_a_cpu_tensor():
    caches = [torch.zeros(2, 64, 576, dtype=torch.bfloat16) for _ in range(2)]
    slots = torch.zeros(1, dtype=torch.int32)
    indptr = torch.tensor([0, 1], dtype=torch.int32)
    with pytest.raises(ValueError, match=r"caches\[0\]: expected a CUDA tensor, got a CPU tensor"):
        openmla.move_kv(caches, slots, slots, indptr)


def test_eager_calls_do_not_go_through_the_operators():
    """Outside torch.compile the entry points call the extension directly (the dispatcher's host
    time is not paid): a CPU tensor reaches the extension's own check."""
    from openmla import _frameworks

    assert not _frameworks.compiling()
    q, cache, table, seqlens = (torch.zeros(t.shape, dtype=t.dtype) for t in _meta_inputs())
    with pytest.raises(ValueError, match="q: expected a CUDA tensor, got a CPU tensor"):
        openmla.decode(q, cache, table, seqlens, 0.1)
