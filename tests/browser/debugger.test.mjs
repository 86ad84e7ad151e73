// JupyterLab's debugger on a DRYML Rust notebook, as a user works it: the bug icon, a
// breakpoint clicked in a cell's gutter, the cell run and stopped there, the Variables panel
// showing its locals, the Callstack showing the cell, Continue, the cell's output, then the
// notebook's variables with their values. Screenshots of the stopped notebook (debugger.png) and
// of the variables after it (debugger-variables.png) are kept.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startLab, startBrowser, cellsOf, openNotebook, ARTIFACTS } from './lab.mjs';

let lab;
let browser;
let page;
let prompt, waitDone, type, run, outputText;
const consoleLog = [];
const inspected = [];

describe('The debugger on DRYML Rust cells', { timeout: 900_000 }, () => {
  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    lab = await startLab();
    browser = await startBrowser();
    page = browser.context.pages()[0] || (await browser.context.newPage());
    ({ prompt, waitDone, type, run, outputText } = cellsOf(page, assert));
    page.on('console', (m) => consoleLog.push(`${m.type()}: ${m.text()}`));
    // The kernel's debug replies to inspectVariables, as the panel receives them.
    page.on('websocket', (ws) => ws.on('framereceived', ({ payload }) => {
      const text = Buffer.isBuffer(payload) ? payload.toString('utf8') : String(payload);
      if (text.includes('"debug_reply"') && text.includes('"inspectVariables"')) inspected.push(text);
    }));
  });

  after(async () => {
    if (page) await page.screenshot({ path: join(ARTIFACTS, 'debugger-last.png') }).catch(() => {});
    await browser?.stop();
    await lab?.stop();
  });

  it('stops a cell on a breakpoint clicked in its gutter, shows its locals and stack, and continues', async () => {
    await openNotebook(page, lab);
    await run('let base = 1;', { timeout: 600_000 });

    // The bug icon is on for this kernel: click it, and the debugger's sidebar opens.
    const bug = page.locator('.jp-NotebookPanel-toolbar .jp-DebuggerBugButton');
    await bug.waitFor({ timeout: 60_000 });
    assert.equal(await bug.locator('button, [aria-pressed]').first().getAttribute('aria-disabled').catch(() => null) === 'true', false, 'the bug icon is enabled');
    await bug.click();
    await page.locator('#jp-debugger-sidebar').waitFor({ state: 'attached', timeout: 60_000 });
    await page.locator('.lm-TabBar-tab[data-id="jp-debugger-sidebar"]').click();
    await page.locator('#jp-debugger-sidebar').waitFor({ timeout: 30_000 });

    // A breakpoint on line 3, clicked in the gutter, then the cell runs.
    const cell = await type('let x = 5;\nlet v = vec![1.5f32, 2.5];\nlet y = x + 1;\ny');
    const line3 = await cell.locator('.cm-line').nth(2).boundingBox();
    const gutter = await cell.locator('div.cm-gutter.cm-breakpoint-gutter').boundingBox();
    await page.mouse.click(gutter.x + gutter.width / 2, line3.y + line3.height / 2);
    await cell.locator('.cm-breakpoint-gutter .cm-gutterElement span, .cm-breakpoint-gutter .cm-gutterElement .jp-DebuggerEditor-marker').first().waitFor({ timeout: 30_000 }).catch(() => {});
    await page.keyboard.press('Shift+Enter');

    // Stopped there: the locals in the Variables panel, the cell in the Callstack.
    const sidebar = page.locator('#jp-debugger-sidebar');
    await page.locator('.jp-DebuggerBugButton').first().waitFor();
    // Each local's name, then its value (or its type, for one that opens).
    const until = Date.now() + 300_000;
    while (!/\nx\n5\n/.test(await sidebar.innerText())) {
      assert.ok(Date.now() < until, `no x = 5 in the Variables panel: ${await sidebar.innerText()}`);
      await page.waitForTimeout(200);
    }
    assert.match(await sidebar.innerText(), /\nv\nalloc::vec::Vec</);
    const frame = page.locator('.jp-DebuggerCallstackFrame-name', { hasText: 'run_user_code' });
    await frame.first().waitFor({ timeout: 30_000 });
    assert.equal(await prompt(cell), '[*]:', 'the cell waits on its breakpoint');
    await page.screenshot({ path: join(ARTIFACTS, 'debugger.png') });
    assert.deepEqual(consoleLog.filter((l) => l.startsWith('error')), [], 'the panel renders what the kernel gives it');

    // Continue: the cell ends with its value, and the variables are the notebook's.
    await page.locator('button[title^="Continue"], [data-command="debugger:continue"]').first().click();
    await waitDone(cell, 120_000);
    assert.equal(await outputText(cell), '6');

    // No cell stopped: the panel asks for the notebook's variables, and gets their types and
    // short values. (JupyterLab's tree view shows a value only for Python's int, float, bool and
    // str and the type otherwise; its table view, a canvas, shows both: screenshot.)
    const untilShown = Date.now() + 120_000;
    while (!inspected.some((f) => f.includes('[1.5, 2.5] (len 2)') && /"name":\s*"y"[^}]*"value":\s*"6"/.test(f))) {
      assert.ok(Date.now() < untilShown, `no values in the panel's inspectVariables replies: ${inspected.slice(-1)}`);
      await page.waitForTimeout(200);
    }
    // The panel shows them once it has rendered the reply, and keeps them: a `continued` that
    // reached it after the cell's idle used to empty it for good.
    const globals = /Globals\nbase\ni32\nv\nVec<f32>\nx\ni32\ny\ni32/;
    const untilRendered = Date.now() + 60_000;
    while (!globals.test(await sidebar.innerText())) {
      assert.ok(Date.now() < untilRendered, `the Variables panel stayed without the notebook's variables: ${await sidebar.innerText()}`);
      await page.waitForTimeout(100);
    }
    await page.waitForTimeout(1_500);
    assert.match(await sidebar.innerText(), globals, 'the Variables panel keeps them');
    await sidebar.locator('.jp-TableView-Button').first().click();
    await page.waitForTimeout(500);
    await page.screenshot({ path: join(ARTIFACTS, 'debugger-variables.png') });
    await bug.click();
    const next = await run('x + y');
    assert.equal(await outputText(next), '11');
  });
});
