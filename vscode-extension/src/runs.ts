// The runs as the server reports them (evoteam.runs, evoteam/runUpdated, evoteam.rounds, $/progress) and the labels
// the tree view and the status bar show for them: pure logic, no vscode import. The message types come from
// messages.generated.ts (generated from the server's server/messages.py).

import { CandidateInfo, RUN_PROGRESS_PREFIX, RoundInfo, RunSummary, RunUpdate } from "./messages.generated";

/** ``runs`` with ``update`` in place of the run of the same id (or added at the end: runs are oldest first). */
export function upsertRun(runs: RunSummary[], update: RunSummary): RunSummary[] {
  const at = runs.findIndex((r) => r.run === update.run);
  if (at < 0) {
    return [...runs, update];
  }
  const copy = runs.slice();
  copy[at] = update;
  return copy;
}

/** ``runs`` after an `evoteam/runUpdated`: the run replaced or added, or left out when the server removed it. */
export function applyUpdate(runs: RunSummary[], update: RunUpdate): RunSummary[] {
  return "removed" in update ? runs.filter((r) => r.run !== update.run) : upsertRun(runs, update);
}

/** What to tell the user when ``update`` is the moment a run stopped on an error (a refused key, a model that does
 * not exist): the run's id and the error; null for any other update, and for a run already known to have stopped. */
export function stoppedMessage(runs: RunSummary[], update: RunUpdate): string | null {
  if ("removed" in update || update.finished !== "error") {
    return null;
  }
  const before = runs.find((r) => r.run === update.run);
  if (before?.finished === "error") {
    return null;
  }
  return `evoteam: run ${update.run} stopped: ${update.error ?? "an error no retry can fix"}`;
}

export function speed(value: number | null | undefined): string {
  return value === null || value === undefined ? "–" : `${value.toFixed(2)}x`;
}

export function tokens(used: number, budget: number): string {
  return `${used.toLocaleString("en-US")}/${budget.toLocaleString("en-US")} tokens`;
}

/** The tree's line for a run: its id, then kernel, mode, progress and best. */
export function runDescription(run: RunSummary): string {
  const state = run.live ? `round ${run.round}/${run.rounds}` : run.finished === "error" ? "stopped on an error" : (run.finished ?? "stopped");
  return `${run.kernel} · ${run.mode} · ${state} · best ${speed(run.bestSpeedup)}`;
}

export function roundBest(round: RoundInfo): number | null {
  const passed = round.candidates.map((c) => c.speedup).filter((s): s is number => s !== null && s !== undefined);
  return passed.length ? Math.max(...passed) : null;
}

/** The tree's line for a round: its branch, best speedup and team. */
export function roundDescription(round: RoundInfo): string {
  const team = round.roles.length ? round.roles.join(", ") : "team not recorded";
  return `${round.branch} · best ${speed(roundBest(round))} · ${team}${round.finished ? "" : " · running"}`;
}

/** The tree's label and line for a candidate: role, status, speedup (a star on the run's best). */
export function candidateLabel(candidate: CandidateInfo): { label: string; description: string } {
  const faster = candidate.faster !== null && candidate.total !== null ? ` · ${candidate.faster}/${candidate.total} faster` : "";
  return {
    label: `${candidate.best ? "★ " : ""}${candidate.role ?? "candidate"}`,
    description: `${candidate.status ?? "?"} · ${speed(candidate.speedup)}${faster}`,
  };
}

/** The run a `$/progress` token of the server belongs to (`evoteam/run/RUN`), or null. */
export function progressRun(token: string | number): string | null {
  const text = String(token);
  return text.startsWith(RUN_PROGRESS_PREFIX) && text.length > RUN_PROGRESS_PREFIX.length ? text.slice(RUN_PROGRESS_PREFIX.length) : null;
}

/** What a `$/progress` notification of the server changes in `progress` (run → its latest message). */
export interface ProgressValue {
  kind: "begin" | "report" | "end";
  message?: string;
}

/**
 * Keeps `progress` (run → the server's latest `$/progress` message) current: an end forgets the run, a begin or
 * report with a message replaces it. Whether the token is a run's (then the status bar is redrawn).
 */
export function applyProgress(progress: Map<string, string>, token: string | number, value: ProgressValue): boolean {
  const run = progressRun(token);
  if (run === null) {
    return false;
  }
  if (value.kind === "end") {
    progress.delete(run);
  } else if (value.message) {
    progress.set(run, value.message);
  }
  return true;
}

/**
 * The status bar text for the live runs (the newest first), or null when none is live: the server's latest
 * `$/progress` message for the run when there is one (`round 2/3 · Optimizer · best 1.34x · 12,345/200,000
 * tokens`), else the same built from its `evoteam/runUpdated` summary.
 */
export function statusText(runs: RunSummary[], progress: ReadonlyMap<string, string> = new Map()): string | null {
  const live = runs.filter((r) => r.live);
  if (!live.length) {
    return null;
  }
  const run = live[live.length - 1];
  const more = live.length > 1 ? ` (+${live.length - 1})` : "";
  const shown = progress.get(run.run) ?? `round ${run.round}/${run.rounds} · best ${speed(run.bestSpeedup)} · ${tokens(run.tokens, run.budget)}`;
  return `$(sync~spin) evoteam: ${shown}${more}`;
}

/** Where "check out branch in a new worktree" puts a branch: beside the repository, named after both. */
export function worktreeDir(root: string, branch: string): string {
  const trimmed = root.replace(/\/+$/, "");
  const parent = trimmed.slice(0, trimmed.lastIndexOf("/")) || "/";
  const name = trimmed.slice(trimmed.lastIndexOf("/") + 1);
  return `${parent === "/" ? "" : parent}/${name}-${branch.replace(/[^A-Za-z0-9._-]+/g, "-")}`;
}
