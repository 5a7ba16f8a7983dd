"""Roles: the built-ins render, templates are strict, TOML roles add and override, bad role files fail clearly."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from conftest import DATA, KERNELS
from evoteam.gpu_bench.build.cuda.constraints import Constraints
from evoteam.gpu_bench.schema import Binding, Language, Workload
from evoteam.gpu_bench.task import KernelTask, load_workloads
from evoteam.roles.builtin import BUILTIN_NAMES, builtin_role, builtin_roles, parse_verdict, prompt_name
from evoteam.roles.prompt import (
    KNOWN_VARIABLES,
    WORKLOAD_ROWS,
    PromptError,
    package_prompt,
    render,
    task_prompt,
    template_variables,
    workloads_table,
)
from evoteam.roles.role_file import RoleFileError, load_role_file, team_roles
from evoteam.roles.spec import RoleSpec

pytestmark = pytest.mark.unit


def scale_add_task() -> KernelTask:
    return KernelTask(
        name="scale_add",
        source=KERNELS / "honest.cpp",
        language=Language.CPP,
        binding=Binding.C,
        entry="scale_add",
        definition=DATA / "scale_add.json",
        workloads=DATA / "scale_add.jsonl",
        constraints=Constraints(max_registers=64, no_spills=True),
    )


def variables() -> dict[str, str]:
    task = scale_add_task()
    prompt = task_prompt(task, task.load_definition(), load_workloads(task.workloads), "- [plan] fuse")
    return prompt.variables("Optimizer", ["view", "evaluate"], "focus on the large workload")


def test_the_builtins_are_the_seven_roles_with_their_tools() -> None:
    roles = builtin_roles()
    assert list(roles) == [
        "Optimizer",
        "Debugger",
        "Profiling Scientist",
        "Knowledge Integrator",
        "Disciplinarian",
        "Explorer",
        "Reviewer",
    ]
    assert [n for n, r in roles.items() if r.can_veto] == ["Disciplinarian"]
    assert "submit_candidate" in roles["Optimizer"].tools and "submit_candidate" in roles["Explorer"].tools
    assert "write" not in roles["Reviewer"].tools and "write" not in roles["Disciplinarian"].tools
    assert "profile" in roles["Profiling Scientist"].tools
    assert roles["Knowledge Integrator"].tools == ["view", "list", "history", "diff", "read_knowledge", "write_note"]
    roles["Optimizer"].tools.clear()
    assert builtin_role("Optimizer").tools  # callers get copies
    with pytest.raises(KeyError, match="Profiling Scientist"):
        builtin_role("Janitor")


@pytest.mark.parametrize("name", BUILTIN_NAMES)
def test_each_builtin_mission_renders_with_no_variable_left(name: str) -> None:
    role = builtin_role(name)
    text = render(role.mission, variables(), name)
    assert text.startswith(f"# Mission: {name}\n")
    assert "scale_add" in text
    assert not re.search(r"\$[A-Za-z_{]", text), text
    assert package_prompt(prompt_name(name)) == role.mission


def test_the_disciplinarian_mission_lists_the_active_constraints() -> None:
    text = render(builtin_role("Disciplinarian").mission, variables())
    assert "- at most 64 registers per thread\n- no register spills" in text
    assert "VERDICT: veto" in text


@pytest.mark.parametrize("name", ["system", "task", "knowledge"])
def test_shared_templates_render(name: str) -> None:
    text = render(package_prompt(name), variables(), name)
    assert not re.search(r"\$[A-Za-z_{]", text)


def test_task_description_holds_the_definition_and_workloads() -> None:
    text = render(package_prompt("task"), variables())
    assert "# The task: scale_add" in text
    assert "Language: cpp. Target: cpu." in text and "`honest.cpp`" in text and "`scale_add`" in text
    assert "scale_add_f32 (elementwise)" in text
    assert "inputs: x[n] float32, y[n] float32" in text and "outputs: out[n] float32" in text
    assert "workloads: 3 (listed below)" in text
    assert "- n=1000 (small-1000)\n- n=4096 (medium-4096)\n- n=65536 (large-65536)" in text  # every one
    assert "with atol 0.01, rtol 0.01: an output element fails only when" in text
    assert "Speed: against the start kernel" in text and "(the task's own baseline is 'reference')" in text
    assert "Build: g++; flags: -shared -fPIC -O3." in text  # the default flags (the version only in a run)
    assert "def run(x, y):\n    return 2 * x + y" in text


def test_strict_templates_refuse_unknown_and_missing_variables() -> None:
    with pytest.raises(PromptError, match=r"my mission: unknown variable\(s\) \$kernal \(known: \$kernel"):
        render("Make $kernal fast", {"kernel": "k"}, "my mission")
    with pytest.raises(PromptError, match=r"t: no value for \$target"):
        render("$kernel on $target", {"kernel": "k"}, "t")
    with pytest.raises(PromptError, match=r"line 2, column 7: a '\$' not followed by a variable name"):
        render("ok\ncosts $5", {}, "t")
    assert render("costs $$5 for ${kernel}s", {"kernel": "k"}) == "costs $5 for ks"
    assert template_variables("$kernel $brief $kernel", "t") == ["kernel", "brief"]
    assert set(variables()) == set(KNOWN_VARIABLES)


def test_role_spec_checks_its_tools_and_template() -> None:
    with pytest.raises(ValidationError, match=r"unknown tool\(s\) \['bash'\]"):
        RoleSpec(name="X", mission="m", tools=["view", "bash"])
    with pytest.raises(ValidationError, match="listed twice"):
        RoleSpec(name="X", mission="m", tools=["view", "view"])
    with pytest.raises(ValidationError, match=r"unknown variable\(s\) \$kernal"):
        RoleSpec(name="X", mission="make $kernal fast", tools=[])


def write(tmp_path: Path, text: str, name: str = "roles.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_toml_roles_add_new_ones_and_override_builtins(tmp_path: Path) -> None:
    (tmp_path / "missions").mkdir()
    (tmp_path / "missions" / "vectorizer.md").write_text("Vectorize $kernel for $target.\n")
    path = write(
        tmp_path,
        """
[[role]]
name = "Vectorizer"
description = "SIMD specialist"
mission_file = "missions/vectorizer.md"
tools = ["view", "str_replace", "evaluate", "submit_candidate"]
model = "claude-sonnet-4-5"
budget_share = 0.5

[[role]]
name = "Auditor"
mission = "Check $kernel against: $constraints"
tools = ["view"]
can_veto = true

[[role]]
name = "Optimizer"
model = "claude-opus-4-1"
""",
    )
    vectorizer, auditor, optimizer = load_role_file(path)
    assert vectorizer.mission == "Vectorize $kernel for $target.\n"
    assert (vectorizer.model, vectorizer.budget_share, vectorizer.can_veto) == ("claude-sonnet-4-5", 0.5, False)
    assert auditor.can_veto and auditor.tools == ["view"]
    assert optimizer.model == "claude-opus-4-1"
    assert optimizer.mission == builtin_role("Optimizer").mission and optimizer.tools == builtin_role("Optimizer").tools
    team = team_roles(path)
    assert list(team)[:7] == list(BUILTIN_NAMES) and list(team)[7:] == ["Vectorizer", "Auditor"]
    assert team["Optimizer"].model == "claude-opus-4-1"
    assert team_roles() == builtin_roles()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[[role]\nname = 'x'", "is not valid TOML"),
        (
            "[[role]]\nname = 'X'\nmission = 'm'\ntools = ['view', 'shell']",
            r"role 1 \('X'\): unknown tool\(s\) \['shell'\]",
        ),
        ("[[role]]\nname = 'X'\nmission = 'm'\ntools = []\ncolour = 'red'", r"role 1 \('X'\): colour: Extra inputs"),
        ("[[role]]\nname = 'X'\ntools = ['view']", r"a new role needs mission \(or mission_file\)"),
        ("[[role]]\nname = 'X'\nmission = 'm'", "a new role needs tools"),
        ("[[role]]\nname = 'X'\nmission = 'm'\nmission_file = 'f.md'\ntools = []", "either mission or mission_file"),
        ("[[role]]\nname = 'X'\nmission_file = 'nope.md'\ntools = []", "cannot read mission_file .*nope.md"),
        ("[[role]]\nname = 'X'\nmission = 'fix $kernal'\ntools = []", r"mission: unknown variable\(s\) \$kernal"),
        ("[[role]]\nname = 'X'\nmission = 'costs $5'\ntools = []", r"mission: line 1, column 7"),
        ("[[role]]\nname = 'X'\nmission = '  '\ntools = []", "the mission is empty"),
        ("[[role]]\nname = 'X'\nmission = 'm'\ntools = []\nbudget_share = 0", "budget_share: Input should be greater"),
        ("[[role]]\nname = 'X'\nmission = 'm'\ntools = []\n[[role]]\nname = 'X'\nmission = 'n'\ntools = []", "already"),
        ("[[role]]\nmission = 'm'\ntools = []", r"role 1: name: Field required"),
        ("[team]\nsize = 3", r"unknown top-level key\(s\) \['team'\]"),
        ("role = 'Optimizer'", r"must be an array of tables"),
    ],
)
def test_bad_role_files_are_one_clear_error_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(RoleFileError, match=message) as info:
        load_role_file(path)
    assert str(info.value).startswith(str(path))


def test_a_missing_role_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RoleFileError, match=r"cannot read role file .*absent\.toml"):
        load_role_file(tmp_path / "absent.toml")


def test_parse_verdict_reads_the_last_verdict_line() -> None:
    assert parse_verdict("looks fine\nVERDICT: approve") is not None
    veto = parse_verdict("VERDICT: approve\nthen I saw the cache\n**VERDICT: veto** — caches by pointer at line 12")
    assert veto is not None and (veto.decision, veto.reason) == ("veto", "caches by pointer at line 12")
    odd = parse_verdict("verdict: Suspicious: 40x on a memory-bound op")
    assert odd is not None and (odd.decision, odd.reason) == ("suspicious", "40x on a memory-bound op")
    assert parse_verdict("I approve of this") is None


def test_every_workload_is_listed_up_to_a_cap() -> None:
    many = [Workload(uuid=f"w{i}", axes={"n": 2**i}, inputs={}) for i in range(WORKLOAD_ROWS + 5)]
    table = workloads_table(many)
    assert table.splitlines()[:2] == ["- n=1 (w0)", "- n=2 (w1)"]
    assert len(table.splitlines()) == WORKLOAD_ROWS + 1 and table.endswith("- ... 5 more, of the same axes")
    assert workloads_table([]) == "(none listed)"
