"""Wires a run to the real world: the task from evoteam.toml, a runner, the evaluator and the chosen backend."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from evoteam.gpu_bench.api import (
    EvalConfig,
    Evaluator,
    KernelTask,
    Runner,
    Solution,
    build_summary,
    load_tasks,
)
from evoteam.roles.backends.choose import choose_backend
from evoteam.roles.llm import LLM
from evoteam.roles.tools.evaluation import EvaluationCache, TaskEvaluations
from evoteam.supervisor.agents import backend_factory
from evoteam.supervisor.config import RunConfig, task_config
from evoteam.supervisor.services import RunServices
from evoteam.supervisor.team import Team


class SetupError(ValueError):
    """The run cannot start here (unknown kernel, a CUDA kernel without a GPU and a local runner...)."""


def load_task(config: RunConfig, repo_root: Path | None = None) -> KernelTask:
    """The run's task from its evoteam.toml (found below ``repo_root`` when the repository has moved since)."""
    path = task_config(repo_root, config.config) if repo_root is not None else Path(config.config)
    tasks = {t.name: t for t in load_tasks(path)}
    if config.kernel not in tasks:
        raise SetupError(f"{config.config} has no kernel named {config.kernel!r}; it has {', '.join(tasks)}")
    return tasks[config.kernel]


def check_runnable(task: KernelTask, runner: str) -> None:
    """A CUDA kernel needs a GPU: here, or behind a remote runner."""
    if task.target == "cpu" or runner != "local":
        return
    import torch

    if not torch.cuda.is_available():
        raise SetupError(
            f"kernel {task.name!r} targets {task.target} but this machine has no CUDA GPU; evolve it on a GPU host "
            "with --runner ssh://HOST (or --runner ray://ADDRESS)"
        )


def make_services(
    task: KernelTask, config: RunConfig, env: Mapping[str, str] | None = None, runner: Runner | None = None
) -> tuple[RunServices, Runner]:
    """The run's services and its runner (the caller closes it)."""
    from evoteam.gpu_bench.api import make_runner

    env = dict(os.environ if env is None else env)
    backend = choose_backend(config.llm, env)
    runner = runner or make_runner(config.runner, gpu=None if task.target == "cpu" else 0)
    evaluator = Evaluator(runner)
    eval_config = EvalConfig(**task.tolerance.model_dump())
    caches: dict[str, EvaluationCache] = {}

    def evaluations(team: Team, incumbent: Solution | None) -> EvaluationCache:
        merged = task.constraints.model_copy(
            update={
                "require": sorted({*task.constraints.require, *team.constraints.require}),
                "forbid": sorted({*task.constraints.forbid, *team.constraints.forbid}),
            }
        )
        key = merged.model_dump_json() + (incumbent.content_hash() if incumbent is not None else "")
        if key not in caches:
            service = TaskEvaluations(evaluator, task, eval_config, constraints=merged, baseline=incumbent)
            caches[key] = EvaluationCache(service)
        return caches[key]

    supervisor_llm: tuple[LLM, str] | None = None
    if backend == "anthropic":
        from evoteam.roles.backends.anthropic_api import AnthropicLLM
        from evoteam.roles.backends.settings import AnthropicSettings

        settings = AnthropicSettings.from_env(env, model=config.model)
        supervisor_llm = (AnthropicLLM(settings), settings.model)
    elif backend == "openai":
        from evoteam.roles.backends.choose import openai_llm

        supervisor_llm = openai_llm(env, config.model)
    agents = backend_factory(
        backend, task, env, config.model, config.evaluations_per_agent, config.seed, config.max_tokens
    )
    build = build_summary(task.language.value, task.target, task.flags, identify=True)
    services = RunServices(
        task=task, evaluations=evaluations, agents=agents, supervisor_llm=supervisor_llm, build=build
    )
    return services, runner
