// JupyterLab from the project's venv and Debian's headless Chromium, for the browser tests: a
// free port, a token, a temporary root, settings and kernelspec, and no network.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const ARTIFACTS = process.env.DRYML_ARTIFACTS || join(ROOT, 'target', 'test-artifacts', 'browser');
const KERNEL_BIN = process.env.DRYML_KERNEL_BIN || join(ROOT, 'target', 'release', 'dryml-kernel');
const VENV = process.env.VENV || join(ROOT, '.venv');
const CHROMIUM = process.env.DRYML_CHROMIUM || '/usr/bin/chromium';

function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once('error', fail);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

async function waitUp(url, child, seconds) {
  const until = Date.now() + seconds * 1000;
  while (Date.now() < until) {
    if (child.exitCode !== null) throw new Error(`jupyter lab exited with ${child.exitCode}`);
    try {
      const r = await fetch(url);
      if (r.ok) return;
    } catch { /* not listening yet */ }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`jupyter lab did not answer ${url} within ${seconds} s`);
}

/** Starts JupyterLab; `lab.url(path)` gives an address with the token, `lab.stop()` ends it. */
export async function startLab() {
  for (const [what, path] of [['the kernel', KERNEL_BIN], ['jupyter lab', join(VENV, 'bin', 'jupyter-lab')], ['chromium', CHROMIUM]]) {
    if (!existsSync(path)) throw new Error(`${what} is missing at ${path} (bash tests/browser/run.sh sets everything up)`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'dryml-lab-'));
  const sub = (name) => { const d = join(dir, name); mkdirSync(d, { recursive: true }); return d; };
  const [root, prefix, config, data, runtime] = ['root', 'prefix', 'config', 'data', 'runtime'].map(sub);
  execFileSync(KERNEL_BIN, ['install', '--prefix', prefix], { stdio: 'ignore' });
  // The news feed would ask to reach jupyter.org; nothing here may need the network.
  mkdirSync(join(config, 'labconfig'), { recursive: true });
  writeFileSync(join(config, 'labconfig', 'page_config.json'),
    JSON.stringify({ disabledExtensions: { '@jupyterlab/apputils-extension:announcements': true } }));
  const port = await freePort();
  const token = randomBytes(16).toString('hex');
  const log = [];
  const child = spawn(join(VENV, 'bin', 'jupyter-lab'), [
    '--no-browser', '--ip=127.0.0.1', `--port=${port}`, '--port-retries=0',
    `--IdentityProvider.token=${token}`, `--ServerApp.root_dir=${root}`,
    `--LabApp.user_settings_dir=${sub('settings')}`, `--LabApp.workspaces_dir=${sub('workspaces')}`,
    // CI runs as root, which JupyterLab refuses without this.
    '--allow-root',
  ], {
    env: {
      ...process.env,
      JUPYTER_PATH: join(prefix, 'share', 'jupyter'),
      JUPYTER_CONFIG_DIR: config,
      JUPYTER_DATA_DIR: data,
      JUPYTER_RUNTIME_DIR: runtime,
      DRYML_HISTORY_FILE: join(dir, 'history.sqlite'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  for (const s of [child.stdout, child.stderr]) s.on('data', (b) => log.push(b.toString()));
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitUp(`${base}/api/status?token=${token}`, child, 120);
  } catch (e) {
    child.kill('SIGKILL');
    throw new Error(`${e.message}\n${log.join('').slice(-4000)}`);
  }
  return {
    root,
    log,
    url: (path) => `${base}${path}${path.includes('?') ? '&' : '?'}token=${token}`,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => { const t = setTimeout(() => { child.kill('SIGKILL'); r(); }, 10000); child.once('exit', () => { clearTimeout(t); r(); }); });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Headless Debian Chromium with the flags that keep it off the network, in a fresh profile. */
export async function startBrowser() {
  const profile = mkdtempSync(join(tmpdir(), 'dryml-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1280, height: 900 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update',
      '--disable-sync', '--no-first-run', '--disable-quic', '--disable-dev-shm-usage'],
  });
  return {
    context,
    async stop() {
      await context.close();
      rmSync(profile, { recursive: true, force: true });
    },
  };
}

/** What both suites do to a notebook's cells in `page`: the last cell (where the next code goes,
 * pinned by its index: a locator for "the last cell" would move to the cell Shift+Enter adds), a
 * cell's prompt (`[*]:` while queued or running, `[N]:` once done), waiting for it, typing code
 * into the last cell as one edit (no auto-indent or bracket closing) and running it, and the
 * text of a cell's outputs. */
/** A new DRYML Rust notebook from a fresh workspace's Launcher (`?reset`: not the last
 * notebook), once its kernel is idle (keys typed before it is up are lost). */
export async function openNotebook(page, lab, timeout = 600_000) {
  await page.goto(lab.url('/lab?reset'));
  await page.locator('.jp-LauncherCard[data-category="Notebook"][title="DRYML Rust"]').click({ timeout: 60_000 });
  await page.locator('.jp-NotebookPanel .jp-Notebook .jp-Cell').first().waitFor();
  await kernelIdle(page, timeout);
}

/** Waits until the status bar says the kernel is idle. */
export async function kernelIdle(page, timeout) {
  await page.locator('#jp-main-statusbar', { hasText: 'DRYML Rust | Idle' }).waitFor({ timeout });
}

export function cellsOf(page, assert) {
  const lastCell = async () => {
    const cells = page.locator('.jp-Notebook .jp-Cell');
    return cells.nth((await cells.count()) - 1);
  };
  const prompt = async (cell) => ((await cell.locator('.jp-InputArea-prompt').textContent()) || '').trim();
  const waitDone = async (cell, timeout = 120_000) => {
    const until = Date.now() + timeout;
    while (Date.now() < until) {
      if (/^\[\d+\]:$/.test(await prompt(cell))) return;
      await page.waitForTimeout(100);
    }
    throw new Error(`the cell did not finish within ${timeout / 1000} s (prompt ${await prompt(cell)})`);
  };
  const type = async (code) => {
    const cell = await lastCell();
    await cell.locator('.cm-content').click();
    await page.keyboard.insertText(code);
    const typed = await cell.locator('.cm-content').innerText();
    assert.equal(typed.trim(), code.trim(), 'the code is in the cell');
    return cell;
  };
  const run = async (code, { wait = true, timeout } = {}) => {
    const cell = await type(code);
    await page.keyboard.press('Shift+Enter');
    if (wait) await waitDone(cell, timeout);
    return cell;
  };
  const outputText = async (cell) =>
    (await cell.locator('.jp-OutputArea-output').allInnerTexts()).map((t) => t.trim()).join('\n');
  return { lastCell, prompt, waitDone, type, run, outputText };
}
