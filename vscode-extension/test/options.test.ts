// What "Evolve this kernel" asks, and the checks of what the user types.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Inspected, checkRunner, parseBudget, unconfigured } from "../src/options";

test("only options that no settings scope sets are asked for", () => {
  const set: Record<string, Inspected> = { team: { globalValue: "fixed" }, budget: { workspaceFolderValue: 5 }, runner: {} };
  assert.deepEqual(unconfigured((k) => set[k]), ["runner"]);
  assert.deepEqual(unconfigured(() => undefined), ["team", "budget", "runner"]);
  assert.deepEqual(unconfigured(() => ({ workspaceValue: 1 })), []);
});

test("a budget is a whole number of tokens, with separators or a k/M suffix", () => {
  assert.equal(parseBudget("200000"), 200000);
  assert.equal(parseBudget(" 200,000 "), 200000);
  assert.equal(parseBudget("1_000_000"), 1000000);
  assert.equal(parseBudget("200k"), 200000);
  assert.equal(parseBudget("1.5M"), 1500000);
  assert.equal(typeof parseBudget("lots"), "string");
  assert.equal(typeof parseBudget("-5"), "string");
  assert.equal(typeof parseBudget("1.5"), "string");
});

test("a runner is local, ray, ssh://HOST or ray://ADDR", () => {
  for (const good of ["local", "ray", "ssh://gpu-box", "ray://10.0.0.1:10001"]) {
    assert.equal(checkRunner(good), undefined, good);
  }
  for (const bad of ["", "ssh://", "gpu-box", "ssh://a b"]) {
    assert.equal(typeof checkRunner(bad), "string", bad);
  }
});
