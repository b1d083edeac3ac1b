"""The end-of-run time and skip lines and the required-tier check (tests/skip_summary.py), on small test trees run by
pytest itself (pytester): every kind of skip is named with its reason, and a required tier that did not run
fails the session, whether its tests were skipped or none was selected."""

from __future__ import annotations

import pytest

from tests.skip_summary import Outcomes, missing_tiers, skip_line, tier_of, time_lines

pytest_plugins = ["pytester"]

TREE = {
    "tests/unit/test_sample_unit.py": """
import pytest

def test_runs():
    pass

def test_needs_kubectl():
    pytest.skip("kubectl is not installed")

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_failure():
    assert False
""",
    "tests/webhook/test_sample_webhook.py": """
import pytest

def test_runs():
    pass

@pytest.mark.slow
def test_deselected():
    pytest.skip("never reached: deselected")
""",
    "tests/e2e/conftest.py": """
import pytest

@pytest.fixture
def real_node():
    pytest.skip("no real node here: not root")
""",
    "tests/e2e/test_sample_e2e.py": """
def test_one(real_node):
    pass

def test_two(real_node):
    pass
""",
    "tests/fuzz/test_sample_fuzz.py": """
import pytest

pytest.skip("hypothesis is not installed", allow_module_level=True)

def test_never():
    pass
""",
    "tests/integration/test_sample_integration.py": """
import pytest

@pytest.mark.slow
def test_deselected():
    pass
""",
}
PLUGINS = ("-p", "tests.skip_summary", "-p", "no:aiohttp", "-p", "no:asyncio", "-p", "no:hypothesispytest")
LINE = ("skipped: tests/e2e (all 2 tests: no real node here: not root); tests/fuzz (all 1 test: hypothesis is not "
        "installed); tests/unit/test_sample_unit.py (1 test: kubectl is not installed)")


@pytest.fixture
def tree(pytester: pytest.Pytester) -> pytest.Pytester:
    for path, text in TREE.items():
        pytester.path.joinpath(path).parent.mkdir(parents=True, exist_ok=True)
        pytester.path.joinpath(path).write_text(text)
    pytester.makeini("[pytest]\nmarkers =\n    slow: deselected below\n")
    return pytester


def run(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, required: str | None) -> pytest.RunResult:
    if required is None:
        monkeypatch.delenv("REQUIRE_TIERS", raising=False)
    else:
        monkeypatch.setenv("REQUIRE_TIERS", required)
    return pytester.runpytest(*PLUGINS, "-m", "not slow", "tests")


def test_the_line_names_each_skipped_tier_and_file_with_its_reason(tree: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    result = run(tree, monkeypatch, None)
    result.assert_outcomes(passed=2, skipped=4, xfailed=1, deselected=2)
    assert result.ret == pytest.ExitCode.OK
    assert [line for line in result.outlines if line.startswith("skipped:")] == [LINE]
    assert not any("REQUIRE_TIERS" in line for line in result.outlines)


@pytest.mark.parametrize(("required", "missing"), [
    pytest.param("unit, webhook", None, id="tiers that ran"),
    pytest.param("unit,e2e", "tests/e2e (2 tests: no real node here: not root)", id="a tier whose tests skip"),
    pytest.param("fuzz", "tests/fuzz (1 test: hypothesis is not installed)", id="a tier skipped at collection"),
    pytest.param("webhook,integration", "tests/integration (no test ran)", id="a tier deselected"),
    pytest.param("unit,faults", "tests/faults (no test ran)", id="a tier that does not exist"),
])
def test_a_required_tier_that_did_not_run_fails_the_session(tree: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                             required: str, missing: str | None) -> None:
    result = run(tree, monkeypatch, required)
    assert [line for line in result.outlines if line.startswith("skipped:")] == [LINE], "said either way"
    if missing is None:
        assert result.ret == pytest.ExitCode.OK
        assert not any("REQUIRE_TIERS" in line for line in result.outlines)
    else:
        assert result.ret == pytest.ExitCode.TESTS_FAILED
        assert [line for line in result.outlines if line.startswith("REQUIRE_TIERS=")] == [
            f"REQUIRE_TIERS={required.replace(' ', '')}: no test ran in {missing}"]


def test_a_failing_session_keeps_its_status_and_nothing_skipped_is_said(pytester: pytest.Pytester,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    pytester.path.joinpath("tests/unit").mkdir(parents=True)
    pytester.path.joinpath("tests/unit/test_failing.py").write_text("def test_fails():\n    assert False\n")
    monkeypatch.setenv("REQUIRE_TIERS", "unit,e2e")
    result = pytester.runpytest(*PLUGINS, "tests")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    assert "skipped: nothing" in result.outlines
    assert "REQUIRE_TIERS=unit,e2e: no test ran in tests/e2e (no test ran)" in result.outlines


@pytest.mark.parametrize(("nodeid", "tier"), [
    ("tests/e2e/test_pi.py::test_x[a/b]", "e2e"),
    ("tests/unit/reconciler/test_sync.py::test_y", "unit"),
    ("tests/test_top.py::test_z", ""),
    ("elsewhere/test_w.py", ""),
])
def test_tier_of(nodeid: str, tier: str) -> None:
    assert tier_of(nodeid) == tier


def test_a_test_both_skipped_and_reported_counts_as_skipped() -> None:
    outcomes = Outcomes()
    outcomes.record("tests/e2e/test_a.py::test_a", skipped=True, reason="no node")
    outcomes.record("tests/e2e/test_a.py::test_a", skipped=False)  # its teardown failed after the skip
    assert skip_line(outcomes) == "skipped: tests/e2e (all 1 test: no node)"
    assert missing_tiers(outcomes, ["e2e"]) == {"e2e": "1 test: no node"}


def test_time_lines_add_up_each_tier_and_name_the_slowest_tests() -> None:
    durations = {"tests/e2e/test_pi.py::test_a": 700.0, "tests/e2e/test_pi.py::test_b": 20.0,
                 "tests/unit/test_x.py::test_c": 1.5, "tests/unit/test_x.py::test_d": 30.0, "tests/test_top.py::t": 2.0}
    assert time_lines(durations, slowest=3) == [
        "time by tier: e2e 12.0 min, unit 32 s, (no tier) 2.0 s",
        "slowest 3 tests:",
        "   11.7 min  tests/e2e/test_pi.py::test_a",
        "       30 s  tests/unit/test_x.py::test_d",
        "       20 s  tests/e2e/test_pi.py::test_b",
    ]
    assert time_lines({}) == []


def test_a_run_prints_the_time_by_tier_before_the_skip_line(tree: pytest.Pytester,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    lines = run(tree, monkeypatch, None).outlines
    by_tier = [i for i, line in enumerate(lines) if line.startswith("time by tier: ")]
    assert len(by_tier) == 1
    assert lines[by_tier[0] + 1].startswith("slowest ")
    assert by_tier[0] < lines.index(LINE)
