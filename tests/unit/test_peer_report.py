"""The peer benchmark's floor lines: TTAC against the gated and the scheduled B0 floors, paired by round."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hack.bench.peer.__main__ import merge
from hack.bench.peer.report import floor_lines


def results(b0: list[dict[str, Any]], ttacs: list[float], workers: int = 1000) -> dict[str, Any]:
    runs = [{"operator": "ours", "setting": "defaults", "round": index, "b3": [{"workers": workers, "ttac": ttac}]}
            for index, ttac in enumerate(ttacs)]
    meta = {"date": "2026-12-02 03:53 UTC", "rounds": len(ttacs), "settings": ["defaults"],
            "sizes": {"defaults": [workers]}, "flags": {"defaults": {"go": "", "ours": ""}}, "b4_rates": [],
            "b4_settings": [], "argv": [], "notes": []}
    return {"meta": meta, "b0": b0, "runs": runs}


B0_LINE = ("B0 raw pod-create ceiling C_max{label}: 400 (300-500) creates/s (2,000 worker-shaped, scheduling-gated "
           "Pods, 32 in flight, no operator running)")
TWO_ROUNDS = [{"round": 0, "rate": 500.0, "scheduled_rate": 250.0},
              {"round": 1, "rate": 300.0, "scheduled_rate": 150.0}]


def test_floor_lines_pair_each_round_with_its_own_scheduled_floor() -> None:
    # Round 0: 5 s against 1000 / 250 = 4 s is 1.25x; round 1: 7 s against 1000 / 150 s is 1.05x.
    assert floor_lines(results(TWO_ROUNDS, [5.0, 7.0])) == [
        B0_LINE.format(label="") + "; C_sched, the same Pods as our reconciler emits them, bound and started "
        "meanwhile: 200 (150-250) creates/s.",
        "ours, defaults, W=1000: TTAC 6.00 (5.00-7.00) s = 2.40x the floor W/C_max = 2.50 s, 1.20x the floor "
        "W/C_sched = 5.00 s (paired by round: 1.05 | 1.15 | 1.25) of the same run.",
    ]


def test_floor_lines_of_results_without_the_scheduled_floor() -> None:
    b0 = [{"round": 0, "rate": 500.0}, {"round": 1, "rate": 300.0}]
    assert floor_lines(results(b0, [5.0, 7.0])) == [
        B0_LINE.format(label="") + ".",
        "ours, defaults, W=1000: TTAC 6.00 (5.00-7.00) s = 2.40x the floor W/C_max = 2.50 s of the same run.",
    ]


def test_merged_results_pair_rounds_within_each_file(tmp_path: Path) -> None:
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    first.write_text(json.dumps(results(TWO_ROUNDS, [5.0, 7.0])))
    # The second file's rounds 0 and 1 must pair with its own B0 (scheduled 100/s, then 200/s).
    second.write_text(json.dumps(results([{"round": 0, "rate": 400.0, "scheduled_rate": 100.0},
                                          {"round": 1, "rate": 400.0, "scheduled_rate": 200.0}], [12.0, 4.0])))
    lines = floor_lines(merge([first, second]))
    assert lines[1] == ("ours, defaults, W=1000: TTAC 6.00 (5.00-7.00) s = 2.40x the floor W/C_max = 2.50 s, 1.20x "
                        "the floor W/C_sched = 5.00 s (paired by round: 1.05 | 1.15 | 1.25) of the same run (run 1).")
    assert lines[2] == ("B0 raw pod-create ceiling C_max (run 2): 400 creates/s (2,000 worker-shaped, "
                        "scheduling-gated Pods, 32 in flight, no operator running); C_sched, the same Pods as our "
                        "reconciler emits them, bound and started meanwhile: 150 (100-200) creates/s.")
    assert lines[3] == ("ours, defaults, W=1000: TTAC 8.00 (4.00-12.00) s = 3.20x the floor W/C_max = 2.50 s, 1.20x "
                        "the floor W/C_sched = 6.67 s (paired by round: 0.80 | 1.00 | 1.20) of the same run (run 2).")


def test_merged_results_merged_again_keep_each_file_paired_with_its_own_floors(tmp_path: Path) -> None:
    # What `--render hack/bench/results/peer-rounds.json` does with the rounds a merged render wrote.
    first, second, again = tmp_path / "first.json", tmp_path / "second.json", tmp_path / "merged.json"
    first.write_text(json.dumps(results(TWO_ROUNDS, [5.0, 7.0])))
    second.write_text(json.dumps(results([{"round": 0, "rate": 400.0, "scheduled_rate": 100.0},
                                          {"round": 1, "rate": 400.0, "scheduled_rate": 200.0}], [12.0, 4.0])))
    merged = merge([first, second])
    again.write_text(json.dumps(merged))
    assert floor_lines(merge([again])) == floor_lines(merged)
    third = tmp_path / "third.json"
    third.write_text(json.dumps(results(TWO_ROUNDS, [5.0, 7.0])))
    lines = floor_lines(merge([again, third]))
    assert lines[:4] == floor_lines(merged)
    assert lines[4] == B0_LINE.format(label=" (run 3)") + ("; C_sched, the same Pods as our reconciler emits them, "
                                                          "bound and started meanwhile: 200 (150-250) creates/s.")
