// The preview of what adding a kernel file to evoteam.toml writes.
import assert from "node:assert/strict";
import { test } from "node:test";
import { previewText } from "../src/taskPreview";

const relative = (p: string): string => p.replace("/repo/", "");

test("the preview shows the entry appended to an existing evoteam.toml and each new file", () => {
  const text = previewText(
    {
      name: "square",
      config: "/repo/evoteam.toml",
      configExists: true,
      files: ["/repo/evoteam.toml", "/repo/square.definition.json", "/repo/square.workloads.jsonl"],
      texts: {
        "/repo/evoteam.toml": '\n[[kernel]]\nname = "square"\n',
        "/repo/square.definition.json": '{\n  "name": "square"\n}\n',
        "/repo/square.workloads.jsonl": '{"uuid": "square-n1024"}\n',
      },
      written: false,
      existing: false,
    },
    relative,
  );
  assert.match(text, /^# Add square to evoteam.toml\n/);
  assert.match(text, /## appended to evoteam.toml\n\n```toml\n\[\[kernel\]\]\nname = "square"\n```/);
  assert.match(text, /## new file square.definition.json\n\n```json\n\{\n {2}"name": "square"\n\}\n```/);
  assert.match(text, /## new file square.workloads.jsonl\n\n```jsonl\n\{"uuid": "square-n1024"\}\n```\n$/);
});

test("a new evoteam.toml is a new file", () => {
  const text = previewText(
    {
      name: "k",
      config: "/repo/k/evoteam.toml",
      configExists: false,
      files: ["/repo/k/evoteam.toml"],
      texts: { "/repo/k/evoteam.toml": "# Kernel tasks of this folder\n" },
      written: false,
      existing: false,
    },
    relative,
  );
  assert.match(text, /## new file k\/evoteam.toml/);
});
