// Self-check of the e2e harness, without the evoteam extension: packs a tiny "hello" extension into a
// .vsix (python's zipfile, VSIX layout), installs it into a fresh code-server, opens a temp folder and a
// file in it, runs "Evoteam Smoke: Hello" from the palette and waits for its notification (which proves the
// extension host can spawn python, as the real extension's language server needs), takes screenshots,
// asserts there was no non-loopback request and that nothing is left running.
// Usage: node vscode-extension/e2e/smoke.mjs [OUTDIR]   (screenshots + code-server.log go to OUTDIR)
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startSession } from './harness.mjs';

const outDir = path.resolve(process.argv[2] || fs.mkdtempSync(path.join(os.tmpdir(), 'evoteam-e2e-smoke-')));
const MESSAGE = 'Hello from the evoteam smoke extension';

const packageJson = {
  name: 'smoke', publisher: 'evoteam-e2e', version: '0.0.1', displayName: 'Evoteam Smoke',
  engines: { vscode: '^1.90.0' }, main: './extension.js', activationEvents: ['onCommand:evoteamSmoke.hello'],
  contributes: { commands: [{ command: 'evoteamSmoke.hello', title: 'Hello', category: 'Evoteam Smoke' }] },
};
const extensionJs = `const vscode = require('vscode');
const { execFileSync } = require('child_process');
exports.activate = (context) => {
  context.subscriptions.push(vscode.commands.registerCommand('evoteamSmoke.hello', () => {
    const answer = execFileSync('python3', ['-c', 'print(6 * 7)'], { encoding: 'utf8' }).trim();
    return vscode.window.showInformationMessage(${JSON.stringify(MESSAGE)} + ' (python says ' + answer + ')');
  }));
};
`;
const manifest = `<?xml version="1.0" encoding="utf-8"?>
<PackageManifest Version="2.0.0" xmlns="http://schemas.microsoft.com/developer/vsx-schema/2011" xmlns:d="http://schemas.microsoft.com/developer/vsx-schema-design/2011">
  <Metadata>
    <Identity Language="en-US" Id="smoke" Version="0.0.1" Publisher="evoteam-e2e" />
    <DisplayName>Evoteam Smoke</DisplayName>
    <Description xml:space="preserve">Harness self-check</Description>
    <Categories>Other</Categories>
    <Properties><Property Id="Microsoft.VisualStudio.Code.Engine" Value="^1.90.0" /></Properties>
  </Metadata>
  <Installation><InstallationTarget Id="Microsoft.VisualStudio.Code" /></Installation>
  <Dependencies />
  <Assets><Asset Type="Microsoft.VisualStudio.Code.Manifest" Path="extension/package.json" Addressable="true" /></Assets>
</PackageManifest>
`;
const contentTypes = `<?xml version="1.0" encoding="utf-8"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension=".json" ContentType="application/json" /><Default Extension=".js" ContentType="application/javascript" /><Default Extension=".vsixmanifest" ContentType="text/xml" /></Types>
`;

/** Writes a .vsix (a zip) with the given {archive path: text} entries, using python's zipfile. */
function packVsix(file, entries) {
  const zip = spawnSync('python3', ['-c', `import json, sys, zipfile
with zipfile.ZipFile(sys.argv[1], "w", zipfile.ZIP_DEFLATED) as z:
    for name, text in json.load(sys.stdin).items():
        z.writestr(name, text)`, file], { input: JSON.stringify(entries), encoding: 'utf8' });
  if (zip.status !== 0) throw new Error(`packing ${file} failed: ${zip.stderr}`);
}

async function main() {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'evoteam-e2e-smoke-work-'));
  const vsix = path.join(work, 'smoke.vsix');
  packVsix(vsix, {
    'extension.vsixmanifest': manifest,
    '[Content_Types].xml': contentTypes,
    'extension/package.json': JSON.stringify(packageJson, null, 2),
    'extension/extension.js': extensionJs,
  });
  const folder = path.join(work, 'workspace');
  fs.mkdirSync(folder);
  fs.writeFileSync(path.join(folder, 'hello_kernel.py'), 'def kernel(x):\n    return x * 2  # smoke marker\n');

  const started = Date.now();
  const step = (what) => console.error(`smoke: ${what} (${((Date.now() - started) / 1000).toFixed(1)} s)`);
  const vs = await startSession({ outDir, vsix, folder });
  step('workbench ready');
  let failed = null;
  try {
    await vs.openFile('hello_kernel.py');
    const text = await vs.editorText();
    if (!text.includes('smoke marker')) throw new Error(`the editor does not show the file: ${JSON.stringify(text)}`);
    step('file open');
    await vs.screenshot('1-file-open');
    await vs.runCommand('Evoteam Smoke: Hello');
    await vs.waitForNotification(`${MESSAGE} (python says 42)`);
    step('notification shown');
    await vs.screenshot('2-notification');
    const external = vs.externalRequests();
    if (external.length) throw new Error(`non-loopback requests: ${external.join(' ')}`);
    step(`${vs.browser.requests.length} requests, all to loopback`);
  } catch (err) {
    failed = err;
    await vs.screenshot('failure').catch(() => {});
  }
  await vs.stop({ keep: Boolean(failed) });
  fs.rmSync(work, { recursive: true, force: true });
  if (failed) throw failed;
  step('stopped, nothing left running');
  console.log(`smoke: OK; screenshots in ${outDir}`);
}

main().then(() => process.exit(0), (err) => {
  console.error(`smoke: FAILED: ${err && err.stack ? err.stack : err}\n(screenshots and code-server.log in ${outDir})`);
  process.exit(1);
});
