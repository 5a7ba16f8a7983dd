// The runs' labels in the tree and the status bar, updates by run id, and where a worktree goes.
import assert from "node:assert/strict";
import { test } from "node:test";
import { CandidateInfo, RoundInfo, RunSummary } from "../src/messages.generated";
import {
  applyProgress,
  applyUpdate,
  candidateLabel,
  progressRun,
  roundDescription,
  runDescription,
  statusText,
  stoppedMessage,
  upsertRun,
  worktreeDir,
} from "../src/runs";

function summary(run: string, changes: Partial<RunSummary> = {}): RunSummary {
  return {
    run,
    kernel: "scale_add",
    mode: "evolving",
    llm: "offline",
    live: false,
    finished: "rounds",
    error: null,
    round: 3,
    rounds: 3,
    roundsFinished: 3,
    team: ["Optimizer", "Debugger"],
    protocol: "sequential",
    best: "c1",
    bestSpeedup: 1.3456,
    tokens: 12345,
    budget: 200000,
    candidates: 4,
    ...changes,
  };
}

function candidate(changes: Partial<CandidateInfo> = {}): CandidateInfo {
  return { id: "c1", role: "Optimizer", agent: "Optimizer-0", status: "PASSED", speedup: 1.5, faster: 36, total: 47, sha: "a".repeat(40), best: false, ...changes };
}

test("an update replaces the run of its id and a new run goes last", () => {
  const runs = [summary("a"), summary("b")];
  const updated = upsertRun(runs, summary("a", { round: 1 }));
  assert.deepEqual(updated.map((r) => [r.run, r.round]), [["a", 1], ["b", 3]]);
  assert.equal(runs[0].round, 3, "the old list is left as it was");
  assert.deepEqual(upsertRun(runs, summary("c")).map((r) => r.run), ["a", "b", "c"]);
});

test("a removed run leaves the list; a summary replaces or adds its run", () => {
  const runs = [summary("a"), summary("b")];
  assert.deepEqual(applyUpdate(runs, { run: "a", removed: true }).map((r) => r.run), ["b"]);
  assert.deepEqual(applyUpdate(runs, { run: "zz", removed: true }).map((r) => r.run), ["a", "b"]);
  assert.deepEqual(applyUpdate(runs, summary("b", { round: 1 })).map((r) => [r.run, r.round]), [["a", 3], ["b", 1]]);
  assert.equal(runs.length, 2, "the old list is left as it was");
});

test("runs, rounds and candidates read as the issue shows them", () => {
  assert.equal(runDescription(summary("a")), "scale_add · evolving · rounds · best 1.35x");
  assert.equal(runDescription(summary("a", { live: true, finished: null, round: 2, bestSpeedup: null })), "scale_add · evolving · round 2/3 · best –");
  const round: RoundInfo = {
    round: 1,
    branch: "evoteam/r/round-01",
    finished: true,
    roles: ["Profiling Scientist", "Optimizer"],
    tokens: 900,
    candidates: [candidate({ speedup: 1.2 }), candidate({ id: "c2", speedup: null, status: "COMPILE_ERROR" }), candidate({ id: "c3", speedup: 2.25 })],
  };
  assert.equal(roundDescription(round), "evoteam/r/round-01 · best 2.25x · Profiling Scientist, Optimizer");
  assert.equal(roundDescription({ ...round, finished: false, candidates: [] }), "evoteam/r/round-01 · best – · Profiling Scientist, Optimizer · running");
  assert.deepEqual(candidateLabel(candidate({ best: true })), { label: "★ Optimizer", description: "PASSED · 1.50x · 36/47 faster" });
  assert.deepEqual(candidateLabel(candidate({ role: null, status: null, speedup: null, faster: null, total: null })), {
    label: "candidate",
    description: "? · –",
  });
});

test("the status bar shows the newest live run, with a count of the others, and hides without one", () => {
  assert.equal(statusText([summary("a")]), null);
  const live = { live: true, finished: null, round: 2 };
  const text = statusText([summary("a", live), summary("b", { ...live, round: 1, bestSpeedup: 2 })]);
  assert.equal(text, "$(sync~spin) evoteam: round 1/3 · best 2.00x · 12,345/200,000 tokens (+1)");
});

test("the server's progress message for the run wins over the summary, and its token names the run", () => {
  const live = summary("b", { live: true, finished: null });
  const progress = new Map([["b", "round 3/3 · Optimizer · best 1.35x · 900/200,000 tokens"], ["a", "other"]]);
  assert.equal(statusText([live], progress), "$(sync~spin) evoteam: round 3/3 · Optimizer · best 1.35x · 900/200,000 tokens");
  assert.equal(progressRun("evoteam/run/scale_add-20261203-120000-ab12"), "scale_add-20261203-120000-ab12");
  assert.equal(progressRun("other/token"), null);
  assert.equal(progressRun(7), null);
  assert.equal(progressRun("evoteam/run/"), null);
});

test("a run's progress keeps its latest message until it ends; other tokens are not the status bar's", () => {
  const progress = new Map<string, string>();
  assert.equal(applyProgress(progress, "evoteam/run/r1", { kind: "begin", message: "starting" }), true);
  assert.equal(applyProgress(progress, "evoteam/run/r1", { kind: "report" }), true);
  assert.deepEqual([...progress], [["r1", "starting"]], "a report without a message keeps the last one");
  applyProgress(progress, "evoteam/run/r1", { kind: "report", message: "round 1/3 · Optimizer" });
  assert.equal(progress.get("r1"), "round 1/3 · Optimizer");
  assert.equal(applyProgress(progress, "other/token", { kind: "report", message: "x" }), false);
  applyProgress(progress, "evoteam/run/r1", { kind: "end", message: "rounds · best 1.20x" });
  assert.equal(progress.size, 0);
});

test("a worktree goes beside the repository, named after it and the branch", () => {
  assert.equal(worktreeDir("/home/u/repo/", "evoteam/run-1/round-02"), "/home/u/repo-evoteam-run-1-round-02");
  assert.equal(worktreeDir("/repo", "evoteam/x/best"), "/repo-evoteam-x-best");
});

test("a run that stops on an error is told once, with its error, and reads as stopped", () => {
  const running = summary("a", { live: true, finished: null });
  const stopped = summary("a", { finished: "error", error: "anthropic call failed and is not retried: 401 authentication_error" });
  assert.equal(stoppedMessage([running], stopped), "evoteam: run a stopped: anthropic call failed and is not retried: 401 authentication_error");
  assert.equal(stoppedMessage([stopped], stopped), null); // already known: not told again
  assert.equal(stoppedMessage([], summary("b")), null); // a run that finished its rounds
  assert.equal(stoppedMessage([stopped], { run: "a", removed: true }), null);
  assert.equal(runDescription(stopped), "scale_add · evolving · stopped on an error · best 1.35x");
});
