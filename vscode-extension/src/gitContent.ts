// Read-only documents of a commit's file (`evoteam-git:/PATH?ROOT#SHA` → `git show SHA:PATH` in ROOT), the
// two sides of a candidate's diff against its run's base.

import { execFile } from "node:child_process";
import * as vscode from "vscode";

export const SCHEME = "evoteam-git";

export function gitUri(root: string, sha: string, path: string): vscode.Uri {
  return vscode.Uri.from({ scheme: SCHEME, path: `/${path}`, query: root, fragment: sha });
}

/** `git ARGS` in `cwd`: its stdout, or an Error that names the git subcommand and says what git said. */
export function git(args: string[], cwd: string, what = `git ${args[0]}`): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile("git", args, { cwd, maxBuffer: 64 << 20 }, (error, out, err) =>
      error ? reject(new Error(`${what}: ${err.trim() || error.message}`)) : resolve(out),
    );
  });
}

export class GitContent implements vscode.TextDocumentContentProvider {
  provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const path = uri.path.replace(/^\//, "");
    return git(["show", `${uri.fragment}:${path}`], uri.query, `git show ${uri.fragment.slice(0, 12)}:${path}`);
  }
}
