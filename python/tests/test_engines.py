"""openmla.integrations on stand-ins of the engines' modules (fake_engines: the engines' module
paths, import styles and call styles), and the drop-in's engine-facing arguments, on the CPU.

After install() the names the engines' FlashMLA backends call resolve to OpenMLA: a call made as
the engine makes it reaches openmla.flash_mla's argument checks (which, for these CPU tensors,
stop at "expected a CUDA tensor" or at what is not implemented) instead of the engine's FlashMLA
(EngineFlashMLACalled); uninstall() restores the engine's own functions."""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import pathlib
import pickle
import subprocess
import sys
import types

import pytest

torch = pytest.importorskip("torch")

import openmla  # noqa: E402
import openmla.integrations.sglang as sglang_mla  # noqa: E402
import openmla.integrations.vllm as vllm_mla  # noqa: E402
from openmla import flash_mla  # noqa: E402
from openmla.integrations import Installed, flash_mla_with_kvcache_vendored_order  # noqa: E402
from openmla.integrations._adapters import flash_mla_with_kvcache_like  # noqa: E402

from fake_engines import engine_tree, use_engine_tree  # noqa: E402

PYTHON_DIR = pathlib.Path(openmla.__file__).resolve().parents[1]
SGLANG_BACKEND = "sglang.srt.layers.attention.flashmla_backend"
VLLM_OPS = "vllm.v1.attention.ops.flashmla"
VLLM_BACKEND = "vllm.v1.attention.backends.mla.flashmla"
CPU_TENSOR = "expected a CUDA tensor, got a CPU tensor"


def _cpu_inputs(b=2, s_q=1, h_q=16, cache_dtype=torch.bfloat16, width=576):
    return types.SimpleNamespace(
        q=torch.zeros(b, s_q, h_q, 576, dtype=torch.bfloat16),
        k_cache=torch.zeros(4, 64, 1, width, dtype=cache_dtype),
        block_table=torch.zeros(b, 2, dtype=torch.int32),
        seqlens=torch.full((b,), 70, dtype=torch.int32),
        md=torch.zeros(4, 8, dtype=torch.int32),
        ns=torch.zeros(b + 1, dtype=torch.int32),
        layer=types.SimpleNamespace(_q_scale=torch.ones(()), _k_scale=torch.ones(())),
    )


def _engine_called(excinfo_type) -> bool:
    return excinfo_type.__name__ == "EngineFlashMLACalled"


# ---- SGLang ---------------------------------------------------------------------------------------


def test_sglang_install_patches_the_imported_backend_and_uninstall_restores_it(tmp_path):
    with use_engine_tree(tmp_path, "sglang"):
        backend = importlib.import_module(SGLANG_BACKEND)
        sgl = importlib.import_module("sgl_kernel.flash_mla")
        x = _cpu_inputs()
        engine = backend.FlashMLABackend(num_q_heads=16)
        with pytest.raises(LookupError) as before:
            engine.init_forward_metadata(x.seqlens, x.block_table)
        assert _engine_called(before.type)

        report = sglang_mla.install()
        assert report == Installed("sglang", (f"{SGLANG_BACKEND}.get_mla_metadata",
                                              f"{SGLANG_BACKEND}.flash_mla_with_kvcache"), ())
        assert backend.get_mla_metadata is flash_mla.get_mla_metadata
        assert backend.flash_mla_with_kvcache is flash_mla_with_kvcache_vendored_order  # sgl_kernel's order
        assert sgl.flash_mla_with_kvcache.__module__ == "sgl_kernel.flash_mla"  # the sparse backend keeps FlashMLA
        assert sglang_mla.install() == report  # idempotent

        with pytest.raises(ValueError, match=f"cache_seqlens: {CPU_TENSOR}"):  # SGLang's positional + keyword call
            engine.init_forward_metadata(x.seqlens, x.block_table)
        engine.forward_metadata = (x.md, x.ns, x.block_table)
        with pytest.raises(ValueError, match=f"q: {CPU_TENSOR}"):  # SGLang's keyword call
            engine.forward_decode(x.q.view(2, -1), x.k_cache, x.seqlens, 2, 0.1)
        verify = backend.FlashMLABackend(num_q_heads=16, num_draft_tokens=2)
        verify.forward_metadata = (x.md, x.ns, x.block_table)
        with pytest.raises(ValueError, match=f"q: {CPU_TENSOR}"):
            verify.forward_target_verify(torch.zeros(4, 16 * 576, dtype=torch.bfloat16), x.k_cache, x.seqlens, 2, 0.1)

        assert set(sglang_mla.uninstall()) == set(report.patched)
        assert backend.get_mla_metadata is sgl.get_mla_metadata
        assert backend.flash_mla_with_kvcache is sgl.flash_mla_with_kvcache
        assert sglang_mla.installed() == Installed("sglang", (), ())
        assert sglang_mla.uninstall() == ()


def test_sglang_install_before_the_backend_is_imported_patches_it_at_import(tmp_path):
    with use_engine_tree(tmp_path, "sglang"):
        report = sglang_mla.install()
        assert report.patched == () and report.waiting == (SGLANG_BACKEND,)
        backend = importlib.import_module(SGLANG_BACKEND)
        assert backend.flash_mla_with_kvcache is flash_mla_with_kvcache_vendored_order
        assert backend.get_mla_metadata is flash_mla.get_mla_metadata
        assert backend.__spec__.loader.__class__.__name__ == "SourceFileLoader"  # its own loader again
        assert set(sglang_mla.installed().patched) == {f"{SGLANG_BACKEND}.get_mla_metadata",
                                                        f"{SGLANG_BACKEND}.flash_mla_with_kvcache"}
        sglang_mla.uninstall()
        del sys.modules[SGLANG_BACKEND]
        again = importlib.import_module(SGLANG_BACKEND)  # after uninstall(): the engine's own
        assert again.flash_mla_with_kvcache.__module__ == "sgl_kernel.flash_mla"


def test_sglang_fp8_decode_passes_every_argument_check(tmp_path):
    # SGLang's FP8 path (e4m3 query, 576-byte e4m3 cache, descale_q / descale_k) is accepted: on the CPU it
    # stops only at the CUDA check (the GPU suite runs it).
    with use_engine_tree(tmp_path, "sglang"):
        sglang_mla.install()
        backend = importlib.import_module(SGLANG_BACKEND)
        x = _cpu_inputs(cache_dtype=torch.float8_e4m3fn)
        engine = backend.FlashMLABackend(num_q_heads=16, is_fp8_kvcache=True)
        engine.forward_metadata = (x.md, x.ns, x.block_table)
        for k_scale in (None, torch.full((), 0.5)):
            with pytest.raises(ValueError, match=f"q: {CPU_TENSOR}"):
                engine.forward_decode(x.q.view(2, -1), x.k_cache, x.seqlens, 2, 0.1, k_scale=k_scale)


def test_sglang_launcher_installs_in_the_server_and_in_its_spawned_scheduler(tmp_path):
    engine_tree(tmp_path, "sglang")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PYTHON_DIR), str(tmp_path)]))
    env.pop("OPENMLA_SGLANG", None)
    done = subprocess.run([sys.executable, "-m", "openmla.integrations.sglang.launch_server", "--model-path", "m",
                           "--attention-backend", "flashmla"], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    ours = "openmla.integrations._adapters.flash_mla_with_kvcache_vendored_order"
    assert done.stdout.splitlines() == ["argv --model-path m --attention-backend flashmla", f"scheduler {ours}",
                                        f"server {ours}"], done.stdout + done.stderr


# ---- vLLM -----------------------------------------------------------------------------------------


def test_vllm_install_patches_the_backend_and_the_gate_read_at_call_time(tmp_path):
    with use_engine_tree(tmp_path, "vllm"):
        ops = importlib.import_module(VLLM_OPS)
        backend = importlib.import_module(VLLM_BACKEND)
        platform = importlib.import_module("vllm.platforms").current_platform
        assert backend.FlashMLABackend.supports_combination() == "vllm._flashmla_C is not available"
        with pytest.raises(AssertionError):
            backend.FlashMLAImpl(scale=0.1)

        report = vllm_mla.install()
        assert set(report.patched) == {f"{VLLM_OPS}.is_flashmla_dense_supported"} | {
            f"{VLLM_BACKEND}.{name}" for name in (
                "is_flashmla_dense_supported", "get_mla_metadata", "flash_mla_with_kvcache",
                "get_mla_metadata_dense_fp8", "flash_mla_with_kvcache_fp8", "flash_mla_with_kvcache_fp8_q16")}
        assert set(report.waiting) == {"vllm.attention.ops.flashmla", "vllm.attention.backends.flashmla"}
        assert vllm_mla.install() == report
        # The gate, at call time (local import) and as bound at import; the sparse gate and the
        # ops module's compute functions stay vLLM's (its sparse backend keeps FlashMLA).
        assert backend.FlashMLABackend.supports_combination() is None
        assert backend.FlashMLABackend.supports_combination(use_sparse=True) == "vllm._flashmla_C is not available"
        assert ops.get_mla_metadata is ops._raise_flashmla_unavailable
        impl = backend.FlashMLAImpl(scale=0.1)
        assert backend.flash_mla_with_kvcache is flash_mla.flash_mla_with_kvcache  # FlashMLA's current order

        x = _cpu_inputs()
        with pytest.raises(ValueError, match=f"cache_seqlens: {CPU_TENSOR}"):
            backend.FlashMLAMetadataBuilder(num_q_heads=16)._build_decode(x.seqlens, 1)
        meta, none = backend.get_mla_metadata()  # FlashMLA's current interface: no arguments
        assert isinstance(meta, flash_mla.FlashMLASchedMeta) and none is None
        for scheduler in (x.md, meta):
            with pytest.raises(ValueError, match=f"q: {CPU_TENSOR}"):
                impl._forward_decode(x.q, x.k_cache[:, :, 0], x.block_table, x.seqlens, scheduler, x.layer)

        # The FP8 calls reach the decode (on the CPU: the CUDA check; the GPU suite runs them).
        with pytest.raises(ValueError, match=f"cache_seqlens: {CPU_TENSOR}"):
            backend.get_mla_metadata_dense_fp8(x.seqlens, 16, 1)  # the builder's FP8 call
        fp8 = backend.FlashMLAImpl(scale=0.1, kv_cache_dtype="fp8")
        scheduler = types.SimpleNamespace(tile_scheduler_metadata=x.md, num_splits=x.ns)
        cache = torch.zeros(4, 64, 576, dtype=torch.float8_e4m3fn)
        with pytest.raises(ValueError, match=f"q: {CPU_TENSOR}"):
            fp8._forward_decode(x.q.to(torch.float8_e4m3fn), cache, x.block_table, x.seqlens, scheduler, x.layer)
        with pytest.raises(ValueError, match=f"q: {CPU_TENSOR}"):
            fp8._forward_decode_fp8_q16(x.q, cache, x.block_table, x.seqlens, scheduler, x.layer)

        platform.capability = platform.capability._replace(major=7, minor=5)
        assert backend.FlashMLABackend.supports_combination() == (
            "openmla.flash_mla needs compute capability 8.0 or newer, the device has 7.5")
        platform.cuda = False
        assert not vllm_mla.is_supported()[0]

        assert set(vllm_mla.uninstall()) == set(report.patched)
        assert backend.FlashMLABackend.supports_combination() == "vllm._flashmla_C is not available"
        assert backend.flash_mla_with_kvcache is ops.flash_mla_with_kvcache


def test_vllm_011_descales_on_every_bf16_call_reach_openmla(tmp_path):
    with use_engine_tree(tmp_path, "vllm-0.11"):
        report = vllm_mla.install()
        assert report.patched == ()
        backend = importlib.import_module(VLLM_BACKEND)
        ops = importlib.import_module("vllm.attention.ops.flashmla")
        assert ops.is_flashmla_dense_supported is vllm_mla.is_supported
        assert backend.flash_mla_with_kvcache is flash_mla_with_kvcache_vendored_order  # descales ninth, tenth
        x = _cpu_inputs()
        with pytest.raises(ValueError, match=f"cache_seqlens: {CPU_TENSOR}"):
            backend.FlashMLAMetadataBuilder(num_q_heads=16)._build_decode(x.seqlens, 1)
        impl = backend.FlashMLAImpl(scale=0.1)
        for forward in (impl._forward_decode, impl._forward_decode_positional):
            with pytest.raises(ValueError, match=f"q: {CPU_TENSOR}"):  # descales accepted, ignored
                forward(x.q, x.k_cache[:, :, 0], x.block_table, x.seqlens, x.md, x.ns, x.layer)


@pytest.mark.parametrize("engine,variable,layout,module", [
    (vllm_mla, "OPENMLA_VLLM", "vllm", VLLM_BACKEND), (sglang_mla, "OPENMLA_SGLANG", "sglang", SGLANG_BACKEND)])
def test_plugins_install_only_when_their_variable_is_set(tmp_path, monkeypatch, engine, variable, layout, module):
    with use_engine_tree(tmp_path, layout):
        for value in (None, "", "0"):
            if value is None:
                monkeypatch.delenv(variable, raising=False)
            else:
                monkeypatch.setenv(variable, value)
            engine.plugin()
            assert engine.installed().patched == () and engine.installed().waiting == ()
        monkeypatch.setenv(variable, "1")
        engine.plugin()
        backend = importlib.import_module(module)
        assert f"{module}.flash_mla_with_kvcache" in engine.installed().patched
        assert backend.flash_mla_with_kvcache.__module__.startswith("openmla.")


def test_pyproject_registers_the_plugins_under_the_engines_groups():
    tomllib = pytest.importorskip("tomllib")
    pyproject = PYTHON_DIR.parent / "pyproject.toml"
    if not pyproject.is_file():
        pytest.skip("not a source checkout")
    entry_points = tomllib.loads(pyproject.read_text())["project"]["entry-points"]
    assert entry_points["vllm.general_plugins"] == {"openmla": "openmla.integrations.vllm:plugin"}
    assert entry_points["sglang.plugins"] == {"openmla": "openmla.integrations.sglang:plugin"}
    for group in entry_points.values():
        for target in group.values():
            module, attr = target.split(":")
            assert callable(getattr(importlib.import_module(module), attr))


def test_importing_the_integrations_imports_no_engine():
    code = ("import sys, openmla.integrations, openmla.integrations.sglang, openmla.integrations.vllm; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('sglang', 'sgl_kernel', 'vllm')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(PYTHON_DIR)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_replacement_takes_the_parameter_order_of_the_original():
    def vendored(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata, num_splits,
                 softmax_scale=None, causal=False, descale_q=None, descale_k=None, is_fp8_kvcache=False,
                 indices=None):
        pass

    def flashmla(q, k_cache, block_table, cache_seqlens, head_dim_v, tile_scheduler_metadata, num_splits=None,
                 softmax_scale=None, causal=False, is_fp8_kvcache=False, indices=None):
        pass

    assert flash_mla_with_kvcache_like(vendored) is flash_mla_with_kvcache_vendored_order
    assert flash_mla_with_kvcache_like(flashmla) is flash_mla.flash_mla_with_kvcache
    assert flash_mla_with_kvcache_like(lambda *a, **k: None) is flash_mla.flash_mla_with_kvcache
    assert flash_mla_with_kvcache_like(len) is flash_mla.flash_mla_with_kvcache
    assert list(inspect.signature(flash_mla_with_kvcache_vendored_order).parameters) == list(
        inspect.signature(vendored).parameters)


# ---- the drop-in's engine-facing arguments -------------------------------------------------------

# FlashMLA's flash_mla_with_kvcache parameters in order, as its current interface has them; every
# earlier release's are a prefix of these.
FLASHMLA_PARAMETERS = ["q", "k_cache", "block_table", "cache_seqlens", "head_dim_v", "tile_scheduler_metadata",
                       "num_splits", "softmax_scale", "causal", "is_fp8_kvcache", "indices", "attn_sink",
                       "extra_k_cache", "extra_indices_in_kvcache", "topk_length", "extra_topk_length"]


def test_flash_mla_with_kvcache_keeps_flashmlas_order_and_takes_the_descales_by_keyword():
    parameters = inspect.signature(flash_mla.flash_mla_with_kvcache).parameters
    assert list(parameters)[:len(FLASHMLA_PARAMETERS)] == FLASHMLA_PARAMETERS
    assert parameters["descale_q"].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters["descale_k"].kind is inspect.Parameter.KEYWORD_ONLY


def test_descales_are_accepted_both_or_neither_and_never_read():
    x = _cpu_inputs()
    args = (x.q, x.k_cache, x.block_table, x.seqlens, 512, x.md, x.ns)
    one = torch.ones(1)
    with pytest.raises(ValueError, match=f"q: {CPU_TENSOR}"):  # accepted: the call goes on to q's device
        flash_mla.flash_mla_with_kvcache(*args, descale_q=one, descale_k=torch.full((1,), float("nan")))
    with pytest.raises(ValueError, match="descale_k: FlashMLA takes descale_q and descale_k together"):
        flash_mla.flash_mla_with_kvcache(*args, descale_q=one)
    with pytest.raises(ValueError, match="descale_q: FlashMLA takes descale_q and descale_k together"):
        flash_mla.flash_mla_with_kvcache(*args, descale_k=one)
    with pytest.raises(TypeError, match="descale_q: expected a torch.Tensor"):
        flash_mla.flash_mla_with_kvcache(*args, descale_q=1.0, descale_k=one)
    with pytest.raises(TypeError, match="is_fp8_kvcache: expected a bool, got a tensor"):  # the vendored order
        flash_mla.flash_mla_with_kvcache(*args, 0.1, True, one, one)
    with pytest.raises(ValueError, match=f"q: {CPU_TENSOR}"):
        flash_mla_with_kvcache_vendored_order(*args, 0.1, True, one, one)


def test_fp8_queries_need_the_per_tensor_cache_and_descale_q():
    x = _cpu_inputs()
    fp8_cache = _cpu_inputs(cache_dtype=torch.float8_e4m3fn).k_cache
    one = torch.ones(1)
    for meta in (x.md, flash_mla.get_mla_metadata()[0]):
        with pytest.raises(TypeError, match="q: a float8_e4m3fn query needs a 576-byte per-tensor e4m3 k_cache"):
            flash_mla.flash_mla_with_kvcache(x.q.to(torch.float8_e4m3fn), x.k_cache, x.block_table, x.seqlens, 512,
                                             meta, None, descale_q=one, descale_k=one)
        with pytest.raises(TypeError, match="q: expected dtype bfloat16, float16 or float8_e4m3fn, got float8_e5m2"):
            flash_mla.flash_mla_with_kvcache(x.q.to(torch.float8_e5m2), fp8_cache, x.block_table, x.seqlens, 512,
                                             meta, None, descale_q=one, descale_k=one)
        with pytest.raises(ValueError, match="descale_k: FlashMLA takes descale_q and descale_k together"):
            flash_mla.flash_mla_with_kvcache(x.q.to(torch.float8_e4m3fn), fp8_cache, x.block_table, x.seqlens, 512,
                                             meta, None, descale_q=one)
        with pytest.raises(ValueError, match=f"q: {CPU_TENSOR}"):  # every check passed but the device
            flash_mla.flash_mla_with_kvcache(x.q.to(torch.float8_e4m3fn), fp8_cache, x.block_table, x.seqlens, 512,
                                             meta, None, descale_q=one, descale_k=one)


@pytest.mark.parametrize("dtype", ["uint8", "float8_e4m3fn"])
def test_a_576_byte_cache_is_per_tensor_fp8_and_needs_descale_k(dtype):
    x = _cpu_inputs(cache_dtype=getattr(torch, dtype))
    with pytest.raises(ValueError, match="descale_k: required for a 576-byte per-tensor e4m3 k_cache"):
        flash_mla.flash_mla_with_kvcache(x.q, x.k_cache, x.block_table, x.seqlens, 512, x.md, x.ns)
    with pytest.raises(ValueError, match=f"q: {CPU_TENSOR}"):
        flash_mla.flash_mla_with_kvcache(x.q, x.k_cache, x.block_table, x.seqlens, 512, x.md, x.ns,
                                         descale_q=torch.ones(1), descale_k=torch.ones(1))
    with pytest.raises(ValueError, match="k_cache: is_fp8_kvcache=True expects FlashMLA's 656-byte layout"):
        flash_mla.flash_mla_with_kvcache(x.q, x.k_cache, x.block_table, x.seqlens, 512, x.md, x.ns,
                                         is_fp8_kvcache=True)


def test_vllms_fp8_entry_points_check_their_arguments():
    x = _cpu_inputs(cache_dtype=torch.float8_e4m3fn)
    q8, one = x.q.to(torch.float8_e4m3fn), torch.ones(1)
    with pytest.raises(ValueError, match=f"cache_seqlens: {CPU_TENSOR}"):
        flash_mla.get_mla_metadata_dense_fp8(x.seqlens, 16, 1)
    fp8 = flash_mla.flash_mla_with_kvcache_fp8
    with pytest.raises(ValueError, match="descale_q: flash_mla_with_kvcache_fp8 requires descale_q and descale_k"):
        fp8(q8, x.k_cache, x.block_table, x.seqlens, 512, x.md, x.ns, 0.1, True, descale_k=one)
    with pytest.raises(TypeError, match="q: expected dtype float8_e4m3fn for flash_mla_with_kvcache_fp8, got bfloat16"):
        fp8(x.q, x.k_cache, x.block_table, x.seqlens, 512, x.md, x.ns, 0.1, True, descale_q=one, descale_k=one)
    with pytest.raises(ValueError, match=f"q: {CPU_TENSOR}"):
        fp8(q8, x.k_cache, x.block_table, x.seqlens, 512, x.md, x.ns, 0.1, True, descale_q=one, descale_k=one)
    q16 = flash_mla.flash_mla_with_kvcache_fp8_q16
    with pytest.raises(TypeError, match="q: expected dtype bfloat16 or float16 for flash_mla_with_kvcache_fp8_q16"):
        q16(q8, x.k_cache, x.block_table, x.seqlens, 512, x.md, x.ns, one, softmax_scale=0.1, causal=True)
    with pytest.raises(TypeError, match="descale_k: expected a torch.Tensor"):
        q16(x.q, x.k_cache, x.block_table, x.seqlens, 512, x.md, x.ns, 0.5, softmax_scale=0.1, causal=True)
    with pytest.raises(ValueError, match=f"q: {CPU_TENSOR}"):
        q16(x.q, x.k_cache, x.block_table, x.seqlens, 512, x.md, x.ns, one, softmax_scale=0.1, causal=True)


def test_get_mla_metadata_takes_every_keyword_flashmla_has_had():
    x = _cpu_inputs()
    for kwargs in (dict(num_heads_per_head_k=16, num_heads_k=1),  # the first releases
                   dict(num_q_tokens_per_head_k=16, num_heads_k=1, num_heads_q=16, is_fp8_kvcache=False),
                   dict(num_q_tokens_per_head_k=16, num_heads_k=1, is_fp8_kvcache=True)):
        with pytest.raises(ValueError, match=f"cache_seqlens: {CPU_TENSOR}"):
            flash_mla.get_mla_metadata(cache_seqlens=x.seqlens, **kwargs)
        meta, none = flash_mla.get_mla_metadata(**kwargs)  # no lengths: the current interface's object
        assert isinstance(meta, flash_mla.FlashMLASchedMeta) and none is None
    # topk (sparse attention) is accepted with the older style's arguments: the lengths are still checked.
    with pytest.raises(ValueError, match=f"cache_seqlens: {CPU_TENSOR}"):
        flash_mla.get_mla_metadata(x.seqlens, 16, 1, 16, True, 2048)


# ---- device errors --------------------------------------------------------------------------------


def test_set_check_returns_the_previous_setting():
    first = flash_mla.set_check(True)
    try:
        assert flash_mla.set_check(True) is True
        assert flash_mla.set_check(False) is True
        assert flash_mla.set_check(False) is False
        with pytest.raises(TypeError, match="enabled: expected a bool"):
            flash_mla.set_check(1)
    finally:
        flash_mla.set_check(first)


@pytest.mark.parametrize("value,expected", [("1", True), ("0", False), ("", False), ("off", False)])
def test_check_mode_from_the_environment(value, expected):
    code = "import openmla.flash_mla as f; print(f.set_check(False))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(PYTHON_DIR), OPENMLA_FLASH_MLA_CHECK=value))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(expected)


def test_device_errors_without_workspaces_is_none(monkeypatch):
    monkeypatch.setattr(flash_mla, "_workspaces", {})
    assert flash_mla.device_errors() is openmla.DeviceError.NONE or flash_mla.device_errors() == 0
    assert flash_mla.device_errors(stream=12345) == openmla.DeviceError.NONE
    with pytest.raises(TypeError, match="stream"):
        flash_mla.device_errors(stream="default")


def test_flash_mla_device_error_carries_the_bits():
    bits = openmla.DeviceError.PAGE_ID_OUT_OF_RANGE | openmla.DeviceError.NEGATIVE_SEQLEN
    error = flash_mla.FlashMLADeviceError(bits)
    assert isinstance(error, RuntimeError) and error.errors == bits
    assert "page_id_out_of_range" in str(error) and "negative_seqlen" in str(error)
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is flash_mla.FlashMLADeviceError and again.errors == bits and str(again) == str(error)


# ---- documentation --------------------------------------------------------------------------------


def test_the_integrations_are_documented():
    import openmla.integrations as integrations

    for module in (integrations, sglang_mla, vllm_mla):
        assert (module.__doc__ or "").strip(), module.__name__
        for name in module.__all__:
            assert (inspect.getdoc(getattr(module, name)) or "").strip(), f"{module.__name__}.{name}"
    launcher = PYTHON_DIR / "openmla" / "integrations" / "sglang" / "launch_server.py"
    assert "python -m openmla.integrations.sglang.launch_server" in ast.get_docstring(ast.parse(launcher.read_text()))
