// package.json: every command a menu, view or the code names is declared; the kernel files get the context menu.
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { test } from "node:test";

const manifest = JSON.parse(readFileSync("package.json", "utf-8"));
const declared = new Set<string>(manifest.contributes.commands.map((c: { command: string }) => c.command));

test("every command in a menu is declared, and every declared command is registered by the extension", () => {
  const source = readdirSync("src")
    .filter((name) => name.endsWith(".ts"))
    .map((name) => readFileSync(`src/${name}`, "utf-8"))
    .join("\n");
  for (const [menu, items] of Object.entries(manifest.contributes.menus as Record<string, { command: string }[]>)) {
    for (const item of items) {
      assert.ok(declared.has(item.command), `${menu}: ${item.command} is not declared`);
    }
  }
  for (const name of declared) {
    assert.ok(source.includes(`command("${name}"`), `${name} is declared but not registered`);
  }
});

test("Evolve this kernel is in the palette and in the editor's context menu of .cu, .cuh, .cpp and .py files", () => {
  const evolve = manifest.contributes.commands.find((c: { command: string }) => c.command === "evoteam.evolveKernel");
  assert.equal(evolve.title, "Evolve this kernel");
  const [context] = manifest.contributes.menus["editor/context"];
  const when = new RegExp(context.when.split("=~ ")[1].slice(1, -1));
  for (const ext of [".cu", ".cuh", ".cpp", ".py"]) {
    assert.ok(when.test(ext), ext);
  }
  assert.ok(!when.test(".txt") && !when.test(".cuda"));
  assert.ok(!manifest.contributes.menus.commandPalette.some((m: { command: string }) => m.command === "evoteam.evolveKernel"));
});

test("the runs view lives in its own activity bar container", () => {
  assert.equal(manifest.contributes.views.evoteam[0].id, "evoteamRuns");
  assert.equal(manifest.contributes.views.evoteam[0].name, "Evolution runs");
  assert.equal(manifest.contributes.viewsContainers.activitybar[0].id, "evoteam");
});
