"""openmla.bench without a GPU: arguments, peer discovery with peers absent, the table, the plot and
the progress line on synthetic results."""

from __future__ import annotations

import io
import sys

import pytest

from openmla.bench import cli, peers, report


def test_arguments_and_configurations():
    args = cli.build_parser().parse_args([])
    assert len(cli.configs(args)) == len(cli.DEFAULT_SHAPES) * 2
    quick = cli.build_parser().parse_args(["--quick", "--format", "bf16"])
    assert [c.fmt for c in cli.configs(quick)] == ["bf16"] * len(cli.QUICK_SHAPES)
    shaped = cli.build_parser().parse_args(["--shape", "2,1,16,100", "--shape", "4,2,64,300", "--format", "fp8"])
    cfgs = cli.configs(shaped)
    assert [(c.b, c.s_q, c.h_q, c.s_k, c.fmt) for c in cfgs] == [(2, 1, 16, 100, "fp8"), (4, 2, 64, 300, "fp8")]
    assert cfgs[1].causal and not cfgs[0].causal
    assert cfgs[0].label == "b=2 s_q=1 h_q=16 s_k=100 fp8"
    host = cli.build_parser().parse_args(["--host-overhead", "--calls", "50", "--json", "x.json"])
    assert host.host_overhead and host.calls == 50 and host.json == "x.json"


@pytest.mark.parametrize("argv", [["--shape", "1,2,3"], ["--shape", "1,1,12,64"], ["--shape", "1,17,16,64"],
                                  ["--format", "int4"], ["--shape", "a,b,c,d"]])
def test_bad_arguments_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(argv)
    assert "--" in capsys.readouterr().err


def test_peers_that_do_not_import_are_named_not_errors():
    def importer(name):
        if name == "openmla":
            return object()
        raise ImportError(f"No module named '{name.split('.')[0]}'")

    found, missing = peers.discover(peers.all_peers(), importer=importer)
    assert [p.name for p in found] == ["openmla"]
    assert set(missing) == {"flashmla", "flashinfer-fa3", "flashinfer-fa2", "vllm-triton", "sglang-triton"}
    assert "flash_mla does not import (ImportError: No module named 'flash_mla')" == missing["flashmla"]
    text = report.format_missing(missing)
    assert "peers not timed" in text and "flashinfer-fa2" in text


def test_peer_selection_and_a_fallback_module():
    seen = []

    def importer(name):
        seen.append(name)
        if name in ("openmla", "vllm.attention.ops.triton_decode_attention"):
            return object()
        raise ImportError(name)

    found, missing = peers.discover(peers.all_peers(), wanted=["vllm-triton"], importer=importer)
    assert [p.name for p in found] == ["openmla", "vllm-triton"] and missing == {}
    assert "flash_mla" not in seen  # peers not asked for are not imported


def test_kernels_are_called_with_the_parameters_their_signature_names():
    def new_style(q, k_buffer, v_buffer, o, lse, req_to_token, b_seq_len, attn_logits, num_kv_splits, sm_scale,
                  page_size=1, logit_cap=0.0):
        calls.append((q, lse, page_size))

    def old_style(q, k_buffer, v_buffer, o, req_to_token, b_seq_len, attn_logits, num_kv_splits, sm_scale,
                  page_size=1):
        calls.append((q, None, page_size))

    calls = []
    values = dict(q="q", k_buffer="k", v_buffer="v", o="o", lse="lse", req_to_token="t", b_seq_len="s",
                  attn_logits="l", num_kv_splits=4, sm_scale=0.1, page_size=64)
    peers._call_by_name(new_style, values)()
    peers._call_by_name(old_style, values)()
    assert calls == [("q", "lse", 64), ("q", None, 64)]
    with pytest.raises(TypeError, match="sinks"):
        peers._call_by_name(lambda q, sinks: None, {"q": 1})


def _rows():
    return [
        {"config": "b=1 s_q=1 h_q=16 s_k=4096 bf16", "sets": 64, "openmla_rel_err": 2e-3,
         "openmla": {"status": "ok", "us": 10.0}, "flashmla": {"status": "ok", "us": 20.0, "rel_err": 1e-3},
         "flashinfer-fa3": {"status": "ok", "us": 5.0, "rel_err": 3e-3}},
        {"config": "b=1 s_q=1 h_q=16 s_k=4096 fp8", "sets": 64, "openmla_rel_err": 4e-2,
         "openmla": {"status": "ok", "us": 8.0}, "flashmla": {"status": "FlashMLA has no dense FP8 decode"},
         "flashinfer-fa3": {"status": "error: RuntimeError: boom"}},
    ]


def test_ratio_table_on_synthetic_timings():
    text = report.format_table(_rows(), ["openmla", "flashmla", "flashinfer-fa3"])
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["config", "R", "openmla"]
    assert "2.00x" in lines[2] and "0.50x" in lines[2]  # 20/10 and 5/10: peer time over OpenMLA's
    assert "3.0e-03" in lines[2]  # the largest error of the row
    assert "n/a" in lines[3]
    assert "n/a  flashmla: FlashMLA has no dense FP8 decode" in text
    assert "n/a  flashinfer-fa3: error: RuntimeError: boom" in text
    assert report.ratio(None, 1.0) is None and report.ratio(3.0, 2.0) == 1.5


def test_json_and_plot(tmp_path):
    doc = {"rows": _rows(), "nan": float("nan")}
    report.write_json(str(tmp_path / "r.json"), doc)
    assert '"flashmla"' in (tmp_path / "r.json").read_text()
    png = tmp_path / "r.png"
    why = report.plot(_rows(), ["openmla", "flashmla", "flashinfer-fa3"], str(png), title="synthetic")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert why == "matplotlib is not installed" and not png.exists()
    else:
        assert why is None and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_progress_line_without_tqdm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm fails
    stream = io.StringIO()
    progress = report.Progress(2, stream)
    progress.step("first")
    progress.step("second")
    progress.close()
    assert stream.getvalue() == "[1/2] first\n[2/2] second\n"


def test_main_without_a_gpu_says_so_and_succeeds(capsys):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the GPU run covers main()")
    assert cli.main(["--quick"]) == 0
    assert "no CUDA GPU" in capsys.readouterr().err
