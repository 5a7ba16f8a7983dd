// The evoteam extension: starts `evoteam serve` with the right Python, and wires the editor to it: "Evolve this
// kernel", cancel, report and accept commands, the "Evolution runs" tree, candidate diffs and the status bar.

import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as vscode from "vscode";
import { LanguageClient, LanguageClientOptions, ServerOptions } from "vscode-languageclient/node";
import { GitContent, SCHEME, git, gitUri } from "./gitContent";
import { Interpreter, PROBE, chooseInterpreter, explainProbe, serverArgs } from "./interpreter";
import { Asked, BUDGETS, TEAMS, checkRunner, parseBudget, unconfigured } from "./options";
import { showReport } from "./report";
import { RunSummary, progressRun, speed, statusText, worktreeDir } from "./runs";
import { Node, RunsTree } from "./runsTree";

const KERNEL_LANGUAGES = ["cpp", "cuda-cpp", "c", "python"];

let client: LanguageClient | undefined;
let output: vscode.OutputChannel;
/** The latest `$/progress` message of each live run (the status bar shows it). */
const progress = new Map<string, string>();

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("evoteam");
  const tree = new RunsTree(ask);
  const status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
  status.command = "evoteamRuns.focus";
  status.name = "evoteam runs";
  const showStatus = (): void => {
    const text = statusText(tree.all(), progress);
    if (text === null) {
      status.hide();
    } else {
      status.text = text;
      status.tooltip = "evoteam: live run (click for the runs)";
      status.show();
    }
  };
  const command = (name: string, fn: (...args: never[]) => unknown): void => {
    context.subscriptions.push(vscode.commands.registerCommand(name, (...args: never[]) => guarded(name, () => fn(...args))));
  };
  context.subscriptions.push(
    output,
    status,
    vscode.window.createTreeView("evoteamRuns", { treeDataProvider: tree, showCollapseAll: true }),
    vscode.workspace.registerTextDocumentContentProvider(SCHEME, new GitContent()),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("evoteam.python")) {
        void restart(tree, showStatus);
      }
    }),
  );
  command("evoteam.showLog", () => output.show());
  command("evoteam.refreshRuns", async () => {
    tree.reset(await ask<RunSummary[]>("evoteam.runs"));
    showStatus();
  });
  command("evoteam.evolveKernel", (uri?: vscode.Uri) => evolveKernel(uri));
  command("evoteam.cancelRun", async (node?: Node) => {
    const run = node?.kind === "run" ? node.run.run : await pickRun(tree, (r) => r.live, "No run is live.");
    if (run) {
      const answer = await ask<{ cancelled: boolean; finished?: string }>("evoteam.cancel", run);
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
        () => ask<{ page: string }>("evoteam.report", run),
      );
      await showReport(run, answer.page);
    }
  });
  command("evoteam.acceptWinner", async () => {
    const run = await pickRun(tree, (r) => r.best !== null, "No run has a passing candidate yet.");
    if (run) {
      await accept(run);
    }
  });
  command("evoteam.acceptCandidate", (node: Node) => node.kind === "candidate" && accept(node.run, node.candidate.id));
  command("evoteam.openCandidateDiff", (node: Node) => node.kind === "candidate" && openDiff(node.run, node.candidate.id));
  command("evoteam.copyBranch", async (node: Node) => {
    if (node.kind !== "run") {
      await vscode.env.clipboard.writeText(node.round.branch);
      void vscode.window.showInformationMessage(`evoteam: copied ${node.round.branch}`);
    }
  });
  command("evoteam.checkoutWorktree", (node: Node) => node.kind !== "run" && checkoutWorktree(node.round.branch));
  await start(tree, showStatus);
}

export async function deactivate(): Promise<void> {
  await client?.stop();
  client = undefined;
}

// -- the server ------------------------------------------------------------------------------------------------

async function start(tree: RunsTree, showStatus: () => void): Promise<void> {
  const folder = vscode.workspace.workspaceFolders?.[0];
  const python = await interpreter(folder);
  output.appendLine(`evoteam: starting the language server with ${python.path} (from the ${python.source})`);
  const probe = await run(python.path, PROBE, folder?.uri.fsPath);
  const outcome = explainProbe(python, probe.code, probe.stderr);
  if (!outcome.ok) {
    output.appendLine(outcome.message ?? "");
    output.appendLine(probe.stderr);
    void vscode.window.showErrorMessage(outcome.message ?? "evoteam: the server cannot start", "Show log", "Open settings").then((pick) => {
      if (pick === "Show log") {
        output.show();
      } else if (pick === "Open settings") {
        void vscode.commands.executeCommand("workbench.action.openSettings", "evoteam.python");
      }
    });
    return;
  }
  const serverOptions: ServerOptions = {
    command: python.path,
    args: serverArgs(),
    options: { cwd: folder?.uri.fsPath, env: { ...process.env } },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: KERNEL_LANGUAGES.map((language) => ({ scheme: "file", language })),
    outputChannel: output,
    synchronize: { configurationSection: "evoteam" },
    middleware: {
      // The client shows the server's progress itself; the status bar takes its messages too.
      handleWorkDoneProgress: (token, params, next) => {
        const run = progressRun(token);
        if (run !== null) {
          if (params.kind === "end") {
            progress.delete(run);
          } else if (params.message) {
            progress.set(run, params.message);
          }
          showStatus();
        }
        next(token, params);
      },
    },
  };
  const started = new LanguageClient("evoteam", "evoteam", serverOptions, clientOptions);
  started.onNotification("evoteam/runUpdated", (run: RunSummary) => {
    tree.update(run);
    showStatus();
  });
  try {
    await started.start();
  } catch (error) {
    output.appendLine(`evoteam: the language server did not start: ${String(error)}`);
    void vscode.window.showErrorMessage(`evoteam: the language server did not start: ${String(error)}`, "Show log").then((pick) => {
      if (pick) {
        output.show();
      }
    });
    return;
  }
  client = started;
  tree.reset(await ask<RunSummary[]>("evoteam.runs"));
  showStatus();
}

async function restart(tree: RunsTree, showStatus: () => void): Promise<void> {
  const old = client;
  client = undefined;
  await old?.stop();
  await start(tree, showStatus);
}

async function interpreter(folder: vscode.WorkspaceFolder | undefined): Promise<Interpreter> {
  return chooseInterpreter({
    fromPythonExtension: await pythonExtensionInterpreter(folder?.uri),
    setting: vscode.workspace.getConfiguration("evoteam", folder?.uri).get<string | null>("python"),
    folders: (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath),
    exists: (path) => fs.existsSync(path),
  });
}

/** The Python extension's interpreter for the workspace (its `environments` API, else the older `settings`). */
async function pythonExtensionInterpreter(resource: vscode.Uri | undefined): Promise<string | undefined> {
  const extension = vscode.extensions.getExtension("ms-python.python");
  if (extension === undefined) {
    return undefined;
  }
  try {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const api: any = extension.isActive ? extension.exports : await extension.activate();
    const active = api?.environments?.getActiveEnvironmentPath?.(resource);
    if (typeof active?.path === "string" && active.path) {
      return active.path;
    }
    const details = api?.settings?.getExecutionDetails?.(resource);
    return Array.isArray(details?.execCommand) ? details.execCommand[0] : undefined;
  } catch (error) {
    output.appendLine(`evoteam: the Python extension gave no interpreter: ${String(error)}`);
    return undefined;
  }
}

/** A server command's answer; an error answer becomes an Error with the server's message. */
async function ask<T>(command: string, ...args: unknown[]): Promise<T> {
  if (client === undefined) {
    throw new Error("the evoteam language server is not running (evoteam: Show server log)");
  }
  return client.sendRequest<T>("workspace/executeCommand", { command, arguments: args });
}

async function guarded(name: string, fn: () => unknown): Promise<void> {
  try {
    await fn();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    output.appendLine(`evoteam: ${name}: ${message}`);
    void vscode.window.showErrorMessage(`evoteam: ${message}`);
  }
}

function run(command: string, args: string[], cwd: string | undefined): Promise<{ code: string | number | null; stderr: string }> {
  return new Promise((resolve) => {
    execFile(command, args, { cwd, timeout: 60_000 }, (error, _out, stderr) => {
      if (error === null) {
        resolve({ code: 0, stderr });
      } else {
        const code = (error as NodeJS.ErrnoException).code;
        resolve({ code: typeof code === "string" ? code : (error as { code?: number }).code ?? 1, stderr: String(stderr) });
      }
    });
  });
}

// -- commands --------------------------------------------------------------------------------------------------

async function evolveKernel(given?: vscode.Uri): Promise<void> {
  const uri = given ?? vscode.window.activeTextEditor?.document.uri;
  if (uri === undefined || uri.scheme !== "file") {
    throw new Error("open a kernel file (.cu, .cuh, .cpp, .py) to evolve it");
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
  const options: Record<string, unknown> = {};
  for (const key of unconfigured((k) => config.inspect(k))) {
    const value = await askOption(key);
    if (value === undefined) {
      return; // dismissed: nothing starts
    }
    options[key] = value;
  }
  const answer = await vscode.window.withProgress(
    { location: vscode.ProgressLocation.Notification, title: `evoteam: starting a run on ${vscode.workspace.asRelativePath(uri)}` },
    () => ask<{ run: string }>("evoteam.evolve", uri.toString(), options),
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

async function accept(run: string, candidate?: string): Promise<void> {
  const answer = await ask<{ applied: boolean; candidate: string; speedup: number | null; files: string[]; failureReason?: string }>(
    "evoteam.accept",
    ...(candidate ? [run, candidate] : [run]),
  );
  if (!answer.applied) {
    throw new Error(`the edit was not applied${answer.failureReason ? `: ${answer.failureReason}` : ""}`);
  }
  void vscode.window.showInformationMessage(
    answer.files.length
      ? `evoteam: accepted ${answer.candidate} (${speed(answer.speedup)}) into ${answer.files.join(", ")} (unsaved; undo takes it back)`
      : `evoteam: the files already hold ${answer.candidate}`,
  );
}

async function openDiff(run: string, candidate: string): Promise<void> {
  const diff = await ask<{ root: string; base: string; sha: string; paths: string[] }>("evoteam.candidateDiff", run, candidate);
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
