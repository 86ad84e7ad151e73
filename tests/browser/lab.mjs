// JupyterLab from the project's venv and Debian's headless Chromium, for the browser tests: a
// free port, a token, a temporary root, settings and kernelspec, and no network.
import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
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

/** Starts a Jupyter server program of the venv (`jupyter-lab`, `voila`) with the kernel
 * installed in a temporary Jupyter path and nothing from the user's: `args(dirs, port)` gives its
 * arguments, `status` the path that answers once it is up. `stop()` ends it and removes it all. */
async function serve(program, args, status, venv = VENV) {
  for (const [what, path] of [['the kernel', KERNEL_BIN], [program, join(venv, 'bin', program)], ['chromium', CHROMIUM]]) {
    if (!existsSync(path)) throw new Error(`${what} is missing at ${path} (bash tests/browser/run.sh sets everything up)`);
  }
  const dir = mkdtempSync(join(tmpdir(), `dryml-${program}-`));
  const sub = (name) => { const d = join(dir, name); mkdirSync(d, { recursive: true }); return d; };
  const dirs = Object.fromEntries(['root', 'prefix', 'config', 'data', 'runtime', 'settings', 'workspaces'].map((n) => [n, sub(n)]));
  execFileSync(KERNEL_BIN, ['install', '--prefix', dirs.prefix], { stdio: 'ignore' });
  const port = await freePort();
  const log = [];
  const child = spawn(join(venv, 'bin', program), args(dirs, port), {
    env: {
      ...process.env,
      JUPYTER_PATH: join(dirs.prefix, 'share', 'jupyter'),
      JUPYTER_CONFIG_DIR: dirs.config,
      JUPYTER_DATA_DIR: dirs.data,
      JUPYTER_RUNTIME_DIR: dirs.runtime,
      DRYML_HISTORY_FILE: join(dir, 'history.sqlite'),
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  for (const s of [child.stdout, child.stderr]) s.on('data', (b) => log.push(b.toString()));
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitUp(`${base}${status}`, child, 120);
  } catch (e) {
    child.kill('SIGKILL');
    throw new Error(`${e.message}\n${log.join('').slice(-4000)}`);
  }
  return {
    root: dirs.root,
    log,
    base,
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => { const t = setTimeout(() => { child.kill('SIGKILL'); r(); }, 10000); child.once('exit', () => { clearTimeout(t); r(); }); });
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Starts JupyterLab; `lab.url(path)` gives an address with the token, `lab.stop()` ends it. */
export async function startLab() {
  const token = randomBytes(16).toString('hex');
  const server = await serve('jupyter-lab', (dirs, port) => {
    // The news feed would ask to reach jupyter.org; nothing here may need the network.
    mkdirSync(join(dirs.config, 'labconfig'), { recursive: true });
    writeFileSync(join(dirs.config, 'labconfig', 'page_config.json'),
      JSON.stringify({ disabledExtensions: { '@jupyterlab/apputils-extension:announcements': true } }));
    return ['--no-browser', '--ip=127.0.0.1', `--port=${port}`, '--port-retries=0',
      `--IdentityProvider.token=${token}`, `--ServerApp.root_dir=${dirs.root}`,
      `--LabApp.user_settings_dir=${dirs.settings}`, `--LabApp.workspaces_dir=${dirs.workspaces}`,
      // CI runs as root, which JupyterLab refuses without this.
      '--allow-root'];
  }, `/api/status?token=${token}`);
  return { ...server, url: (path) => `${server.base}${path}${path.includes('?') ? '&' : '?'}token=${token}` };
}

/** Voilà serving `notebook` as an app, on the loopback only (no token: Voilà runs the notebook
 * for each visit of `/`, so it answers `status` on a static file). */
export async function startVoila(notebook) {
  return serve('voila', (dirs, port) => [notebook, '--no-browser', '--Voila.ip=127.0.0.1', `--port=${port}`],
    '/voila/static/voila.js');
}

/** The classic Notebook 6.5 with ipywidgets 7's front end (widgetsnbextension 3.6), from the
 * venv tests/browser/run.sh makes for it (`VENV_WIDGETS7`): the widget front end VS Code also
 * loads for every kernel that is not Python's. `nb.url(path)` gives an address with the token. */
export async function startNotebook6() {
  const venv = process.env.VENV_WIDGETS7 || join(homedir(), '.cache', 'dryml-rust', 'venv-widgets7');
  const token = randomBytes(16).toString('hex');
  const server = await serve('jupyter-notebook', (dirs, port) => [
    '--no-browser', '--ip=127.0.0.1', `--port=${port}`, '--port-retries=0', `--NotebookApp.token=${token}`,
    `--notebook-dir=${dirs.root}`, '--allow-root',
  ], `/api/status?token=${token}`, venv);
  return { ...server, url: (path) => `${server.base}${path}${path.includes('?') ? '&' : '?'}token=${token}` };
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

/** `locator`'s text once it matches `pattern`, or as it is after `timeout` ms. A cell's reply can
 * reach the page before the widget updates sent ahead of it are drawn (the front end applies them
 * asynchronously), so a widget's last state is waited for, not read once. */
export async function textSoon(locator, pattern, timeout = 10_000) {
  const until = Date.now() + timeout;
  let text = await locator.innerText();
  while (!pattern.test(text) && Date.now() < until) {
    await new Promise((r) => setTimeout(r, 100));
    text = await locator.innerText();
  }
  return text;
}

/** What both suites do to a notebook's cells in `page`: the last cell (where the next code goes,
 * pinned by its index: a locator for "the last cell" would move to the cell Shift+Enter adds), a
 * cell's prompt (`[*]:` while queued or running, `[N]:` once done), waiting for it, typing code
 * into the last cell as one edit (no auto-indent or bracket closing) and running it, and the
 * text of a cell's outputs. */
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
