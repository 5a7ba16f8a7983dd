// Read-only documents of a commit's file (`evoteam-git:/PATH?ROOT#SHA` → `git show SHA:PATH` in ROOT), the
// two sides of a candidate's diff against its run's base.

import { execFile } from "node:child_process";
import * as vscode from "vscode";

export const SCHEME = "evoteam-git";

export function gitUri(root: string, sha: string, path: string): vscode.Uri {
  return vscode.Uri.from({ scheme: SCHEME, path: `/${path}`, query: root, fragment: sha });
}

export class GitContent implements vscode.TextDocumentContentProvider {
  provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const path = uri.path.replace(/^\//, "");
    return new Promise((resolve, reject) => {
      execFile("git", ["show", `${uri.fragment}:${path}`], { cwd: uri.query, maxBuffer: 64 << 20 }, (error, out, err) => {
        if (error) {
          reject(new Error(`git show ${uri.fragment.slice(0, 12)}:${path}: ${err.trim() || error.message}`));
        } else {
          resolve(out);
        }
      });
    });
  }
}
