// The language client: starts `evoteam serve` with the chosen Python (after an import probe that says what is
// wrong), restarts and stops it, sends the server's commands (typed by messages.generated.ts) and hands on what
// the server pushes: `evoteam/runUpdated` and its `$/progress`.

import * as vscode from "vscode";
import { LanguageClient, LanguageClientOptions, ServerOptions } from "vscode-languageclient/node";
import { PROBE, explainProbe, serverArgs } from "./interpreter";
import { CommandName, CommandTypes, NotificationTypes, RUN_UPDATED } from "./messages.generated";
import { findInterpreter, runProbe } from "./python";
import { ProgressValue } from "./runs";

const KERNEL_LANGUAGES = ["cpp", "cuda-cpp", "c", "python"];

/** A server command (`workspace/executeCommand`), typed by its name; an error answer rejects with its message. */
export type Ask = <C extends CommandName>(command: C, ...args: CommandTypes[C]["args"]) => Promise<CommandTypes[C]["result"]>;

/** One `$/progress` notification of the server. */
export interface Progress {
  token: string | number;
  value: ProgressValue;
}

export class ServerClient implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private readonly runUpdated = new vscode.EventEmitter<NotificationTypes[typeof RUN_UPDATED]>();
  private readonly progressed = new vscode.EventEmitter<Progress>();
  /** `evoteam/runUpdated`: one run changed or was removed. */
  readonly onRunUpdated = this.runUpdated.event;
  /** The server's `$/progress` (the language client shows it too). */
  readonly onProgress = this.progressed.event;

  constructor(private readonly output: vscode.OutputChannel) {}

  /** Starts the server in the first workspace folder; false when it did not start (an error notification says why). */
  async start(): Promise<boolean> {
    const output = this.output;
    const folder = vscode.workspace.workspaceFolders?.[0];
    const python = await findInterpreter(folder, output);
    output.appendLine(`evoteam: starting the language server with ${python.path} (from the ${python.source})`);
    const probe = await runProbe(python.path, PROBE, folder?.uri.fsPath);
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
      return false;
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
          this.progressed.fire({ token, value: params });
          next(token, params);
        },
      },
    };
    const started = new LanguageClient("evoteam", "evoteam", serverOptions, clientOptions);
    started.onNotification(RUN_UPDATED, (update: NotificationTypes[typeof RUN_UPDATED]) => this.runUpdated.fire(update));
    try {
      await started.start();
    } catch (error) {
      output.appendLine(`evoteam: the language server did not start: ${String(error)}`);
      void vscode.window.showErrorMessage(`evoteam: the language server did not start: ${String(error)}`, "Show log").then((pick) => {
        if (pick) {
          output.show();
        }
      });
      return false;
    }
    this.client = started;
    return true;
  }

  /** Stops the server and starts it again (after the evoteam.python setting changed). */
  async restart(): Promise<boolean> {
    const old = this.client;
    this.client = undefined;
    await old?.stop();
    return this.start();
  }

  async stop(): Promise<void> {
    await this.client?.stop();
    this.client = undefined;
  }

  readonly ask: Ask = async (command, ...args) => {
    if (this.client === undefined) {
      throw new Error("the evoteam language server is not running (evoteam: Show server log)");
    }
    return this.client.sendRequest("workspace/executeCommand", { command, arguments: args });
  };

  dispose(): void {
    this.runUpdated.dispose();
    this.progressed.dispose();
  }
}
