// The kernel as users meet it: JupyterLab in headless Chromium, a DRYML Rust notebook opened from
// the Launcher, cells typed and run with Shift+Enter, and what they render checked in the page.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startLab, startBrowser, cellsOf, openNotebook, kernelIdle, textSoon, ARTIFACTS } from './lab.mjs';

let lab;
let browser;
let page;
let lastCell, prompt, waitDone, run, outputText;
const consoleErrors = [];

/** Types `prefix` into the last cell and presses Tab; returns the cell and the completer's item
 * for `want`, once it shows. */
async function tabComplete(prefix, want, timeout) {
  const cell = await lastCell();
  await cell.locator('.cm-content').click();
  await page.keyboard.insertText(prefix);
  await page.keyboard.press('Tab');
  const item = page.locator('.jp-Completer .jp-Completer-item', { hasText: want });
  await item.first().waitFor({ timeout });
  return { cell, item };
}


describe('DRYML Rust in JupyterLab', { timeout: 900_000 }, () => {
  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    lab = await startLab();
    browser = await startBrowser();
    page = browser.context.pages()[0] || (await browser.context.newPage());
    ({ lastCell, prompt, waitDone, run, outputText } = cellsOf(page, assert));
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => consoleErrors.push(`page error: ${e.message}`));
  });

  after(async () => {
    if (page) await page.screenshot({ path: join(ARTIFACTS, 'last.png') }).catch(() => {});
    await browser?.stop();
    await lab?.stop();
  });

  it('opens a DRYML Rust notebook from the Launcher and runs a cell', async () => {
    await openNotebook(page, lab);
    // The first cell waits for the kernel's start (evcxr's first build with a cold cache).
    const cell = await run('let xs: Vec<u64> = (1..=10).collect();\nxs.iter().sum::<u64>()', { timeout: 600_000 });
    assert.equal(await outputText(cell), '55');
    assert.match(await page.locator('.jp-NotebookPanel-toolbar').innerText(), /DRYML Rust/);
  });

  it('streams output while the cell runs', async () => {
    const cell = await run('for i in 0..8 {\n    println!("tick {i}");\n    std::thread::sleep(std::time::Duration::from_millis(300));\n}', { wait: false });
    await cell.locator('.jp-OutputArea', { hasText: 'tick 0' }).waitFor({ timeout: 60_000 });
    const early = await outputText(cell);
    assert.equal(await prompt(cell), '[*]:', 'the first line shows before the cell ends');
    assert.ok(!early.includes('tick 7'), early);
    await waitDone(cell);
    assert.match(await outputText(cell), /tick 0\ntick 1[\s\S]*tick 7/);
  });

  it('shows a compile error with its ename and the cell line', async () => {
    const cell = await run('let bad: u32 = "text";');
    const err = cell.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]');
    const text = await err.innerText();
    assert.match(text, /^CompilationError: \[E0308\] mismatched types/);
    assert.match(text, /--> cell line 1, column 16/);
  });

  it('renders an experiment report as a table, never as a JSON tree', async () => {
    const cell = await run('%%experiment browser\nlet big = vec![1u8; 64 << 20];\nbig.len()');
    const tables = cell.locator('.jp-RenderedHTMLCommon table');
    assert.ok(await tables.count() >= 2, 'the start line and the report are HTML tables');
    assert.match(await cell.innerText(), /Experiment memory/);
    assert.match(await cell.innerText(), /Deleted: big/);
    assert.equal(await cell.locator('svg').count() + await cell.locator('.jp-RenderedSVG, img').count() > 0, true, 'the report has its chart');
    assert.equal(await page.locator('.jp-RenderedJSON').count(), 0, 'no output shows as a JSON tree');
  });

  it("shows %context and %repo as tables too", async () => {
    const ctx = await run('%context');
    assert.ok(await ctx.locator('.jp-RenderedHTMLCommon table').count() >= 1, await outputText(ctx));
    await run('let repo_dir = std::env::temp_dir().join(format!("dryml-browser-repo-{}", std::process::id()));\ndryml::Repo::create(&repo_dir).unwrap();\nprintln!("{}", repo_dir.display());');
    const dir = (await outputText(await (async () => { const c = page.locator('.jp-Notebook .jp-Cell'); return c.nth((await c.count()) - 2); })())).trim();
    const repo = await run(`%repo open ${dir}\n%repo ls`);
    assert.match(await outputText(repo), /0 objects/);
    assert.equal(await page.locator('.jp-RenderedJSON').count(), 0, 'no output shows as a JSON tree');
  });

  it('shows a 2-D array and a Dataset as tables, the head and tail of a long one', async () => {
    const array = await run('let grid = dryml::data::ndarray::Array2::<f64>::from_shape_fn((1_000_000, 3), |(i, j)| (i * 3 + j) as f64);\ngrid');
    const table = array.locator('.jp-RenderedHTMLCommon table');
    await table.waitFor();
    assert.equal(await table.locator('tbody tr').count(), 11, 'five rows, the elision, five rows');
    assert.match(await table.locator('tbody tr').last().innerText(), /999999\s+2999997\s+2999998\s+2999999/);
    assert.match(await array.innerText(), /1000000 rows × 3 columns, f64/);
    const data = await run('dryml::data::Dataset::from_vec((0..100usize).map(|i| dryml::data::Xy { x: vec![i as f32; 3], y: i % 10 }).collect::<Vec<_>>())');
    const dt = data.locator('.jp-RenderedHTMLCommon table');
    await dt.waitFor();
    assert.deepEqual(await dt.locator('thead th').allInnerTexts(), ['', 'x', 'y']);
    assert.match(await dt.locator('tbody tr').nth(2).innerText(), /2\s+\[2\.0, 2\.0, 2\.0\]\s+2/);
    assert.match(await data.innerText(), /Dataset of 100 Xy<Vec<f32>, usize> \(supervised\)/);
    await data.screenshot({ path: join(ARTIFACTS, 'tables.png') });
  });

  it('plots the cell log as an SVG', async () => {
    await run('%cell_logger compact');
    const logged = await run('let v = vec![0u8; 32 << 20];');
    // The logger's line starts with a character this browser's fonts draw: drawn on a canvas in
    // the output's own font, it has ink and differs from what a character no font has (U+10FFFD)
    // draws, the empty box IPyExperiments' U+30FB was in Debian's Chromium.
    const line = await logged.locator('.jp-OutputArea-output pre').last();
    const text = (await line.innerText()).trim();
    assert.match(text, /RAM: △Consumed/, text);
    const glyphs = await line.evaluate((pre, chars) => {
      const family = getComputedStyle(pre).fontFamily;
      const draw = (ch) => {
        const c = document.createElement('canvas');
        c.width = c.height = 64;
        const g = c.getContext('2d');
        g.font = `40px ${family}`;
        g.textBaseline = 'top';
        g.fillText(ch, 8, 8);
        return Array.from(g.getImageData(0, 0, 64, 64).data).join(',');
      };
      const tofu = draw('\u{10FFFD}');
      const blank = draw(' ');
      return chars.map((ch) => ({ ch, ink: draw(ch) !== blank, box: draw(ch) === tofu }));
    }, [text[0], '△', '\u30FB']);
    // The old mark, for the log: a box where no CJK font is installed.
    console.log(`logger mark ${JSON.stringify(glyphs)}`);
    for (const g of glyphs.slice(0, 2)) assert.ok(g.ink && !g.box, `${JSON.stringify(g)}: drawn as an empty box`);
    await run('std::thread::sleep(std::time::Duration::from_millis(300));');
    await run('%cell_logger off');
    const cell = await run('%cell_logger plot');
    const img = cell.locator('.jp-RenderedSVG img');
    await img.waitFor();
    assert.ok((await img.getAttribute('src')).startsWith('data:image/svg+xml'));
    const box = await img.boundingBox();
    assert.ok(box.width > 300 && box.height > 200, JSON.stringify(box));
  });

  it('redraws a training curve in place', async () => {
    const cell = await run('let curve = dryml::plot::Curve::new("loss");\nfor step in 0..50 {\n    curve.push("loss", 1.0 / (step + 1) as f64);\n    if step % 10 == 9 { std::thread::sleep(std::time::Duration::from_millis(100)); }\n}\ncurve.show();');
    const kinds = await cell.locator('.jp-OutputArea-output').evaluateAll((els) => els.map((e) => e.getAttribute('data-mime-type') + ': ' + e.innerText.slice(0, 200)));
    assert.equal(kinds.length, 1, `one plot, redrawn: ${JSON.stringify(kinds)}`);
    const src = await cell.locator('.jp-RenderedSVG img').getAttribute('src');
    assert.match(decodeURIComponent(src), /loss/);
  });

  it("updates a dryml::batch progress bar in place, as a widget", async () => {
    const cell = await run('let mut seen = Vec::new();\ndryml::batch::range(0, 20, 2, |lo, hi| {\n    std::thread::sleep(std::time::Duration::from_millis(60));\n    seen.push((lo, hi));\n    Ok::<(), std::collections::TryReserveError>(())\n}).unwrap();\nseen.len()');
    const outputs = cell.locator('.jp-OutputArea-output');
    // The bar (one output, redrawn) and the result: not one output per step. JupyterLab's widget
    // manager announced itself, so the bar is ipywidgets' progress bar, not HTML.
    assert.equal(await outputs.count(), 2, await outputText(cell));
    const bar = cell.locator('.widget-hbox', { has: page.locator('.widget-hprogress') });
    await bar.waitFor();
    assert.match(await textSoon(bar, /100%[\s\S]*20\/20/), /100%[\s\S]*20\/20/);
  });

  it('moves a slider whose value the next cell reads, and shows a widget progress bar', async () => {
    const cell = await run('let k = dryml::widgets::IntSlider::new(0..=10, 2).description("k");\nk.clone()');
    const readout = cell.locator('.widget-slider .widget-readout');
    await readout.waitFor({ timeout: 60_000 });
    assert.equal((await readout.innerText()).trim(), '2');
    // The readout is editable, as a user types a value into it.
    await readout.click();
    await page.keyboard.press('Control+A');
    await page.keyboard.type('7');
    await page.keyboard.press('Enter');
    await cell.locator('.widget-slider .widget-readout', { hasText: '7' }).waitFor();
    const read = await run('k.value()');
    assert.equal(await outputText(read), '7', 'the value the slider was set to reached the notebook');
    const loop = await run('for _ in dryml::widgets::progress_as("steps", 0..30) {\n    std::thread::sleep(std::time::Duration::from_millis(50));\n}', { wait: false });
    const bar = loop.locator('.widget-hbox', { has: page.locator('.widget-hprogress') });
    await bar.waitFor({ timeout: 60_000 });
    await waitDone(loop);
    assert.match(await textSoon(bar, /steps: 100%[\s\S]*30\/30/), /steps: 100%[\s\S]*30\/30/);
    assert.equal(await bar.locator('.progress-bar-success').count(), 1, 'green at its end');
    await cell.screenshot({ path: join(ARTIFACTS, 'slider.png') });
    await loop.screenshot({ path: join(ARTIFACTS, 'progress.png') });
  });

  it("stops a running loop with the toolbar's stop button and keeps going", async () => {
    await run('let mut done: Vec<usize> = Vec::new();');
    const cell = await run('dryml::batch::range(0, 100_000, 1, |_lo, hi| {\n    std::thread::sleep(std::time::Duration::from_millis(50));\n    done.push(hi);\n    Ok::<(), std::collections::TryReserveError>(())\n}).unwrap();', { wait: false });
    await cell.locator('.widget-hprogress').waitFor({ timeout: 60_000 });
    await page.locator('.jp-NotebookPanel-toolbar [data-command="notebook:interrupt-kernel"]').click();
    await waitDone(cell, 30_000);
    assert.match(await outputText(cell), /KeyboardInterrupt/);
    const next = await run('done.len() > 0');
    assert.equal(await outputText(next), 'true', 'the variables survive and the next cell runs');
  });

  it('pops up Tab completion with a variable name', async () => {
    await run('let my_long_variable = 5u32;');
    const { cell, item } = await tabComplete('my_long_v', 'my_long_variable', 60_000);
    // Its kind, from the reply's _jupyter_types_experimental: JupyterLab's icon and label.
    assert.equal(await item.first().locator('.jp-Completer-typeExtended').textContent(), 'instance');
    assert.equal(await item.first().locator('.jp-Completer-type').count(), 1);
    await page.screenshot({ path: join(ARTIFACTS, 'completion.png') });
    await page.keyboard.press('Enter');
    assert.match(await cell.locator('.cm-content').innerText(), /my_long_variable/);
    await page.keyboard.press('Shift+Enter');
    await waitDone(cell);
    assert.equal(await outputText(cell), '5');
  });

  it('answers Tab while a cell runs', async () => {
    const gate = join(tmpdir(), `dryml-browser-gate-${process.pid}`);
    rmSync(gate, { force: true });
    const busy = await run(`println!("running");\nwhile !std::path::Path::new(${JSON.stringify(gate)}).exists() {\n    std::thread::sleep(std::time::Duration::from_millis(20));\n}`, { wait: false });
    await busy.locator('.jp-OutputArea', { hasText: 'running' }).waitFor({ timeout: 120_000 });
    const { cell } = await tabComplete('my_long_v', 'my_long_variable', 30_000);
    assert.equal(await prompt(busy), '[*]:', 'answered while the other cell runs');
    await page.screenshot({ path: join(ARTIFACTS, 'completion-while-running.png') });
    await page.keyboard.press('Enter');
    writeFileSync(gate, '');
    await waitDone(busy);
    rmSync(gate, { force: true });
    await page.keyboard.press('Shift+Enter');
    await waitDone(cell);
    assert.equal(await outputText(cell), '5');
  });

  it('shows a polars DataFrame as a table', async () => {
    // The first cell naming polars builds it (minutes on a cold cache) and dryml's tables for it.
    await run(':dep polars = { version = "0.55", default-features = false }\nuse polars::prelude::*;', { timeout: 900_000 });
    const frame = await run('df!("id" => &[1i32, 2, 3], "score" => &[Some(0.5f64), None, Some(1.5)], "name" => &["a", "b", "c"]).unwrap()');
    const table = frame.locator('.jp-RenderedHTMLCommon table');
    await table.waitFor();
    assert.deepEqual(await table.locator('thead th').allInnerTexts(), ['', 'id (i32)', 'score (f64)', 'name (str)']);
    assert.match(await table.locator('tbody tr').nth(1).innerText(), /1\s+2\s+null\s+b/);
    assert.match(await frame.innerText(), /DataFrame: 3 rows × 3 columns/);
    await frame.screenshot({ path: join(ARTIFACTS, 'polars.png') });
  });

  it('saves a screenshot, with no console errors from the outputs', async () => {
    await page.keyboard.press('Escape');
    // Tall enough for every cell at once: the notebook scrolls inside the page.
    await page.setViewportSize({ width: 1280, height: 7000 });
    await page.locator('.jp-NotebookPanel .jp-WindowedPanel-outer').evaluate((e) => { e.scrollTop = 0; });
    await page.waitForTimeout(1000);
    const last = await (await lastCell()).boundingBox();
    const height = Math.min(7000, Math.ceil(last.y + last.height + 40));
    await page.screenshot({ path: join(ARTIFACTS, 'notebook.png'), clip: { x: 0, y: 0, width: 1280, height } });
    await page.setViewportSize({ width: 1280, height: 900 });
    assert.deepEqual(consoleErrors, []);
  });

  it('restarts the kernel from the menu and runs cells again', async () => {
    await page.locator('.lm-MenuBar-itemLabel', { hasText: /^Kernel$/ }).click();
    await page.locator('.lm-Menu-itemLabel', { hasText: /^Restart Kernel…$/ }).click();
    await page.locator('.jp-Dialog .jp-mod-accept', { hasText: 'Restart' }).click();
    await page.locator('#jp-main-statusbar', { hasText: /DRYML Rust \| (Restarting|Starting|Busy)/ }).waitFor({ timeout: 30_000 }).catch(() => {});
    await kernelIdle(page, 300_000);
    const cell = await run('40 + 2', { timeout: 300_000 });
    assert.equal(await outputText(cell), '42');
    const gone = await run('my_long_variable');
    assert.match(await outputText(gone), /CompilationError/, 'a restart starts from no variables');
  });
});
