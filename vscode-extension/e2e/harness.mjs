// End-to-end harness: a real VS Code workbench (code-server) on 127.0.0.1, driven by Debian's headless
// chromium through playwright-core, fully offline. code-server and playwright-core come from the cache that
// scripts/vscode-e2e-setup fills ($EVOTEAM_E2E_HOME, default vscode-extension/.e2e).
//
// Low level: startCodeServer, installExtension, launchBrowser, openWorkbench, openFile, runCommand,
// editorText, waitForNotification, screenshot. High level: startSession(), which composes them and returns one object
// with the helpers bound and a stop() that leaves nothing running. Each server runs in a temp root with its
// own config, user data, extensions, HOME and XDG dirs; every process it starts (and chromium) carries
// EVOTEAM_E2E_SESSION=<root> in its environment, which stop() uses to check that nothing is left.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The settings every workbench starts with (quiet, offline, no trust prompts, no autosave). */
export const DEFAULT_SETTINGS = {
  'workbench.startupEditor': 'none',
  'security.workspace.trust.enabled': false,
  'telemetry.telemetryLevel': 'off',
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'update.mode': 'none',
  'workbench.enableExperiments': false,
  'chat.disableAIFeatures': true,
  'workbench.tips.enabled': false,
  'files.autoSave': 'off',
  'workbench.reduceMotion': 'on', // no half-faded toasts in screenshots
};

/** Where the setup script put things: { home, codeServer, playwrightCore, chromium }. Throws if missing. */
export function locate() {
  const home = path.resolve(process.env.EVOTEAM_E2E_HOME || path.join(here, '..', '.e2e'));
  const codeServer = path.join(home, 'code-server', 'node_modules', '.bin', 'code-server');
  const playwrightCore = path.join(home, 'playwright', 'node_modules', 'playwright-core');
  const chromium = (process.env.PATH || '').split(path.delimiter)
    .map((dir) => path.join(dir, 'chromium')).find((file) => fs.existsSync(file));
  for (const [what, file] of [['code-server', codeServer], ['playwright-core', playwrightCore], ['chromium', chromium]]) {
    if (!file || !fs.existsSync(file)) throw new Error(`e2e: ${what} not found (${file || 'not on PATH'}); run scripts/vscode-e2e-setup`);
  }
  return { home, codeServer, playwrightCore, chromium };
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => { const { port } = srv.address(); srv.close(() => resolve(port)); });
  });
}

function httpStatus(url) {
  return new Promise((resolve) => {
    const req = http.get(url, (res) => { res.resume(); resolve(res.statusCode); });
    req.on('error', () => resolve(0));
    req.setTimeout(2000, () => { req.destroy(); resolve(0); });
  });
}

/** PIDs of live processes whose environment carries EVOTEAM_E2E_SESSION=<root> (Linux /proc). */
export function sessionProcesses(root) {
  const marker = Buffer.from(`\0EVOTEAM_E2E_SESSION=${root}\0`);
  const pids = [];
  for (const name of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const env = Buffer.concat([Buffer.from([0]), fs.readFileSync(`/proc/${name}/environ`), Buffer.from([0])]);
      if (env.includes(marker)) pids.push(Number(name));
    } catch { /* gone, or not ours to read */ }
  }
  return pids;
}

// code-server runs in its own process group, out of reach of a terminal's Ctrl+C: kill the groups still
// alive when this process exits or is interrupted.
const liveGroups = new Set();
let exitHandlers = false;
function killOnExit(pid) {
  if (!exitHandlers) {
    exitHandlers = true;
    const killAll = () => { for (const g of liveGroups) try { process.kill(-g, 'SIGKILL'); } catch { /* gone */ } };
    process.on('exit', killAll);
    for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
      process.once(sig, () => { killAll(); process.exit(128 + os.constants.signals[sig]); });
    }
  }
  liveGroups.add(pid);
}

function codeServerRun(server, args, options = {}) {
  return spawn(server.bin, [...server.baseArgs, ...args], { env: server.env, ...options });
}

/**
 * Starts code-server on a free 127.0.0.1 port in a fresh temp root and waits for /healthz.
 * options: settings (merged over DEFAULT_SETTINGS), vsix (paths installed before start), env (extra
 * environment), logFile (code-server's output; default <root>/code-server.log), timeoutMs (default 60000).
 * Returns { url, port, root, userDataDir, extensionsDir, logFile, env, proc, installExtension(vsix), stop() }
 * (an extension installed after start needs a reload of the workbench).
 */
export async function startCodeServer(options = {}) {
  const { settings = {}, vsix = [], env = {}, timeoutMs = 60000 } = options;
  const where = locate();
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'evoteam-e2e-'));
  const dir = (...parts) => { const p = path.join(root, ...parts); fs.mkdirSync(p, { recursive: true }); return p; };
  const userDataDir = dir('data');
  const extensionsDir = dir('extensions');
  const config = path.join(root, 'config.yaml');
  const port = await freePort();
  fs.writeFileSync(config, `bind-addr: 127.0.0.1:${port}\nauth: none\ncert: false\n`);
  fs.writeFileSync(path.join(dir('data', 'User'), 'settings.json'),
    JSON.stringify({ ...DEFAULT_SETTINGS, ...settings }, null, 2));
  const logFile = options.logFile || path.join(root, 'code-server.log');
  const server = {
    url: `http://127.0.0.1:${port}`, port, root, userDataDir, extensionsDir, logFile, bin: where.codeServer,
    baseArgs: ['--config', config, '--user-data-dir', userDataDir, '--extensions-dir', extensionsDir],
    env: {
      ...process.env,
      HOME: dir('home'), XDG_CONFIG_HOME: dir('xdg', 'config'), XDG_DATA_HOME: dir('xdg', 'data'),
      XDG_CACHE_HOME: dir('xdg', 'cache'), XDG_STATE_HOME: dir('xdg', 'state'),
      EXTENSIONS_GALLERY: JSON.stringify({ serviceUrl: 'http://127.0.0.1:9/gallery', itemUrl: 'http://127.0.0.1:9/item' }),
      EVOTEAM_E2E_SESSION: root,
      ...env,
    },
    installExtension: (file) => installExtension(server, file),
    stop: () => stopCodeServer(server),
  };
  for (const file of [].concat(vsix)) await installExtension(server, file);
  const log = fs.openSync(logFile, 'a');
  server.proc = codeServerRun(server, ['--bind-addr', `127.0.0.1:${port}`, '--auth', 'none', '--disable-telemetry',
    '--disable-update-check', '--disable-workspace-trust', '--disable-getting-started-override', '--ignore-last-opened'],
  { stdio: ['ignore', log, log], detached: true }); // detached: its own process group, killed as a whole
  fs.closeSync(log);
  server.exited = new Promise((resolve) => server.proc.once('exit', (code, signal) => resolve({ code, signal })));
  killOnExit(server.proc.pid);
  server.exited.then(() => liveGroups.delete(server.proc.pid));
  let dead = null;
  server.exited.then((status) => { dead = status; });
  const deadline = Date.now() + timeoutMs;
  while ((await httpStatus(`${server.url}/healthz`)) !== 200) {
    if (dead || Date.now() > deadline) {
      await stopCodeServer(server);
      const tail = fs.readFileSync(logFile, 'utf8').slice(-2000);
      throw new Error(`e2e: code-server ${dead ? `exited (${JSON.stringify(dead)})` : `not healthy after ${timeoutMs} ms`}; log tail:\n${tail}`);
    }
    await sleep(200);
  }
  return server;
}

/** Installs a .vsix into the server's extensions dir (code-server --install-extension --force). */
export function installExtension(server, vsixFile) {
  return new Promise((resolve, reject) => {
    let out = '';
    const child = codeServerRun(server, ['--install-extension', path.resolve(vsixFile), '--force'], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { out += d; });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 && /successfully installed/i.test(out)
      ? resolve(out) : reject(new Error(`e2e: installing ${vsixFile} failed (exit ${code}):\n${out}`))));
  });
}

/** Stops code-server: SIGTERM to its process group, SIGKILL after 5 s, then any session leftovers. */
export async function stopCodeServer(server) {
  if (server.proc && server.proc.exitCode === null && server.proc.signalCode === null) {
    const group = -server.proc.pid;
    const alive = () => { try { process.kill(group, 0); return true; } catch { return false; } };
    try { process.kill(group, 'SIGTERM'); } catch { /* gone */ }
    for (let i = 0; i < 50 && alive(); i++) await sleep(100);
    if (alive()) try { process.kill(group, 'SIGKILL'); } catch { /* gone */ }
    await server.exited;
  }
  for (let i = 0; i < 20; i++) {
    const left = sessionProcesses(server.root);
    if (!left.length) return;
    for (const pid of left) try { process.kill(pid, i < 10 ? 'SIGTERM' : 'SIGKILL'); } catch { /* gone */ }
    await sleep(100);
  }
  throw new Error(`e2e: processes still running after stop: ${sessionProcesses(server.root).join(' ')}`);
}

const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);

/**
 * Launches Debian's chromium headless via playwright-core, with DNS mapped to nothing except 127.0.0.1.
 * options: root (folder for the browser profile; default a temp dir), viewport, env.
 * Returns { context, page, requests, externalRequests(), close() }; requests lists every request URL
 * (and websocket), externalRequests() the ones not to a loopback host (nor answered by the workbench's service
 * worker, as webview resources on *.vscode-resource.vscode-cdn.net are: they never leave the browser).
 */
export async function launchBrowser(options = {}) {
  const where = locate();
  const { chromium } = createRequire(import.meta.url)(where.playwrightCore);
  const root = options.root || fs.mkdtempSync(path.join(os.tmpdir(), 'evoteam-e2e-browser-'));
  fs.mkdirSync(root, { recursive: true });
  const context = await chromium.launchPersistentContext(path.join(root, 'chromium'), {
    executablePath: where.chromium,
    headless: true,
    viewport: options.viewport || { width: 1400, height: 900 },
    // Its own HOME and XDG dirs too: chromium's crash reporter writes to ~/.config/chromium otherwise.
    env: { ...process.env, HOME: root, XDG_CONFIG_HOME: root, XDG_CACHE_HOME: root, EVOTEAM_E2E_SESSION: root, ...options.env },
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-dev-shm-usage',
      '--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1'],
  });
  const requests = [];
  const served = new Set(); // answered by the workbench's own service worker (webview resources): never sent
  const record = (url) => requests.push(url);
  const watch = (page) => {
    page.on('request', (req) => record(req.url()));
    page.on('response', (res) => { if (res.fromServiceWorker()) served.add(res.url()); });
    page.on('websocket', (ws) => record(ws.url()));
  };
  context.pages().forEach(watch);
  context.on('page', watch);
  context.on('serviceworker', (worker) => record(worker.url()));
  const external = (url) => {
    let u;
    try { u = new URL(url); } catch { return true; }
    if (!['http:', 'https:', 'ws:', 'wss:'].includes(u.protocol)) return false; // data:, blob:, … stay local
    return !LOOPBACK.has(u.hostname) && !served.has(url);
  };
  const page = context.pages()[0] || await context.newPage();
  return {
    context, page, requests, root,
    externalRequests: () => requests.filter(external),
    close: () => context.close(),
  };
}

/** Opens the workbench for a folder and waits for .monaco-workbench (and the explorer's file tree). */
export async function openWorkbench(page, server, folder, { timeoutMs = 60000 } = {}) {
  await page.goto(`${server.url}/?folder=${encodeURIComponent(path.resolve(folder))}`);
  await page.locator('.monaco-workbench').waitFor({ timeout: timeoutMs });
  await page.locator('.explorer-folders-view, .explorer-viewlet').first().waitFor({ timeout: timeoutMs });
}

const exactly = (text) => new RegExp(`^\\s*${text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\\s*$`);

/** Quick-input rows whose label is exactly `label`. */
function quickInputRow(page, label) {
  return page.locator('.quick-input-widget .quick-input-list .monaco-list-row')
    .filter({ has: page.locator('.label-name', { hasText: exactly(label) }) }).first();
}

/**
 * Opens a workspace file via Control+P: types the (relative) name, waits for the row with that file name
 * (file search lags on busy machines; Enter too early opens nothing), picks it, waits for its active tab.
 */
export async function openFile(page, name, { timeoutMs = 30000 } = {}) {
  const base = path.basename(name);
  await page.keyboard.press('Control+P');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ timeout: timeoutMs });
  await input.fill(name);
  const row = quickInputRow(page, base);
  await row.waitFor({ timeout: timeoutMs });
  await row.click();
  await page.locator('.tabs-container .tab.active', { hasText: base }).waitFor({ timeout: timeoutMs });
  await page.locator('.editor-instance .view-lines').first().waitFor({ timeout: timeoutMs });
}

/** The visible text of the active editor (inlay hints included), with its non-breaking spaces made plain. */
export async function editorText(page) {
  const text = await page.locator('.editor-group-container.active .editor-instance .view-lines').first().innerText();
  return text.replace(/\u00a0/g, ' ');
}

/** Runs a command by its palette title ("Category: Title") via F1, after waiting for its row. */
export async function runCommand(page, title, { timeoutMs = 30000 } = {}) {
  await page.keyboard.press('F1');
  const input = page.locator('.quick-input-widget input');
  await input.waitFor({ timeout: timeoutMs });
  await input.fill(`>${title}`);
  const row = quickInputRow(page, title);
  await row.waitFor({ timeout: timeoutMs });
  await row.click();
  await page.locator('.quick-input-widget').waitFor({ state: 'hidden', timeout: timeoutMs });
}

/** Waits for a notification toast containing `text` (string or RegExp), faded in; returns its locator. The wait is
 * long (a busy machine may take its time to get there): it only catches a toast that never comes. */
export async function waitForNotification(page, text, { timeoutMs = 120000 } = {}) {
  // fade-in: shown (at once with reduceMotion on, which ends with no transitionend); fade-in-done: animated in.
  const toast = page.locator('.notifications-toasts .notification-toast:is(.notification-fade-in, .notification-fade-in-done)',
    { hasText: text }).first();
  await toast.waitFor({ timeout: timeoutMs });
  return toast;
}

/** Saves a PNG of the page as <outDir>/<name>.png; returns the path. */
export async function screenshot(page, outDir, name) {
  fs.mkdirSync(outDir, { recursive: true });
  const file = path.join(outDir, name.endsWith('.png') ? name : `${name}.png`);
  await page.screenshot({ path: file });
  return file;
}

/**
 * One call for a test: code-server (with options.settings, options.vsix, options.env) + chromium + the
 * workbench open on options.folder. options.outDir receives screenshots and code-server.log.
 * Returns { server, browser, page, outDir, openFile(name), runCommand(title), editorText(), waitForNotification(text),
 * screenshot(name), externalRequests(), stop({ keep }) }. stop() closes chromium, stops code-server,
 * checks that no process of the session is left and removes the temp roots (unless keep is true).
 */
export async function startSession(options = {}) {
  const outDir = path.resolve(options.outDir || fs.mkdtempSync(path.join(os.tmpdir(), 'evoteam-e2e-out-')));
  fs.mkdirSync(outDir, { recursive: true });
  const server = await startCodeServer({ logFile: path.join(outDir, 'code-server.log'), ...options });
  let browser;
  const stop = async ({ keep = false } = {}) => {
    if (browser) await browser.close().catch(() => {});
    await stopCodeServer(server);
    for (const root of [server.root, browser && browser.root]) {
      if (!root) continue;
      const left = sessionProcesses(root);
      if (left.length) throw new Error(`e2e: processes left running: ${left.join(' ')}`);
      if (!keep) fs.rmSync(root, { recursive: true, force: true });
    }
  };
  try {
    browser = await launchBrowser({ root: path.join(server.root, 'browser') });
    if (options.folder) await openWorkbench(browser.page, server, options.folder, options);
  } catch (err) {
    await stop({ keep: true }).catch(() => {});
    throw err;
  }
  const { page } = browser;
  return {
    server, browser, page, outDir, stop,
    openFile: (name, o) => openFile(page, name, o),
    runCommand: (title, o) => runCommand(page, title, o),
    editorText: () => editorText(page),
    waitForNotification: (text, o) => waitForNotification(page, text, o),
    screenshot: (name) => screenshot(page, outDir, name),
    externalRequests: () => browser.externalRequests(),
  };
}
