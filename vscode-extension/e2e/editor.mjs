// The evoteam extension's editor features on kernel files that are no task, in a real VS Code (code-server,
// headless chromium; see harness.mjs): a CUDA file shows its kernels' ptxas resources as inlay hints (with
// --cuda: nvcc is installed); a C++ file shows a compile error typed into it while it is still unsaved; "Evolve
// this kernel" on that file offers to add it to evoteam.toml with a preview beside it, and "Add to evoteam.toml"
// writes the entry and opens the definition template. What happened is printed as one JSON line on stdout.
//
//   node vscode-extension/e2e/editor.mjs --folder REPO --vsix evoteam.vsix --python PY --cu FILE --cpp FILE \
//        --out DIR [--cuda]
//
// FILE paths are relative to REPO and are no task of it. Screenshots (numbered by step) and code-server.log go to
// DIR. Exit 0 when every step passed; 1 with the failing step, a failure.png and the log otherwise.
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startSession } from './harness.mjs';

const { values: args } = parseArgs({
  options: {
    folder: { type: 'string' }, vsix: { type: 'string' }, python: { type: 'string' }, cu: { type: 'string' },
    cpp: { type: 'string' }, out: { type: 'string' }, cuda: { type: 'boolean', default: false },
    keep: { type: 'boolean', default: false },
  },
});
for (const name of ['folder', 'vsix', 'python', 'cu', 'cpp', 'out']) {
  if (!args[name]) {
    console.error(`editor.mjs: --${name} is required`);
    process.exit(2);
  }
}
// Each step's wait: long, so that a busy machine's slowness is never a failure; only a step that never comes is.
const STEP_TIMEOUT = 120_000;
const started = Date.now();
const step = (what) => console.error(`e2e: ${what} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
const settings = {
  'evoteam.python': args.python,
  'evoteam.llm': 'offline',
  'editor.inlayHints.enabled': 'on',
};

async function main() {
  const vs = await startSession({ folder: args.folder, vsix: args.vsix, settings, outDir: args.out });
  const { page } = vs;
  const found = {};
  let failed = null;
  try {
    step('workbench ready');
    await vs.openFile(args.cu);
    if (args.cuda) {
      await page.locator('.editor-group-container.active .view-lines', { hasText: 'ptxas:' }).first()
        .waitFor({ timeout: STEP_TIMEOUT });
      found.cudaHints = (await vs.editorText()).split('\n').filter((line) => line.includes('ptxas:')).map((l) => l.trim());
      await vs.screenshot('1-cuda-resources');
      step(`ptxas hints: ${found.cudaHints.join(' | ')}`);
    }

    // An error typed at the end of the C++ file, not saved: the debounced compile shows it.
    const name = path.basename(args.cpp);
    await vs.openFile(args.cpp);
    await page.locator('.editor-group-container.active .view-lines').first().click();
    await page.keyboard.press('Control+End');
    await page.keyboard.type('\nint typed_here = undefined_thing;\n');
    await page.locator('.tabs-container .tab.active.dirty', { hasText: name }).waitFor({ timeout: STEP_TIMEOUT });
    await page.keyboard.press('Control+Shift+M');
    const problem = page.locator('.markers-panel .monaco-list-row', { hasText: 'undefined_thing' }).first();
    await problem.waitFor({ timeout: STEP_TIMEOUT });
    found.typedProblem = (await problem.innerText()).replace(/\s+/g, ' ').trim();
    found.stillDirty = await page.locator('.tabs-container .tab.dirty', { hasText: name }).count() > 0;
    await vs.screenshot('2-diagnostic-while-typing');
    step(`problem while typing: ${found.typedProblem}`);

    // "Evolve this kernel" on a file that is no task: the preview of what adding it writes, then "Add".
    await vs.openFile(args.cpp);
    await vs.runCommand('evoteam: Evolve this kernel');
    const offer = await vs.waitForNotification(/is not a task yet/, { timeoutMs: STEP_TIMEOUT });
    found.offer = (await offer.locator('.notification-list-item-message').innerText()).trim();
    found.offerButtons = (await offer.locator('.monaco-button').allInnerTexts()).map((t) => t.trim());
    const preview = page.locator('.editor-instance .view-lines', { hasText: '[[kernel]]' }).first();
    await preview.waitFor({ timeout: STEP_TIMEOUT });
    found.previewTab = (await page.locator('.tabs-container .tab', { hasText: 'to evoteam.toml' }).first().innerText()).trim();
    found.preview = (await preview.innerText()).replace(/\u00a0/g, ' ');
    await vs.screenshot('3-add-task-preview');
    step(`offered: ${found.offer}`);
    await offer.locator('.monaco-button', { hasText: 'Add to evoteam.toml' }).click();
    const added = await vs.waitForNotification(/evoteam: added task /, { timeoutMs: STEP_TIMEOUT });
    found.added = (await added.locator('.notification-list-item-message').innerText()).trim();
    await page.locator('.tabs-container .tab.active', { hasText: '.definition.json' }).waitFor({ timeout: STEP_TIMEOUT });
    await vs.screenshot('4-task-added');
    step(found.added);
    found.external = vs.externalRequests();
  } catch (error) {
    failed = error;
    await vs.screenshot('failure').catch(() => {});
  } finally {
    await vs.stop({ keep: args.keep || failed !== null }).catch((error) => {
      failed = failed ?? error;
    });
  }
  if (failed) {
    console.error(`e2e: FAILED: ${failed.stack || failed}`);
    console.log(JSON.stringify({ ok: false, ...found, error: String(failed) }));
    process.exit(1);
  }
  console.log(JSON.stringify({ ok: true, ...found, seconds: (Date.now() - started) / 1000 }));
}

await main();
