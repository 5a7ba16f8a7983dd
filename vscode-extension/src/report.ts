// "Show report": the run's HTML report (written by the server's evoteam.report) in a webview, its PNG plots
// loaded from the report's folder.

import * as fs from "node:fs/promises";
import * as path from "node:path";
import * as vscode from "vscode";

export async function showReport(run: string, page: string): Promise<vscode.WebviewPanel> {
  const folder = vscode.Uri.file(path.dirname(page));
  const panel = vscode.window.createWebviewPanel("evoteamReport", `evoteam report: ${run}`, vscode.ViewColumn.Active, {
    enableScripts: false,
    localResourceRoots: [folder],
  });
  const html = await fs.readFile(page, "utf-8");
  panel.webview.html = html.replace(/(src=")([^":/]+\.png)(")/g, (_, open: string, name: string, close: string) => {
    return `${open}${panel.webview.asWebviewUri(vscode.Uri.joinPath(folder, name))}${close}`;
  });
  return panel;
}
