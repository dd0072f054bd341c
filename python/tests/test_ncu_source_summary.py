"""scripts/ncu_source_summary.py on the Nsight Compute export kept with the 2026-12-02 record."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = ROOT / "bench/results/2026-12-02-narrow-producer/run4_sass_samples_e4m3.csv.xz"


def test_summary_counts_samples_regions_and_top_instructions():
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts/ncu_source_summary.py"), str(DATA), "--top", "2",
         "--regions", "QK:724-1001,PV:1540-1825"],
        check=True, capture_output=True, text=True).stdout
    assert "32831 samples over 3296 instructions" in out
    assert "by opcode: BRA 21.1%, F2FP 20.6%, HGMMA 14.6%" in out
    assert "region QK [724, 1001): 8966 samples, 27.3%" in out
    assert "region PV [1540, 1825): 7716 samples, 23.5%" in out
    top = out.split("top 2 instructions")[1].splitlines()[1:]
    assert top[0].split()[:3] == ["721", "3614", "131072"]  # the consumers' wait on `ready`
    assert len(top) == 2
