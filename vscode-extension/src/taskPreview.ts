// The text of the preview that "Evolve this kernel" shows for a kernel file that is no task yet: what adding it
// writes (the [[kernel]] entry appended to an evoteam.toml, or a new one; the definition template; the workloads).
// Plain functions, no vscode: unit-tested with node.

import { TaskEntryResult } from "./messages.generated";

/** One section per file, the evoteam.toml first; `relative` names a path as the workspace shows it. */
export function previewText(entry: TaskEntryResult, relative: (path: string) => string): string {
  const lines = [
    `# Add ${entry.name} to ${relative(entry.config)}`,
    "",
    "Nothing is written until you choose \"Add to evoteam.toml\". The definition is a template: describe what the",
    "kernel computes (axes, inputs, outputs, a PyTorch reference) and its shapes in the workloads file before a run.",
  ];
  for (const path of entry.files) {
    const text = entry.texts[path] ?? "";
    const what = path === entry.config && entry.configExists ? "appended to" : "new file";
    lines.push("", `## ${what} ${relative(path)}`, "", "```" + fence(path), text.replace(/^\n+|\n+$/g, ""), "```");
  }
  return lines.join("\n") + "\n";
}

function fence(path: string): string {
  if (path.endsWith(".toml")) {
    return "toml";
  }
  return path.endsWith(".json") ? "json" : path.endsWith(".jsonl") ? "jsonl" : "";
}
