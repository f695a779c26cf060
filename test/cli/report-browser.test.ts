import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterEach, describe, expect, it } from 'vitest';
import { CHECK_IDS, readEvidence, runCli, simulatorWithConfig } from './helpers.js';

let browser: BrowserContext | undefined;
let profile: string | undefined;

afterEach(async () => {
  await browser?.close();
  browser = undefined;
  if (profile) rmSync(profile, { recursive: true, force: true });
  profile = undefined;
});

/** A fresh profile folder (playwright passes it as --user-data-dir). */
async function openBrowser(): Promise<BrowserContext> {
  profile = mkdtempSync(join(tmpdir(), 'hermes-aip-chromium-'));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  return browser;
}

describe('report.html in headless Chromium', { timeout: 60_000 }, () => {
  it('renders one row per check with its result, the identities, and loads nothing else', async () => {
    // A failing qualification, so that the table shows both verdicts.
    const { configPath, folder } = await simulatorWithConfig({ misbehaviour: { approvalsLeakAcrossSession: true } });
    const out = join(folder, 'out');
    const run = await runCli(['qualify', '--config', configPath, '--out', out, '--timeout', '5']);
    expect(run.code).toBe(1);
    const evidence = readEvidence(out);
    const expected = (evidence.endpoints[0]?.checks ?? []).map((check) => ({ id: check.id, result: check.result }));

    const page = await (await openBrowser()).newPage();
    const requested: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    const url = pathToFileURL(join(out, 'report.html')).href;
    await page.goto(url);

    // The tsconfig has no DOM library: describe the little of an element that is used.
    type Row = { getAttribute(name: string): string | null; querySelectorAll(selector: string): ArrayLike<{ textContent: string | null }> };
    const rows = await page.locator('table#checks tbody tr').evaluateAll((trs) =>
      (trs as unknown as Row[]).map((tr) => ({
        check: tr.getAttribute('data-check'),
        result: tr.getAttribute('data-result'),
        cells: Array.from(tr.querySelectorAll('td')).map((td) => (td.textContent ?? '').trim()),
      })),
    );
    expect(rows.map((row) => row.check)).toEqual(CHECK_IDS);
    expect(rows.map((row) => ({ id: row.check, result: row.result }))).toEqual(expected);
    for (const row of rows) {
      expect(row.cells[0]).toBe('local');
      expect(row.cells[3]).toBe(row.result === 'passed' ? 'PASS' : 'FAIL');
      if (row.result === 'failed') expect(row.cells[5]).toMatch(/approval queues are not isolated per run/);
      else expect(row.cells[5]).toBe('');
    }
    expect(rows.filter((row) => row.result === 'failed').map((row) => row.check)).toEqual(['isolated_approvals', 'approval_requires_evidence']);

    await expect(page.locator('#verdict').textContent()).resolves.toBe('FAILED');
    const identities = (await page.locator('table.identities').allTextContents()).join('\n');
    for (const label of [
      'AIP protocol version',
      'Contracts digest',
      'Pinned Hermes revision',
      'Connector git revision',
      'Tenant binding',
      'Credential revision',
    ]) {
      expect(identities).toContain(label);
    }
    expect(identities).toContain(evidence.endpoints[0]?.credential_revision);
    expect(await page.locator('script').count()).toBe(0);
    expect(requested).toEqual([url]);
  });
});
