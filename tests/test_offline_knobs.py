"""Knobs of a C++/CUDA source: which are found, where, with which candidate values, and rewriting only them."""

from __future__ import annotations

import re

import pytest

from evoteam.roles.offline.knobs import Knob, apply, current_config, describe, find_knobs, mask

pytestmark = pytest.mark.unit

SOURCE = """#include <cstdint>
// #define BLOCK 64   (a comment: not a knob)
/* #define TILE 8 */
#ifndef BLOCK
#define BLOCK 256
#endif
#define N 1024
#define WARP_SIZE 32
#define block_count 4
#define TILE_M (16)
constexpr int kNumThreads = 128;
static constexpr unsigned VEC_WIDTH{4};
constexpr int kRows = 7;
const char* banner = "#define UNROLL 4";
template <int ITEMS_PER_THREAD = 4, typename T = float, int BM = 64>
__global__ void __launch_bounds__(256, 2) kernel(T* x) {
  #pragma unroll 4
  for (int i = 0; i < 8; ++i) x[i] = 0;
  #pragma omp parallel for num_threads(8) schedule(dynamic, 16)
  for (int i = 0; i < 8; ++i) x[i] = 1;
}
"""


def by_name(knobs: list[Knob]) -> dict[str, Knob]:
    return {k.name: k for k in knobs}


def ints(knob: Knob) -> list[int]:
    assert all(isinstance(v, int) for v in knob.values)
    return [int(v) for v in knob.values]


def test_every_kind_of_knob_is_found_with_its_place_and_value() -> None:
    knobs = by_name(find_knobs(SOURCE, cuda=True))
    found = {name: (k.kind, k.current, [s.line for s in k.spots]) for name, k in knobs.items()}
    assert found == {
        "BLOCK": ("define", 256, [5]),
        "TILE_M": ("define", 16, [10]),
        "kNumThreads": ("constexpr", 128, [11]),
        "VEC_WIDTH": ("constexpr", 4, [12]),
        "ITEMS_PER_THREAD": ("template", 4, [15]),
        "BM": ("template", 64, [15]),
        "launch_bounds@L16": ("launch_bounds", 256, [16]),
        "launch_min_blocks@L16": ("launch_min_blocks", 2, [16]),
        "unroll@L17": ("unroll", 4, [17]),
        "omp_threads@L19": ("omp_threads", 8, [19]),
        "omp_chunk@L19": ("omp_chunk", 16, [19]),
    }
    for knob in knobs.values():
        [spot] = knob.spots
        assert SOURCE[spot.start : spot.end] == spot.text == str(knob.current)


def test_comments_strings_problem_sizes_and_hardware_constants_are_not_knobs() -> None:
    names = set(by_name(find_knobs(SOURCE)))
    assert not names & {"N", "WARP_SIZE", "block_count", "kRows", "TILE", "UNROLL"}
    masked = mask(SOURCE)
    assert len(masked) == len(SOURCE) and masked.count("\n") == SOURCE.count("\n")
    assert "#define BLOCK 64" not in masked and "#define UNROLL 4" not in masked
    assert "#define BLOCK 256" in masked


def test_generated_domains_hold_the_current_value_and_fit_the_knob() -> None:
    cuda = by_name(find_knobs(SOURCE, cuda=True))
    cpu = by_name(find_knobs(SOURCE, cuda=False))
    for knob in [*cuda.values(), *cpu.values()]:
        assert knob.current in knob.values and knob.values == sorted(set(knob.values)), knob
        assert 2 <= len(knob.values) <= 9, knob
    assert cuda["unroll@L17"].values == [1, 2, 3, 4, 5, 6, 7, 8]
    assert cuda["launch_min_blocks@L16"].values == [1, 2, 3, 4, 5, 6, 7, 8]
    for name in ("BLOCK", "kNumThreads"):  # thread counts on CUDA: multiples of 32 up to 1024
        assert all(v % 32 == 0 and 32 <= v <= 1024 for v in ints(cuda[name])), cuda[name].values
    assert all(v >= 256 and v % 32 == 0 for v in ints(cuda["launch_bounds@L16"]))  # the bound never shrinks
    assert cuda["VEC_WIDTH"].values == [1, 2, 4, 8, 16]
    assert cpu["TILE_M"].values == [2, 4, 8, 16, 32, 64, 128]  # powers of two from current/8 to 8·current
    assert cpu["BLOCK"].values == [32, 64, 128, 256, 512, 1024, 2048]  # not a thread count on the CPU
    assert cpu["ITEMS_PER_THREAD"].values == [1, 2, 4, 8, 16, 32]


def test_apply_rewrites_exactly_the_knobs_spots_and_nothing_else() -> None:
    knobs = find_knobs(SOURCE, cuda=True)
    config = {k.name: k.values[-1] if k.values[-1] != k.current else k.values[0] for k in knobs}
    out = apply(SOURCE, config, knobs)
    spot_lines = {s.line for k in knobs for s in k.spots}
    changed = {n for n, (a, b) in enumerate(zip(SOURCE.splitlines(), out.splitlines(), strict=True), 1) if a != b}
    assert changed == spot_lines
    for a, b in zip(SOURCE.splitlines(), out.splitlines(), strict=True):
        assert re.sub(r"\d+", "#", a) == re.sub(r"\d+", "#", b)  # on changed lines only the numbers differ
    rewritten = by_name(find_knobs(out, cuda=True))
    assert {name: k.current for name, k in rewritten.items()} == config
    assert apply(out, {k.name: k.current for k in knobs if k.current is not None}) == SOURCE  # and back


def test_the_source_s_own_values_leave_it_unchanged() -> None:
    knobs = find_knobs(SOURCE)
    assert apply(SOURCE, current_config(knobs), knobs) == SOURCE
    assert apply(SOURCE, {}) == SOURCE


def test_a_name_defined_twice_is_one_knob_with_two_spots() -> None:
    source = "#if defined(FAST)\n#define TILE 32\n#else\n#define TILE 16\n#endif\nint t = TILE;\n"
    [knob] = find_knobs(source)
    assert knob.name == "TILE" and knob.current == 32 and [s.line for s in knob.spots] == [2, 4]
    assert apply(source, {"TILE": 64}, [knob]) == source.replace("32", "64").replace("16", "64")


def test_declared_knobs_override_found_values_and_new_names_become_defines() -> None:
    declared: dict[str, list[int | str]] = {"BLOCK": [128, 256, 512], "SCHEDULE": ["static", "dynamic"]}
    knobs = by_name(find_knobs(SOURCE, declared=declared))
    assert knobs["BLOCK"].values == [128, 256, 512] and knobs["BLOCK"].declared and knobs["BLOCK"].kind == "define"
    schedule = knobs["SCHEDULE"]
    assert schedule.kind == "declared" and schedule.spots == [] and schedule.current is None
    assert current_config(list(knobs.values()))["SCHEDULE"] == "static"
    out = apply(SOURCE, {"BLOCK": 512, "SCHEDULE": "dynamic"}, list(knobs.values()))
    assert out == "#define SCHEDULE dynamic\n" + SOURCE.replace("#define BLOCK 256", "#define BLOCK 512")
    with pytest.raises(ValueError, match="declared with no values"):
        find_knobs(SOURCE, declared={"BLOCK": []})


def test_a_declared_knob_the_source_defines_under_any_name_is_rewritten_in_place() -> None:
    source = "#define PASSES 8\nconstexpr int kRepeat = 4;\nint f() { return PASSES * kRepeat; }\n"
    knobs = by_name(find_knobs(source, declared={"PASSES": [1, 8], "kRepeat": [1, 4]}))
    assert knobs["PASSES"].kind == "define" and knobs["PASSES"].current == 8
    assert knobs["kRepeat"].kind == "constexpr" and knobs["kRepeat"].current == 4
    out = apply(source, {"PASSES": 1, "kRepeat": 1}, list(knobs.values()))
    assert out == "#define PASSES 1\nconstexpr int kRepeat = 1;\nint f() { return PASSES * kRepeat; }\n"


def test_apply_refuses_unknown_knobs_and_knobs_of_another_source() -> None:
    knobs = find_knobs(SOURCE)
    with pytest.raises(ValueError, match="unknown knobs"):
        apply(SOURCE, {"NOT_A_KNOB": 3}, knobs)
    with pytest.raises(ValueError, match="does not match this source"):
        apply("\n" + SOURCE, {"BLOCK": 128}, knobs)


def test_describe_is_one_short_line() -> None:
    assert describe({"BLOCK": 256, "SCHEDULE": "static"}) == "BLOCK=256 SCHEDULE=static"
