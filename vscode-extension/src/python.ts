// Which Python starts the language server, found with VS Code's help (the Python extension's interpreter, the
// evoteam.python setting, the workspace folders; the order itself is interpreter.ts's), and the import probe that
// is run with it before the server starts.

import { execFile } from "node:child_process";
import * as fs from "node:fs";
import * as vscode from "vscode";
import { Interpreter, chooseInterpreter } from "./interpreter";

/** The interpreter for the workspace folder (the first of the Python extension's, the setting, .venv, PATH). */
export async function findInterpreter(folder: vscode.WorkspaceFolder | undefined, output: vscode.OutputChannel): Promise<Interpreter> {
  return chooseInterpreter({
    fromPythonExtension: await pythonExtensionInterpreter(folder?.uri, output),
    setting: vscode.workspace.getConfiguration("evoteam", folder?.uri).get<string | null>("python"),
    folders: (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath),
    exists: (path) => fs.existsSync(path),
  });
}

/** The Python extension's interpreter for the workspace (its `environments` API, else the older `settings`). */
async function pythonExtensionInterpreter(resource: vscode.Uri | undefined, output: vscode.OutputChannel): Promise<string | undefined> {
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

/** Runs `command args` in `cwd`: its exit status (or spawn error code: ENOENT, EACCES) and stderr. */
export function runProbe(command: string, args: string[], cwd: string | undefined): Promise<{ code: string | number | null; stderr: string }> {
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
