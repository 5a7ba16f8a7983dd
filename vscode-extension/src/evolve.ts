// "Evolve this kernel": on a file that is no task yet, offers to add it to evoteam.toml (taskEntry.ts);
// otherwise saves the file (after asking) when it has unsaved changes, asks the options that no settings scope
// sets (team, budget, runner), then starts the run with the server's evoteam.evolve.

import * as vscode from "vscode";
import { EVOLVE, Settings } from "./messages.generated";
import { Asked, BUDGETS, TEAMS, checkRunner, parseBudget, unconfigured } from "./options";
import { Ask } from "./serverClient";
import { isTaskOrOffer } from "./taskEntry";

export async function evolveKernel(ask: Ask, output: vscode.OutputChannel, given?: vscode.Uri): Promise<void> {
  const uri = given ?? vscode.window.activeTextEditor?.document.uri;
  if (uri === undefined || uri.scheme !== "file") {
    throw new Error("open a kernel file (.cu, .cuh, .cpp, .py) to evolve it");
  }
  if (!(await isTaskOrOffer(ask, uri))) {
    return;
  }
  const document = vscode.workspace.textDocuments.find((d) => d.uri.toString() === uri.toString());
  if (document?.isDirty) {
    const pick = await vscode.window.showWarningMessage(
      `${vscode.workspace.asRelativePath(uri)} has unsaved changes; a run starts from the file as saved.`,
      { modal: true },
      "Save and evolve",
    );
    if (pick === undefined) {
      return;
    }
    await document.save();
  }
  const config = vscode.workspace.getConfiguration("evoteam", uri);
  const options: Partial<Settings> = {};
  for (const key of unconfigured((k) => config.inspect(k))) {
    const value = await askOption(key);
    if (value === undefined) {
      return; // dismissed: nothing starts
    }
    Object.assign(options, { [key]: value });
  }
  const answer = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `evoteam: starting a run on ${vscode.workspace.asRelativePath(uri)}` },
    () => ask(EVOLVE, uri.toString(), options),
  );
  output.appendLine(`evoteam: started run ${answer.run}`);
  void vscode.window.showInformationMessage(`evoteam: started run ${answer.run}`, "Show runs").then((pick) => {
    if (pick) {
      void vscode.commands.executeCommand("evoteamRuns.focus");
    }
  });
}

async function askOption(key: Asked): Promise<string | number | undefined> {
  if (key === "team") {
    const pick = await vscode.window.showQuickPick(TEAMS, { title: "evoteam: team mode", ignoreFocusOut: true });
    return pick?.label;
  }
  if (key === "budget") {
    const custom = "Another budget…";
    const pick = await vscode.window.showQuickPick([...BUDGETS, custom], { title: "evoteam: token budget", ignoreFocusOut: true });
    if (pick === undefined) {
      return undefined;
    }
    const text =
      pick === custom
        ? await vscode.window.showInputBox({
            title: "evoteam: token budget",
            prompt: "Tokens across all roles and the supervisor",
            validateInput: (t) => (typeof parseBudget(t) === "string" ? (parseBudget(t) as string) : undefined),
          })
        : pick;
    const value = text === undefined ? undefined : parseBudget(text);
    return typeof value === "number" ? value : undefined;
  }
  const remote = "ssh://HOST…";
  const pick = await vscode.window.showQuickPick(["local", remote, "ray"], { title: "evoteam: where candidates run", ignoreFocusOut: true });
  if (pick !== remote) {
    return pick;
  }
  const typed = await vscode.window.showInputBox({ title: "evoteam: runner", value: "ssh://", validateInput: checkRunner });
  return typed?.trim();
}
