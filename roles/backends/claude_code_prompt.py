"""The first user message of a claude-code session: the role's mission, rendered, then the round's brief and
the task, each unless the mission already placed it. No I/O.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from evoteam.roles.agent_api import Assignment
from evoteam.roles.prompt import TaskPrompt, render, template_variables


def session_prompt(assignment: Assignment, tools: Sequence[str], task: TaskPrompt | None) -> str:
    """``tools`` are the names the model sees (``Read``, ``mcp__evoteam__compile``, ...). Without a ``task``
    only ``$kernel``, ``$role``, ``$tools`` and ``$brief`` have values; a mission that needs more is an error
    (``PromptError``), as with every other backend."""
    role = assignment.role
    where = f"the mission of role {role.name!r}"
    used = set(template_variables(role.mission, where))
    if task is not None:
        variables = task.variables(role.name, tools, assignment.brief)
    else:
        variables = {
            "kernel": assignment.kernel,
            "role": role.name,
            "tools": ", ".join(tools),
            "brief": assignment.brief or "(no brief this round)",
        }
    parts = [render(role.mission, variables, where).strip()]
    if assignment.brief and "brief" not in used:
        parts.append(f"## This round (round {assignment.round})\n{assignment.brief.strip()}")
    if task is not None and "definition_summary" not in used:
        parts.append(task_description(task, skip=used))
    return "\n\n".join(parts)


def task_description(task: TaskPrompt, skip: Collection[str] = ()) -> str:
    """The task in a few labelled sections, leaving out the variables in ``skip`` (already in the prompt)."""
    lines = [
        "## The task",
        f"Kernel `{task.kernel}` ({task.language}, target {task.target}); the entry point is `{task.entry}` "
        f"in `{task.entry_file}` (paths are relative to the working directory).",
        "",
        task.definition_summary,
    ]
    if "constraints" not in skip:
        lines += ["", "### Constraints on the generated code", task.constraints]
    if "knowledge" not in skip:
        lines += ["", "### What is known about this kernel", task.knowledge]
    return "\n".join(lines)
