// The evoteam extension's entry point: builds its parts and wires them together. The language client
// (serverClient.ts) starts `evoteam serve` with the right Python; the "Evolution runs" tree (runsTree.ts), the
// status bar item (statusBar.ts) and the commands (commands.ts, evolve.ts) take what it says. The messages
// exchanged with the server are typed by messages.generated.ts (generated from server/messages.py).

import * as vscode from "vscode";
import { registerCommands } from "./commands";
import { GitContent, SCHEME } from "./gitContent";
import { RunsTree } from "./runsTree";
import { ServerClient } from "./serverClient";
import { RunStatusBar } from "./statusBar";
import { PREVIEW_SCHEME, PreviewContent } from "./taskEntry";

/** The language client of the active extension: the one thing `deactivate` (called without arguments) must stop. */
let active: ServerClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("evoteam");
  const server = new ServerClient(output);
  const tree = new RunsTree(server.ask);
  const status = new RunStatusBar(() => tree.all());
  context.subscriptions.push(
    output,
    server,
    status,
    server.onRunUpdated((update) => {
      const stopped = tree.update(update);
      if (stopped !== null) {
        void vscode.window.showErrorMessage(stopped);
      }
    }),
    server.onProgress(({ token, value }) => status.progressed(token, value)),
    tree.onDidChangeTreeData(() => status.show()),
    vscode.window.createTreeView("evoteamRuns", { treeDataProvider: tree, showCollapseAll: true }),
    vscode.workspace.registerTextDocumentContentProvider(SCHEME, new GitContent()),
    vscode.workspace.registerTextDocumentContentProvider(PREVIEW_SCHEME, new PreviewContent()),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("evoteam.python")) {
        void start(tree, () => server.restart());
      }
    }),
  );
  registerCommands(context, { ask: server.ask, output, tree });
  active = server;
  await start(tree, () => server.start());
}

export async function deactivate(): Promise<void> {
  const server = active;
  active = undefined;
  await server?.stop();
}

/** Starts (or restarts) the server, then fills the runs view from it. */
async function start(tree: RunsTree, how: () => Promise<boolean>): Promise<void> {
  if (await how()) {
    await tree.refresh();
  }
}
