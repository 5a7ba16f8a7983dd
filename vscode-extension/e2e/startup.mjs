// The evoteam extension when its language server cannot start, in a real VS Code (see harness.mjs): with
// `evoteam.python` set to PY, opening a kernel file must show an error notification that contains EXPECT and a
// "Show log" button, which opens the extension's output with the same message. One JSON line on stdout.
//
//   node vscode-extension/e2e/startup.mjs --folder REPO --vsix evoteam.vsix --python PY --kernel FILE \
//        --expect TEXT --out DIR
import { parseArgs } from 'node:util';
import { startSession } from './harness.mjs';

const { values: args } = parseArgs({
  options: {
    folder: { type: 'string' }, vsix: { type: 'string' }, python: { type: 'string' },
    kernel: { type: 'string' }, expect: { type: 'string' }, out: { type: 'string' },
  },
});
for (const name of ['folder', 'vsix', 'python', 'kernel', 'expect', 'out']) {
  if (!args[name]) {
    console.error(`startup.mjs: --${name} is required`);
    process.exit(2);
  }
}

const vs = await startSession({ folder: args.folder, vsix: args.vsix, settings: { 'evoteam.python': args.python }, outDir: args.out });
const found = {};
let failed = null;
try {
  await vs.openFile(args.kernel); // a C++ file activates the extension, which tries to start the server
  const toast = await vs.waitForNotification(args.expect, { timeoutMs: 120_000 });
  found.message = (await toast.locator('.notification-list-item-message').innerText()).trim();
  found.buttons = (await toast.locator('.monaco-button').allInnerTexts()).map((t) => t.trim());
  await vs.screenshot('1-error');
  await toast.locator('.monaco-button', { hasText: 'Show log' }).click();
  const log = vs.page.locator('.output-view, .part.panel .editor-instance .view-lines').filter({ hasText: args.expect }).first();
  await log.waitFor({ timeout: 120_000 });
  found.logShown = true;
  await vs.screenshot('2-log');
  found.external = vs.externalRequests();
} catch (error) {
  failed = error;
  await vs.screenshot('failure').catch(() => {});
} finally {
  await vs.stop({ keep: failed !== null }).catch((error) => {
    failed = failed ?? error;
  });
}
console.log(JSON.stringify({ ok: failed === null, ...found, ...(failed ? { error: String(failed) } : {}) }));
process.exit(failed ? 1 : 0);
