// dryml's widgets under ipywidgets 7's front end: the classic Notebook 6.5 with
// widgetsnbextension 3.6 (the widget protocol VS Code speaks to every kernel but Python's), in
// headless Chromium. Its manager takes the core modules (`@jupyter-widgets/controls`, `base`,
// `output`) by name, whatever version a model names, so the kernel's controls 2.0 models render
// there as they are; this test is what says so.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startNotebook6, startBrowser, textSoon, ARTIFACTS } from './lab.mjs';

const CELLS = [
  'let k = dryml::widgets::IntSlider::new(0..=10, 2).description("k");\nk.clone()',
  'for _ in dryml::widgets::progress_as("steps", 0..30) {\n    std::thread::sleep(std::time::Duration::from_millis(20));\n}',
  'dryml::widgets::interact(dryml::widgets::IntSlider::new(1..=10, 3).description("n"), |n| format!("{n} squared is {}", n * n))',
  'k.value()',
];

describe('dryml widgets in Notebook 6.5 (ipywidgets 7)', { timeout: 900_000 }, () => {
  let nb;
  let browser;
  let page;

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    nb = await startNotebook6();
    const cells = CELLS.map((source) => ({ cell_type: 'code', metadata: {}, source, outputs: [], execution_count: null }));
    writeFileSync(join(nb.root, 'widgets.ipynb'), JSON.stringify({
      nbformat: 4, nbformat_minor: 5, cells,
      metadata: { kernelspec: { name: 'dryml-rust', display_name: 'DRYML Rust', language: 'rust' } },
    }));
    browser = await startBrowser();
  });

  after(async () => {
    // The page as the test left it, for a failure's report.
    await page?.screenshot({ path: join(ARTIFACTS, 'widgets7-last.png'), fullPage: true }).catch(() => {});
    await browser?.stop();
    await nb?.stop();
  });

  it('shows a slider whose value the next cell reads, a progress bar and interact', async () => {
    page = browser.context.pages()[0] || (await browser.context.newPage());
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(nb.url('/notebooks/widgets.ipynb'));
    await page.waitForFunction(() => window.Jupyter?.notebook?.kernel?.is_connected(), null, { timeout: 120_000 });
    const cell = (i) => page.locator('#notebook-container .cell').nth(i);
    const done = async (i, timeout = 600_000) => {
      await page.waitForFunction((n) => {
        const c = Jupyter.notebook.get_cell(n);
        return c.input_prompt_number !== null && c.input_prompt_number !== '*';
      }, i, { timeout });
    };
    // Each cell once the one before it is done: the first builds dryml.
    await page.evaluate(() => Jupyter.notebook.execute_cells([0]));
    await done(0);
    const slider = cell(0).locator('.widget-slider');
    await slider.waitFor({ timeout: 60_000 });
    assert.equal((await slider.locator('.widget-readout').innerText()).trim(), '2');

    await page.evaluate(() => Jupyter.notebook.execute_cells([1]));
    await done(1);
    const bar = cell(1).locator('.widget-hprogress');
    await bar.waitFor({ timeout: 60_000 });
    const steps = /steps: 100%[\s\S]*30\/30/;
    assert.match(await textSoon(cell(1).locator('.output_area'), steps), steps);

    await page.evaluate(() => Jupyter.notebook.execute_cells([2]));
    await done(2);
    const squared = cell(2).locator('.output_area', { hasText: '3 squared is 9' });
    await squared.first().waitFor({ timeout: 60_000 });
    // The keyboard moves ipywidgets 7's (jQuery UI) sliders; each change reaches the kernel.
    await cell(2).locator('.widget-slider .ui-slider-handle').focus();
    await page.keyboard.press('ArrowRight');
    await cell(2).locator('.output_area', { hasText: '4 squared is 16' }).first().waitFor({ timeout: 60_000 });
    await slider.locator('.ui-slider-handle').focus();
    for (let i = 0; i < 5; i++) await page.keyboard.press('ArrowRight');
    await slider.locator('.widget-readout', { hasText: '7' }).waitFor();

    await page.evaluate(() => Jupyter.notebook.execute_cells([3]));
    await done(3);
    assert.match(await cell(3).locator('.output_area').innerText(), /^Out\[\d+\]:\s*7$/, 'the value set in the page');
    await cell(0).screenshot({ path: join(ARTIFACTS, 'widgets7-slider.png') });
    await page.screenshot({ path: join(ARTIFACTS, 'widgets7.png'), fullPage: true });
    assert.deepEqual(errors, []);
  });
});
