// Bundles the extension (src/extension.ts → dist/extension.js, vscode-languageclient included) with esbuild;
// with --tests, also the unit tests (test/*.test.ts → out/test/*.test.js, run by `node --test`).
import { build } from "esbuild";
import { readdirSync } from "node:fs";

const common = { bundle: true, platform: "node", format: "cjs", target: "node18", logLevel: "warning" };
await build({ ...common, entryPoints: ["src/extension.ts"], outfile: "dist/extension.js", external: ["vscode"], sourcemap: true });
if (process.argv.includes("--tests")) {
  const tests = readdirSync("test").filter((name) => name.endsWith(".test.ts"));
  await build({ ...common, entryPoints: tests.map((name) => `test/${name}`), outdir: "out/test", external: ["vscode"] });
}
