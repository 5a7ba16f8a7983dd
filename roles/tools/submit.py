"""The ``submit_candidate`` tool: snapshot the workspace kernel, evaluate it unless that content already was,
and hand a ``Submission`` to the supervisor. A candidate has one name everywhere (``candidate_name``): what the
tool answers, the journal's candidate id, git, ``show`` and the editor."""

from __future__ import annotations

from evoteam.gpu_bench.api import KernelTask, Solution
from evoteam.roles.agent_api import Submission
from evoteam.roles.tools.base import Author, ToolResult
from evoteam.roles.tools.candidate import CandidateError, SubmitInput, workspace_solution
from evoteam.roles.tools.evaluation import EvaluationCache, evaluate_to_result
from evoteam.roles.workspace import Workspace


def candidate_name(round_number: int, agent_id: str, solution: Solution) -> str:
    """``r02-optimizer-0-1a2b3c4d5e``: the round, the agent, and the digest of what is built and called (the same
    kernel submitted twice by one agent in one round is one candidate)."""
    return f"r{round_number:02d}-{agent_id}-{solution.content_hash()[:10]}"


class SubmitCandidateTool:
    name = "submit_candidate"
    description = (
        "Submit the workspace's current kernel as this round's candidate, with a one-line rationale. It is "
        "evaluated (unless this exact content already was) and the supervisor judges it. Submit only a kernel "
        "you evaluated and believe correct."
    )
    input_model = SubmitInput

    def __init__(
        self,
        task: KernelTask,
        workspace: Workspace,
        definition: str,
        evaluations: EvaluationCache,
        author: Author,
        submissions: list[Submission],
    ) -> None:
        self.task = task
        self.workspace = workspace
        self.definition = definition
        self.evaluations = evaluations
        self.author = author
        self.submissions = submissions

    def run(self, args: SubmitInput) -> ToolResult:
        a = self.author
        try:
            solution = workspace_solution(
                self.task,
                self.workspace,
                self.definition,
                name=f"{self.task.name}-{a.agent_id}-submission",
                author=a.role,
                description=args.rationale,
            )
        except CandidateError as exc:
            return ToolResult(content=str(exc), is_error=True)
        solution = solution.model_copy(update={"name": candidate_name(a.round, a.agent_id, solution)})
        evaluated = evaluate_to_result(self.evaluations, solution)
        if evaluated.is_error:
            return evaluated
        # a cached evaluation was made under an earlier snapshot's name: the summary is about this one
        summary = {**(evaluated.data or {}), "solution": solution.name}
        submission = Submission(
            solution=solution, rationale=args.rationale, role=a.role, agent_id=a.agent_id, evaluation=summary
        )
        self.submissions.append(submission)
        content = f"submitted {solution.name} ({len(self.submissions)} submission(s) so far)\n{evaluated.content}"
        return ToolResult(content=content, data=summary)
