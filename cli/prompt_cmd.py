"""``evoteam prompt ROLE KERNEL``: exactly what a model-backed agent of that role would be given first on that
kernel: its system prompt (the cached prefix: system, mission, task, knowledge), its tools (names,
descriptions, input schemas) and its first message (the brief and its limits), as round 1 of a new run of
``--team`` under ``--budget`` would give them. Nothing is evaluated and no model is called.

Exit codes: 0 printed, 2 bad input (one error line).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any


def add_parser(sub: Any) -> None:
    from evoteam.supervisor.config import DEFAULT_MAX_TOKENS

    p: argparse.ArgumentParser = sub.add_parser(
        "prompt",
        help="print what an agent of ROLE is given first on KERNEL (system prompt, tools, first message)",
        description="Print exactly what a model-backed agent of ROLE would be given first on KERNEL.",
    )
    p.add_argument("role", help="a role name (Optimizer, Debugger, 'Profiling Scientist', ...)")
    p.add_argument("kernel", help="a kernel name from evoteam.toml, or a kernel file")
    p.add_argument("--team", choices=["single", "fixed", "evolving"], default="evolving")
    p.add_argument("--budget", type=int, default=200_000, help="the run's token budget (the role's share follows)")
    p.add_argument("--max-tokens", type=int, default=DEFAULT_MAX_TOKENS)
    p.add_argument("--max-turns", type=int, default=30)
    p.add_argument("--rounds", type=int, default=3, help="the run's rounds (the first message says round 1 of them)")
    p.add_argument("--json", action="store_true", help="print {system, tools, first_message} as JSON")
    p.set_defaults(run=run)


def _fail(message: str) -> int:
    print(f"evoteam: {message}", file=sys.stderr)
    return 2


def run(args: argparse.Namespace) -> int:
    from evoteam.cli.evolve import select_task
    from evoteam.gpu_bench.api import TaskError, build_summary
    from evoteam.roles.agent import LoopAgent, first_message
    from evoteam.roles.agent_api import AgentContext, Assignment
    from evoteam.roles.budget import TokenBudget
    from evoteam.roles.builtin import builtin_roles
    from evoteam.roles.knowledge import KnowledgeStore
    from evoteam.roles.prompt import task_prompt
    from evoteam.roles.tools.base import Author
    from evoteam.roles.tools.evaluation import EvaluationCache, FakeEvaluations
    from evoteam.roles.tools.factory import ToolServices, build_toolbox
    from evoteam.roles.workspace import Workspace
    from evoteam.supervisor.git_store import GitStore, GitStoreError
    from evoteam.supervisor.round_play import machine_text, role_shares
    from evoteam.supervisor.state import RunState
    from evoteam.supervisor.team import initial_team

    if args.budget < 0 or args.max_tokens < 1 or args.max_turns < 1 or args.rounds < 1:
        return _fail("--budget must not be negative, --max-tokens, --max-turns and --rounds at least 1")
    roles = builtin_roles()
    named = {name.lower(): spec for name, spec in roles.items()}
    role = named.get(args.role.strip().lower())
    if role is None:
        return _fail(f"no role named {args.role!r}; roles: {', '.join(roles)}")
    found = select_task(args.kernel, "local")
    if isinstance(found, str):
        return _fail(found)
    _, task = found
    try:
        definition, workloads = task.load_definition(), task.load_workloads()
        root = GitStore(task.source, "prompt").root
    except (TaskError, GitStoreError) as exc:
        return _fail(str(exc))
    knowledge = KnowledgeStore(root, task.name)
    team = initial_team(args.team)
    if role.name not in team.roles:
        team = team.model_copy(update={"roles": [*team.roles, role.name]})
    members = [roles[name] for name in team.roles]
    share = role_shares(RunState(), team, TokenBudget(args.budget), 1, members)[role.name]
    build = build_summary(task.language.value, task.target, task.flags, identify=True)
    prompt = task_prompt(
        task, definition, workloads, knowledge.summary(), task.constraints, machine=machine_text("local"), build=build
    )
    with tempfile.TemporaryDirectory(prefix="evoteam-prompt-") as folder:
        workspace = Workspace(Path(folder))
        never = EvaluationCache(FakeEvaluations(_not_evaluated))
        services = ToolServices(definition=definition, evaluations=never, knowledge=knowledge)
        author = Author(role=role.name, agent_id=f"{role.name.lower()}-0", round=1)
        toolbox = build_toolbox(task, workspace, services, author, []).only(role.tools)
        assignment = Assignment(
            role=role, agent_id=author.agent_id, kernel=task.name, round=1, rounds=args.rounds, max_turns=args.max_turns
        )
        context = AgentContext(
            assignment=assignment, workspace=workspace, toolbox=toolbox, budget=share, submissions=[], task=prompt
        )
        system = LoopAgent(_NoModel(), "model", max_tokens=args.max_tokens).system(context)
        first = first_message(context, args.max_tokens)
        tools = [spec.model_dump() for spec in toolbox.specs()]
    if args.json:
        print(json.dumps({"system": system, "tools": tools, "first_message": first}, indent=2))
        return 0
    names = ("system prompt", f"mission: {role.name}", "task", "knowledge")
    for name, part in zip(names, system, strict=True):
        print(f"===== system, part: {name} =====\n{part.rstrip()}\n")
    print(f"===== tools ({len(tools)}) =====")
    for tool in tools:
        print(f"- {tool['name']}: {tool['description']}")
        print(f"  input: {json.dumps(tool['input_schema'].get('properties', {}), separators=(',', ':'))}")
    print(f"\n===== first message =====\n{first}")
    return 0


def _not_evaluated(solution: Any) -> Any:
    raise RuntimeError("evoteam prompt evaluates nothing")


class _NoModel:
    """Stands in for the model: ``evoteam prompt`` renders what would be sent and sends nothing."""

    def count_tokens(self, request: Any) -> int:
        return 0

    def complete(self, request: Any) -> Any:
        raise RuntimeError("evoteam prompt calls no model")
