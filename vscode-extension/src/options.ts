// What "Evolve this kernel" asks before it starts a run: the options the user has not configured, and the
// checks of what they type. Pure logic, no vscode import.

export type Asked = "team" | "budget" | "runner";
export const ASKED: Asked[] = ["team", "budget", "runner"];

/** What `WorkspaceConfiguration.inspect` says of one setting (the parts that tell whether the user set it). */
export interface Inspected {
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}

/** The options to ask for: those of team, budget and runner that no settings scope sets. */
export function unconfigured(inspect: (key: Asked) => Inspected | undefined): Asked[] {
  return ASKED.filter((key) => {
    const found = inspect(key);
    return (
      found === undefined ||
      (found.globalValue === undefined && found.workspaceValue === undefined && found.workspaceFolderValue === undefined)
    );
  });
}

export const TEAMS = [
  { label: "evolving", detail: "the supervisor reorganizes the team after each round" },
  { label: "fixed", detail: "Optimizer, Debugger, Profiling Scientist, Knowledge Integrator" },
  { label: "single", detail: "one agent" },
];

export const BUDGETS = ["50,000", "200,000", "1,000,000"];

/** A token budget typed by the user (digits, `_` or `,` between them, or a k/M suffix), or why it is not one. */
export function parseBudget(text: string): number | string {
  const plain = text.trim().replace(/[,_]/g, "");
  const match = /^(\d+(?:\.\d+)?)([kKmM]?)$/.exec(plain);
  if (!match) {
    return "a whole number of tokens, such as 200000, 200k or 1M";
  }
  const scale = { "": 1, k: 1e3, K: 1e3, m: 1e6, M: 1e6 }[match[2]] ?? 1;
  const value = Number(match[1]) * scale;
  if (!Number.isInteger(value)) {
    return "a whole number of tokens";
  }
  return value;
}

/** The server's runner pattern (`server/settings.py`): local, ray, ssh://HOST or ray://ADDR. */
export const RUNNER = /^(local|ray|ssh:\/\/\S+|ray:\/\/\S+)$/;

export function checkRunner(text: string): string | undefined {
  return RUNNER.test(text.trim()) ? undefined : "local, ray, ssh://HOST or ray://ADDR";
}
