"""The README's stand-still counts and their p-values, recomputed from the committed metrics
bundles of E2 and E3 (docs/ab): a changed bundle or a changed sentence fails here."""

from __future__ import annotations

import json
import os
import tarfile

from scipy.stats import fisher_exact

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
E2 = os.path.join(ROOT, "docs", "ab", "e2_sac_cpu", "metrics.tar.gz")
E3 = os.path.join(ROOT, "docs", "ab", "e3_v4_v5_cpu", "metrics.tar.gz")
SAC = "algorithm-sac_algorithm.updates_per_step-20_agent.target_entropy--1"
WINDOW = range(6000, 10001, 1000)  # after Hopper's 5000 random steps, to the A/Bs' end
LIMIT = 1000  # Hopper's episode length limit


def full_length(bundle: str, variant: str) -> tuple[int, int]:
    """(evaluations in WINDOW whose every episode ran LIMIT steps, evaluations in WINDOW) over
    the variant's seeds, read from each run's metrics.jsonl in the bundle."""
    full = total = 0
    with tarfile.open(bundle) as tar:
        for member in tar.getmembers():
            parts = member.name.split("/")
            if parts[-1] != "metrics.jsonl" or parts[-3] != variant:
                continue
            f = tar.extractfile(member)
            assert f is not None
            for line in f.read().decode().splitlines():
                row = json.loads(line)
                if row.get("eval/return_mean") is not None and row["step"] in WINDOW:
                    total += 1
                    full += row["eval/episode_length_mean"] >= LIMIT
    return full, total


def p_value(a: tuple[int, int], b: tuple[int, int]) -> str:
    """Fisher's exact test of a's full-length share against b's, as the README rounds it."""
    p = fisher_exact([[a[0], a[1] - a[0]], [b[0], b[1] - b[0]]]).pvalue
    return f"{p:.2g}"


def test_the_readmes_stand_still_counts_are_the_bundles() -> None:
    sac = full_length(E2, SAC)
    v4 = full_length(E3, "model-gaussian_env.version-v4")
    v5 = full_length(E3, "model-gaussian_env.version-v5")
    assert v4 == full_length(E2, "model-gaussian")  # E3's v4 arm is E2's Gaussian arm
    assert sac[1] == v4[1] == v5[1] == 25  # five seeds, five evaluations each
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = " ".join(f.read().split())
    for sentence in [
        f"SAC alone at MBPO's 20 updates per step {sac[0]} of {sac[1]}",
        f"Hopper-v4 {v4[0]} of {v4[1]} (p = {p_value(v4, sac)} against SAC)",
        f"{v5[0]} of {v5[1]} (p = {p_value(v5, sac)} against SAC, p = {p_value(v5, v4)} "
        "against v4)",
    ]:
        assert sentence in readme
