// A notebook of ours as an app: Voilà from the venv serves notebooks/powers.ipynb (a slider and
// a plot) to headless Chromium; moving the slider draws the plot again.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startVoila, startBrowser, ARTIFACTS, ROOT } from './lab.mjs';

describe('DRYML Rust in Voilà', { timeout: 900_000 }, () => {
  let voila;
  let browser;

  before(async () => {
    mkdirSync(ARTIFACTS, { recursive: true });
    voila = await startVoila(join(ROOT, 'notebooks', 'powers.ipynb'));
    browser = await startBrowser();
  });

  after(async () => {
    await browser?.stop();
    await voila?.stop();
  });

  it('renders the slider and the plot, and the slider redraws the plot', async () => {
    const page = browser.context.pages()[0] || (await browser.context.newPage());
    const errors = [];
    page.on('pageerror', (e) => errors.push(e.message));
    // Voilà runs every cell before it sends the page: the first dryml build is in this wait.
    await page.goto(voila.base, { timeout: 600_000 });
    const slider = page.locator('.widget-slider').first();
    await slider.waitFor({ timeout: 120_000 });
    const title = (p) => page.locator('svg text', { hasText: `y = x^${p}` }).first();
    await title(1).waitFor({ timeout: 60_000 });
    assert.equal(await page.getByText('fn draw(').count(), 0, 'Voilà shows no code');

    // The keyboard moves the slider as a user's arrow keys do; the kernel draws the new curve.
    await slider.locator('.noUi-handle').focus();
    await page.keyboard.press('ArrowRight');
    await page.keyboard.press('ArrowRight');
    await title(3).waitFor({ timeout: 60_000 });
    assert.equal(await title(1).count(), 0, 'the old curve is gone');
    assert.equal((await slider.locator('.widget-readout').innerText()).trim(), '3');
    await page.screenshot({ path: join(ARTIFACTS, 'voila-slider.png') });
    assert.deepEqual(errors, []);
  });
});
