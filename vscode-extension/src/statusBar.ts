// The status bar item of the live runs: the newest live run's round, team, best and tokens (the server's latest
// `$/progress` message for it, else the same figures from its run summary), `(+N)` for the others; a click
// focuses the runs view.

import * as vscode from "vscode";
import { RunSummary } from "./messages.generated";
import { ProgressValue, applyProgress, statusText } from "./runs";

export class RunStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
  /** The latest `$/progress` message of each live run. */
  private readonly progress = new Map<string, string>();

  /** `runs`: the runs as the runs view has them. */
  constructor(private readonly runs: () => RunSummary[]) {
    this.item.command = "evoteamRuns.focus";
    this.item.name = "evoteam runs";
  }

  /** A `$/progress` notification of the server: a run's is taken, and the item redrawn. */
  progressed(token: string | number, value: ProgressValue): void {
    if (applyProgress(this.progress, token, value)) {
      this.show();
    }
  }

  /** Redraws the item (hidden while no run is live). */
  show(): void {
    const text = statusText(this.runs(), this.progress);
    if (text === null) {
      this.item.hide();
    } else {
      this.item.text = text;
      this.item.tooltip = "evoteam: live run (click for the runs)";
      this.item.show();
    }
  }

  dispose(): void {
    this.item.dispose();
  }
}
