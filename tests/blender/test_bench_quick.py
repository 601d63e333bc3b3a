"""``tools/bench.py --quick`` runs to the end in this Blender, so the benchmark never rots.

No timing is asserted: only that every section ran and produced its table.
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT, built_zip


def test_quick_bench_runs_every_section(tmp_path):
    env = dict(os.environ, SINEW_ZIP=str(built_zip("linux-x64")),
               BLENDER_USER_RESOURCES=str(tmp_path / "user"))
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "bench.py"), "--quick", "--out", str(tmp_path)],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = (tmp_path / "bench.md").read_text()
    assert "Traceback" not in report
    sys.path.insert(0, str(ROOT))
    from tools.bench import SECTIONS

    for title, _module in SECTIONS:
        section = report.split(f"## {title}", 1)
        assert len(section) == 2, f"section missing: {title}"
        assert "| ---" in section[1].split("## ", 1)[0], f"no table in: {title}"
    assert (tmp_path / "bench_springs.png").is_file()
