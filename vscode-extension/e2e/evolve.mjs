// The evoteam extension end to end in a real VS Code (code-server, headless chromium; see harness.mjs):
// install the built .vsix, open a kernel repository, run "Evolve this kernel" with the offline team, wait for
// the "Evolution runs" view to show a finished round and its candidates, open the best candidate's diff,
// accept the winner through the code action, save; show the report, copy the candidate's branch and check it
// out in a worktree from its context menu; start a second run and cancel it; set the file back to the start
// and accept the winner again from its context menu, then save. What happened is printed as one JSON line on stdout.
//
//   node vscode-extension/e2e/evolve.mjs --folder REPO --vsix evoteam.vsix --python PY --kernel FILE --out DIR
//
// REPO is a git repository with an evoteam.toml; FILE is a kernel source of it (relative); PY is a Python with
// evoteam installed. Screenshots (numbered by step) and code-server.log go to DIR. Exit 0 when every step
// passed; 1 with the failing step, a failure.png and the log otherwise.
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startSession } from './harness.mjs';

const { values: args } = parseArgs({
  options: {
    folder: { type: 'string' }, vsix: { type: 'string' }, python: { type: 'string' },
    kernel: { type: 'string' }, out: { type: 'string' }, keep: { type: 'boolean', default: false },
  },
});
for (const name of ['folder', 'vsix', 'python', 'kernel', 'out']) {
  if (!args[name]) {
    console.error(`evolve.mjs: --${name} is required`);
    process.exit(2);
  }
}
// The run's wait: one offline round, its best contenders re-timed, on a busy machine.
const RUN_TIMEOUT = 480_000;
// Each step's wait: long, so that a busy machine's slowness is never a failure; only a step that never comes is.
const STEP_TIMEOUT = 120_000;
const started = Date.now();
const step = (what) => console.error(`e2e: ${what} (${((Date.now() - started) / 1000).toFixed(1)} s)`);

const settings = {
  'evoteam.python': args.python,
  'evoteam.llm': 'offline',
  'evoteam.team': 'evolving',
  'evoteam.budget': 200000,
  'evoteam.runner': 'local',
  'evoteam.rounds': 1,
  'evoteam.evaluations': 4,
  'editor.codeLens': true,
  'editor.inlayHints.enabled': 'on',
};

/** Picks ``label`` in ``row``'s context menu (hovered, then Enter: a plain click does not reach the item). */
async function contextMenu(row, label) {
  await row.click({ button: 'right' });
  const item = row.page().locator('.monaco-menu .action-menu-item', { hasText: label }).first();
  await item.hover();
  await item.locator('.action-label').waitFor();
  await row.page().keyboard.press('Enter');
  await item.waitFor({ state: 'detached', timeout: STEP_TIMEOUT });
}

async function main() {
  const kernel = args.kernel;
  const name = path.basename(kernel);
  const before = fs.readFileSync(path.join(args.folder, kernel), 'utf8');
  const vs = await startSession({ folder: args.folder, vsix: args.vsix, settings, outDir: args.out });
  const { page } = vs;
  const found = {};
  let failed = null;
  try {
    step('workbench ready');
    await vs.openFile(kernel);
    // The server is up and knows the task: its code lens offers to evolve the kernel (no run yet).
    await page.locator('.codelens-decoration a', { hasText: 'Evolve this kernel' }).first().waitFor({ timeout: STEP_TIMEOUT });
    await vs.screenshot('1-kernel-open');
    step('kernel open, code lens shown');

    await vs.runCommand('evoteam: Evolve this kernel');
    const toast = await vs.waitForNotification(/evoteam: started run /, { timeoutMs: STEP_TIMEOUT });
    found.run = /started run (\S+)/.exec(await toast.innerText())[1];
    // The status bar item for the live run (the server's $/progress messages, else evoteam/runUpdated).
    const status = page.locator('.statusbar-item', { hasText: /evoteam: (round|starting) / }).first();
    await status.waitFor({ timeout: STEP_TIMEOUT });
    found.status = (await status.innerText()).trim();
    await vs.screenshot('2-run-started');
    step(`run ${found.run} started`);

    await vs.runCommand('evoteam: Focus on Evolution runs View');
    const tree = page.locator('.pane', { has: page.locator('.pane-header', { hasText: 'Evolution runs' }) });
    const runRow = tree.locator('.monaco-list-row', { hasText: found.run }).first();
    await runRow.waitFor({ timeout: STEP_TIMEOUT });
    // The run finishes in the background; its row's description says so (evoteam/runUpdated).
    await tree.locator('.monaco-list-row', { hasText: found.run }).filter({ hasText: '· rounds ·' })
      .first().waitFor({ timeout: RUN_TIMEOUT });
    step('run finished (tree updated live)');
    await runRow.click();
    const roundRow = tree.locator('.monaco-list-row', { hasText: 'round 1' }).first();
    await roundRow.waitFor({ timeout: STEP_TIMEOUT });
    found.round = (await roundRow.innerText()).replace(/\s+/g, ' ').trim();
    await roundRow.click();
    const bestRow = tree.locator('.monaco-list-row', { hasText: '★' }).first();
    await bestRow.waitFor({ timeout: STEP_TIMEOUT });
    found.best = (await bestRow.innerText()).replace(/\s+/g, ' ').trim();
    await vs.screenshot('3-tree-round');
    step(`tree: ${found.round} | ${found.best}`);

    await bestRow.click();
    const diffTab = page.locator('.tabs-container .tab.active', { hasText: 'base ↔' });
    await diffTab.waitFor({ timeout: STEP_TIMEOUT });
    await page.locator('.monaco-diff-editor').first().waitFor({ timeout: STEP_TIMEOUT });
    found.diffTitle = (await diffTab.innerText()).trim();
    // The diff is computed once both sides have loaded (git show through the extension's content provider).
    await page.locator('.monaco-diff-editor :is(.line-insert, .char-insert)').first().waitFor({ timeout: STEP_TIMEOUT });
    const sides = await page.locator('.monaco-diff-editor .view-lines').allInnerTexts();
    found.diffSides = sides.map((text) => text.replace(/\u00a0/g, ' '));
    await vs.screenshot('4-candidate-diff');
    step(`diff open: ${found.diffTitle}`);

    await vs.openFile(kernel);
    await page.locator('.codelens-decoration a', { hasText: /^best: / }).first().waitFor({ timeout: STEP_TIMEOUT });
    found.lens = (await page.locator('.codelens-decoration a', { hasText: /^best: / }).first().innerText()).trim();
    await page.locator('.editor-group-container.active .view-lines').first().click();
    await page.keyboard.press('Control+Home');
    await page.keyboard.press('Control+.');
    const action = page.locator('.action-widget .monaco-list-row', { hasText: 'Accept winning kernel' }).first();
    await action.waitFor({ timeout: STEP_TIMEOUT });
    found.action = (await action.innerText()).trim();
    await vs.screenshot('5-code-action');
    await page.keyboard.press('Enter'); // the row is focused ("Enter to Apply"); a click hits the pointer block
    await page.locator('.tabs-container .tab.active.dirty', { hasText: name }).waitFor({ timeout: STEP_TIMEOUT });
    step(`code action applied: ${found.action}`);
    await page.keyboard.press('Control+S');
    await page.locator('.tabs-container .tab.active.dirty', { hasText: name }).waitFor({ state: 'detached', timeout: STEP_TIMEOUT });
    await vs.screenshot('6-accepted-and-saved');
    found.changed = fs.readFileSync(path.join(args.folder, kernel), 'utf8') !== before;
    step(`saved; the file ${found.changed ? 'changed' : 'did NOT change'}`);

    // The run's report in a webview ("evoteam: Show report"; one run, so no question which).
    await vs.runCommand('evoteam: Show report');
    await page.locator('.tabs-container .tab.active', { hasText: `evoteam report: ${found.run}` }).waitFor({ timeout: 120_000 });
    const report = page.frameLocator('iframe.webview').frameLocator('iframe#active-frame');
    await report.locator('img[src*="speedup.png"]').first().waitFor({ timeout: STEP_TIMEOUT });
    found.reportImages = await report.locator('img').evaluateAll((images) =>
      images.map((image) => ({ src: image.getAttribute('src').split('/').pop(), loaded: image.complete && image.naturalWidth > 0 })));
    found.reportText = (await report.locator('body').innerText()).replace(/\u00a0/g, ' ');
    await vs.screenshot('7-report');
    step(`report shown: ${found.reportImages.map((i) => i.src).join(', ')}`);

    // The candidate's context menu: copy its round's branch, check the branch out in a new worktree.
    await vs.browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: vs.server.url });
    await vs.runCommand('evoteam: Focus on Evolution runs View');
    await contextMenu(bestRow, 'Copy branch name');
    const copied = await vs.waitForNotification(/evoteam: copied /);
    found.copied = /copied (\S+)/.exec(await copied.innerText())[1];
    found.clipboard = await page.evaluate(() => navigator.clipboard.readText());
    await contextMenu(bestRow, 'Check out branch in a new worktree');
    const checkedOut = await vs.waitForNotification(/ is checked out in /);
    found.worktree = / is checked out in (\S+)/.exec(await checkedOut.innerText())[1];
    await vs.screenshot('8-worktree');
    step(`branch ${found.copied} copied and checked out in ${found.worktree}`);

    // A second run, cancelled from the palette while it is live.
    await vs.openFile(kernel);
    await vs.runCommand('evoteam: Evolve this kernel');
    const second = await vs.waitForNotification(new RegExp(`evoteam: started run (?!${found.run})`), { timeoutMs: STEP_TIMEOUT });
    found.cancelledRun = /started run (\S+)/.exec(await second.innerText())[1];
    await vs.runCommand('evoteam: Cancel run');
    await vs.waitForNotification(`evoteam: cancel requested for ${found.cancelledRun}`);
    await vs.runCommand('evoteam: Focus on Evolution runs View');
    await tree.locator('.monaco-list-row', { hasText: found.cancelledRun }).filter({ hasText: '· cancelled ·' })
      .first().waitFor({ timeout: RUN_TIMEOUT });
    await vs.screenshot('9-cancelled');
    step(`run ${found.cancelledRun} cancelled`);

    // The winner accepted again, from its context menu, after the file on disk was set back to the start: the
    // editor reloads the start, and the accept puts the winner's text in it, unsaved.
    const winnerText = fs.readFileSync(path.join(args.folder, kernel), 'utf8');
    const startLine = before.split('\n').find((line) => line.trim() && !winnerText.includes(line));
    fs.writeFileSync(path.join(args.folder, kernel), before);
    const words = startLine.trim().split(/\s+/).map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
    await vs.openFile(kernel);
    await page.locator('.editor-instance .view-lines', { hasText: new RegExp(words.join('[\\s\\u00a0]+')) })
      .first().waitFor({ timeout: STEP_TIMEOUT });
    await vs.runCommand('evoteam: Focus on Evolution runs View');
    await contextMenu(bestRow, 'Accept this candidate');
    const accepted = await vs.waitForNotification(/evoteam: (accepted |the files already hold )/);
    found.acceptedOther = (await accepted.innerText()).replace(/\s+/g, ' ').trim();
    await page.locator('.tabs-container .tab.dirty', { hasText: name }).waitFor({ timeout: STEP_TIMEOUT });
    await vs.screenshot('10-other-accepted');
    step(found.acceptedOther);
    await vs.openFile(kernel);  // saved again: the file on disk is the winner once more
    await page.keyboard.press('Control+S');
    await page.locator('.tabs-container .tab.dirty', { hasText: name }).waitFor({ state: 'detached', timeout: STEP_TIMEOUT });
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
