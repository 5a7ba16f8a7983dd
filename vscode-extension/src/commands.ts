// The extension's commands (palette, editor and explorer menus, the runs view's context menus): each runs inside
// a guard that shows its error, and talks to the server through `ask` (its evoteam.* commands).

import * as vscode from "vscode";
import { evolveKernel } from "./evolve";
import { ACCEPT, CANCEL, CANDIDATE_DIFF, REPORT, RunSummary } from "./messages.generated";
import { git, gitUri } from "./gitContent";
import { showReport } from "./report";
import { speed, worktreeDir } from "./runs";
import { Node, RunsTree } from "./runsTree";
import { Ask } from "./serverClient";

/** What the commands work with. */
export interface CommandDeps {
  ask: Ask;
  output: vscode.OutputChannel;
  tree: RunsTree;
}

export function registerCommands(context: vscode.ExtensionContext, deps: CommandDeps): void {
  const { ask, output, tree } = deps;
  const command = (name: string, fn: (...args: never[]) => unknown): void => {
    context.subscriptions.push(vscode.commands.registerCommand(name, (...args: never[]) => guarded(output, name, () => fn(...args))));
  };
  command("evoteam.showLog", () => output.show());
  command("evoteam.refreshRuns", () => tree.refresh());
  command("evoteam.evolveKernel", (uri?: vscode.Uri) => evolveKernel(ask, output, uri));
  command("evoteam.cancelRun", async (node?: Node) => {
    const run = node?.kind === "run" ? node.run.run : await pickRun(tree, (r) => r.live, "No run is live.");
    if (run) {
      const answer = await ask(CANCEL, run);
      void vscode.window.showInformationMessage(
        answer.cancelled ? `evoteam: cancel requested for ${run}` : `evoteam: ${run} had finished (${answer.finished})`,
      );
    }
  });
  command("evoteam.showReport", async (node?: Node) => {
    const run = node?.kind === "run" ? node.run.run : await pickRun(tree, () => true, "No run yet.");
    if (run) {
      const answer = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Notification, title: `evoteam: writing the report of ${run}` },
        () => ask(REPORT, run),
      );
      await showReport(run, answer.page);
    }
  });
  command("evoteam.acceptWinner", async () => {
    const run = await pickRun(tree, (r) => r.best !== null, "No run has a passing candidate yet.");
    if (run) {
      await accept(ask, run);
    }
  });
  command("evoteam.acceptCandidate", (node: Node) => node.kind === "candidate" && accept(ask, node.run, node.candidate.id));
  command("evoteam.openCandidateDiff", (node: Node) => node.kind === "candidate" && openDiff(ask, node.run, node.candidate.id));
  command("evoteam.copyBranch", async (node: Node) => {
    if (node.kind !== "run") {
      await vscode.env.clipboard.writeText(node.round.branch);
      void vscode.window.showInformationMessage(`evoteam: copied ${node.round.branch}`);
    }
  });
  command("evoteam.checkoutWorktree", (node: Node) => node.kind !== "run" && checkoutWorktree(node.round.branch));
}

/** Runs a command; an error goes to the log and an error notification. */
async function guarded(output: vscode.OutputChannel, name: string, fn: () => unknown): Promise<void> {
  try {
    await fn();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    output.appendLine(`evoteam: ${name}: ${message}`);
    void vscode.window.showErrorMessage(`evoteam: ${message}`);
  }
}

async function pickRun(tree: RunsTree, which: (run: RunSummary) => boolean, none: string): Promise<string | undefined> {
  const runs = tree.all().filter(which).reverse();
  if (!runs.length) {
    void vscode.window.showInformationMessage(`evoteam: ${none}`);
    return undefined;
  }
  if (runs.length === 1) {
    return runs[0].run;
  }
  const pick = await vscode.window.showQuickPick(
    runs.map((r) => ({ label: r.run, description: `${r.kernel} · best ${speed(r.bestSpeedup)}` })),
    { title: "evoteam: which run?" },
  );
  return pick?.label;
}

async function accept(ask: Ask, run: string, candidate?: string): Promise<void> {
  const answer = await (candidate ? ask(ACCEPT, run, candidate) : ask(ACCEPT, run));
  if (!answer.applied) {
    throw new Error(`the edit was not applied${answer.failureReason ? `: ${answer.failureReason}` : ""}`);
  }
  void vscode.window.showInformationMessage(
    answer.files.length
      ? `evoteam: accepted ${answer.candidate} (${speed(answer.speedup)}) into ${answer.files.join(", ")} (unsaved; undo takes it back)`
      : `evoteam: the files already hold ${answer.candidate}`,
  );
}

async function openDiff(ask: Ask, run: string, candidate: string): Promise<void> {
  const diff = await ask(CANDIDATE_DIFF, run, candidate);
  for (const path of diff.paths) {
    await vscode.commands.executeCommand(
      "vscode.diff",
      gitUri(diff.root, diff.base, path),
      gitUri(diff.root, diff.sha, path),
      `${path}: base ↔ ${candidate}`,
    );
  }
}

async function checkoutWorktree(branch: string): Promise<void> {
  const folder = vscode.workspace.workspaceFolders?.[0];
  if (folder === undefined) {
    throw new Error("no workspace folder");
  }
  const top = await git(["rev-parse", "--show-toplevel"], folder.uri.fsPath);
  const dir = worktreeDir(top.trim(), branch);
  await git(["worktree", "add", dir, branch], top.trim());
  const pick = await vscode.window.showInformationMessage(`evoteam: ${branch} is checked out in ${dir}`, "Open in new window");
  if (pick) {
    await vscode.commands.executeCommand("vscode.openFolder", vscode.Uri.file(dir), { forceNewWindow: true });
  }
}
