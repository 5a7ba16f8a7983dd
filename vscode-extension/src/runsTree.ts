// The "Evolution runs" tree view: runs (newest first) → rounds (branch, best speedup, team) → candidates (role,
// status, speedup). Runs come from evoteam.runs and evoteam/runUpdated; a run's rounds from evoteam.rounds.

import * as vscode from "vscode";
import { CandidateInfo, ROUNDS, RUNS, RoundInfo, RoundsResult, RunSummary, RunUpdate } from "./messages.generated";
import { applyUpdate, candidateLabel, roundDescription, runDescription, stoppedMessage } from "./runs";
import { Ask } from "./serverClient";

export type Node =
  | { kind: "run"; run: RunSummary }
  | { kind: "round"; run: string; round: RoundInfo; base: string | null }
  | { kind: "candidate"; run: string; round: RoundInfo; candidate: CandidateInfo; base: string | null };

export class RunsTree implements vscode.TreeDataProvider<Node> {
  private runs: RunSummary[] = [];
  private readonly rounds = new Map<string, Promise<RoundsResult>>();
  private readonly changed = new vscode.EventEmitter<Node | undefined>();
  readonly onDidChangeTreeData = this.changed.event;

  constructor(private readonly ask: Ask) {}

  all(): RunSummary[] {
    return this.runs;
  }

  /** Replaces every run (after evoteam.runs). */
  reset(runs: RunSummary[]): void {
    this.runs = runs;
    this.rounds.clear();
    this.changed.fire(undefined);
  }

  /** Every run again from the server (evoteam.runs). */
  async refresh(): Promise<void> {
    this.reset(await this.ask(RUNS));
  }

  /** One run changed or was removed (evoteam/runUpdated): its rounds are read again when shown. Returns what to
   * tell the user when the update is a run stopping on an error, else null. */
  update(update: RunUpdate): string | null {
    const message = stoppedMessage(this.runs, update);
    this.runs = applyUpdate(this.runs, update);
    this.rounds.delete(update.run);
    this.changed.fire(undefined);
    return message;
  }

  getTreeItem(node: Node): vscode.TreeItem {
    if (node.kind === "run") {
      const item = new vscode.TreeItem(node.run.run, vscode.TreeItemCollapsibleState.Collapsed);
      item.description = runDescription(node.run);
      item.contextValue = node.run.live ? "run-live" : "run";
      item.iconPath = new vscode.ThemeIcon(node.run.live ? "sync~spin" : node.run.best ? "pass" : "circle-outline");
      item.tooltip = `${node.run.team.join(", ")} (${node.run.protocol ?? "?"}) · ${node.run.candidates} candidates`;
      if (node.run.error) {
        item.tooltip += `\nstopped: ${node.run.error}`;
      }
      item.id = `run:${node.run.run}`;
      return item;
    }
    if (node.kind === "round") {
      const item = new vscode.TreeItem(`round ${node.round.round}`, vscode.TreeItemCollapsibleState.Collapsed);
      item.description = roundDescription(node.round);
      item.contextValue = "round";
      item.id = `round:${node.run}:${node.round.round}`;
      return item;
    }
    const { label, description } = candidateLabel(node.candidate);
    const item = new vscode.TreeItem(label, vscode.TreeItemCollapsibleState.None);
    item.description = description;
    item.tooltip = `${node.candidate.id} (${node.candidate.agent ?? "?"}) · ${node.candidate.sha.slice(0, 12)}`;
    item.contextValue = "candidate";
    item.id = `candidate:${node.run}:${node.candidate.id}`;
    item.command = { command: "evoteam.openCandidateDiff", title: "Open diff", arguments: [node] };
    return item;
  }

  async getChildren(node?: Node): Promise<Node[]> {
    if (node === undefined) {
      return this.runs
        .slice()
        .reverse()
        .map((run) => ({ kind: "run", run }));
    }
    if (node.kind === "run") {
      const answer = await this.roundsOf(node.run.run);
      return answer.rounds.map((round) => ({ kind: "round", run: node.run.run, round, base: answer.base.sha }));
    }
    if (node.kind === "round") {
      return node.round.candidates.map((candidate) => ({
        kind: "candidate",
        run: node.run,
        round: node.round,
        candidate,
        base: node.base,
      }));
    }
    return [];
  }

  private roundsOf(run: string): Promise<RoundsResult> {
    let found = this.rounds.get(run);
    if (found === undefined) {
      found = this.ask(ROUNDS, run);
      found.catch(() => this.rounds.delete(run));
      this.rounds.set(run, found);
    }
    return found;
  }
}
