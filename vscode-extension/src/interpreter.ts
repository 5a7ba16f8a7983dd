// Which Python starts the language server, and what a failed start means: pure logic, no vscode import.

export type InterpreterSource = "python extension" | "evoteam.python setting" | "workspace .venv" | "PATH";

export interface Interpreter {
  path: string;
  source: InterpreterSource;
}

export interface Candidates {
  /** The Python extension's active interpreter for the workspace, when that extension is installed. */
  fromPythonExtension?: string;
  /** The `evoteam.python` setting. */
  setting?: string | null;
  /** Workspace folders, searched for `.venv/bin/python` (what `scripts/setup` makes). */
  folders: string[];
  exists: (path: string) => boolean;
}

/** The first of: the Python extension's interpreter, the setting, a workspace `.venv`, `python3` on PATH. */
export function chooseInterpreter(found: Candidates): Interpreter {
  if (found.fromPythonExtension) {
    return { path: found.fromPythonExtension, source: "python extension" };
  }
  if (found.setting) {
    return { path: found.setting, source: "evoteam.python setting" };
  }
  for (const folder of found.folders) {
    const venv = `${folder.replace(/\/+$/, "")}/.venv/bin/python`;
    if (found.exists(venv)) {
      return { path: venv, source: "workspace .venv" };
    }
  }
  return { path: "python3", source: "PATH" };
}

/** The server's command line for an interpreter. */
export function serverArgs(): string[] {
  return ["-m", "evoteam.cli.main", "serve"];
}

/** What `python -c 'import evoteam.server.app'` is run with before the server starts. */
export const PROBE = ["-c", "import evoteam.server.app"];

export interface ProbeOutcome {
  ok: boolean;
  /** One line for the user: what is wrong and what to do. */
  message?: string;
}

/** The meaning of the probe's result: `code` is the spawn error code (ENOENT, EACCES) or the exit status. */
export function explainProbe(python: Interpreter, code: string | number | null, stderr: string): ProbeOutcome {
  if (code === 0 || code === null) {
    return { ok: true };
  }
  const where = `${python.path} (from the ${python.source})`;
  if (code === "ENOENT") {
    return {
      ok: false,
      message: `evoteam: no Python interpreter at ${where}. Set evoteam.python to a Python with evoteam installed.`,
    };
  }
  if (code === "EACCES") {
    return { ok: false, message: `evoteam: ${where} cannot be run (permission denied).` };
  }
  if (/No module named ['"]?evoteam/.test(stderr)) {
    return {
      ok: false,
      message: `evoteam: the evoteam package is not installed for ${where}: pip install evoteam there, or set evoteam.python.`,
    };
  }
  const last = stderr.trim().split("\n").pop() ?? "";
  return { ok: false, message: `evoteam: the language server cannot start with ${where}: ${last || `exit ${code}`}` };
}
