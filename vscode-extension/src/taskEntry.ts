// "Evolve this kernel" on a kernel file that is no task yet: the server says what adding it would write, a
// read-only preview of that opens beside the file, and "Add to evoteam.toml" has the server write it; then the
// definition template opens, since it must describe the kernel before a run can mean anything.

import * as path from "node:path";
import * as vscode from "vscode";
import { CREATE_TASK_ENTRY } from "./messages.generated";
import { Ask } from "./serverClient";
import { previewText } from "./taskPreview";

export const PREVIEW_SCHEME = "evoteam-preview";
export const ADD = "Add to evoteam.toml";
const previews = new Map<string, string>();

export class PreviewContent implements vscode.TextDocumentContentProvider {
  provideTextDocumentContent(uri: vscode.Uri): string {
    return previews.get(uri.toString()) ?? "";
  }
}

/** True when `uri` is a task already (evolve goes on); otherwise offers to add it and returns false. */
export async function isTaskOrOffer(ask: Ask, uri: vscode.Uri): Promise<boolean> {
  const preview = await ask(CREATE_TASK_ENTRY, uri.toString(), true);
  if (preview.existing) {
    return true;
  }
  const relative = (p: string): string => vscode.workspace.asRelativePath(p);
  const shown = vscode.Uri.from({ scheme: PREVIEW_SCHEME, path: `/Add ${preview.name} to evoteam.toml.md` });
  previews.set(shown.toString(), previewText(preview, relative));
  const document = await vscode.workspace.openTextDocument(shown);
  await vscode.window.showTextDocument(document, { viewColumn: vscode.ViewColumn.Beside, preview: true, preserveFocus: true });
  const pick = await vscode.window.showInformationMessage(
    `evoteam: ${relative(uri.fsPath)} is not a task yet. Add it to ${relative(preview.config)}? (preview beside)`,
    ADD,
    "Cancel",
  );
  if (pick !== ADD) {
    return false;
  }
  const written = await ask(CREATE_TASK_ENTRY, uri.toString(), false);
  const definition = written.files.find((f) => f.endsWith(".definition.json"));
  if (definition !== undefined) {
    await vscode.window.showTextDocument(vscode.Uri.file(definition), { viewColumn: vscode.ViewColumn.Beside });
  }
  void vscode.window.showInformationMessage(
    `evoteam: added task ${written.name} to ${relative(written.config)}. Describe the kernel in ` +
      `${definition ? path.basename(definition) : "its definition"} and its shapes in the workloads file, then evolve it.`,
  );
  return false;
}
