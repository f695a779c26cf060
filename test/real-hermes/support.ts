/**
 * Shared set-up of the real-Hermes suite: which installed releases to run against (every venv made
 * by `npm run hermes:install`, or those named in `HERMES_ONLY_VERSIONS`), and one real Hermes per release and test file, behind a recording
 * proxy, with a fake model, driven through the built connector.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe } from 'vitest';
import { createHermesConnector } from 'aip-connector-hermes-agent';
import type { FakeModel } from 'aip-connector-hermes-agent/fake-model';
import { checkedConnector, ENDPOINT, type CheckedConnector } from '../helpers/harness.js';
import { selectedHermesVersions, startHermesWithFakeModel, type RealHermes, type RealHermesOptions } from '../helpers/real-hermes.js';
import { startRecordingProxy, type RecordingProxy } from '../helpers/recording-proxy.js';

export const HERMES_VERSIONS = selectedHermesVersions();

if (HERMES_VERSIONS.length === 0) {
  if (process.env.CI) throw new Error('No real Hermes is installed in CI: .ci/run must run npm run hermes:install before npm test');
  console.warn(
    '\n*** Real-Hermes tests are SKIPPED: no venv under .hermes/. Run npm run hermes:install to install Hermes 0.18.2, 0.19.0 and 0.20.1 (CI always does). ***\n',
  );
}

/**
 * describe.each over the installed releases (tests are counted per release); without any, one
 * skipped placeholder, so that each file still reports its tests as skipped.
 */
export function describeEachRelease(name: string, options: { timeout?: number }, body: (version: string) => void): void {
  describe.skipIf(HERMES_VERSIONS.length === 0).each(HERMES_VERSIONS.length > 0 ? HERMES_VERSIONS : ['(none installed)'])(name, options, body);
}

/** Startup (about 1 s) plus slack on a loaded 2-core machine. */
export const START_TIMEOUT_MS = 120_000;
/** One scenario; an approval run takes a few seconds, a stop about 5. */
export const SCENARIO_TIMEOUT_MS = 60_000;

export interface RealEndpoint {
  hermes: RealHermes;
  model: FakeModel;
  proxy: RecordingProxy;
  /** The built connector, pointed at the proxy. */
  h: CheckedConnector;
  /** A fresh folder inside Hermes' working directory; `./<name>` in a command targets it. */
  scratchFolder(name: string): string;
  close(): Promise<void>;
}

export async function startRealEndpoint(options: Omit<RealHermesOptions, 'fakeModelUrl'>): Promise<RealEndpoint> {
  const { model, hermes } = await startHermesWithFakeModel(options);
  const proxy = await startRecordingProxy(hermes.baseUrl);
  const h = checkedConnector(createHermesConnector({ endpoints: [{ id: ENDPOINT, baseUrl: proxy.url, apiKey: hermes.apiKey }] }));
  return {
    hermes,
    model,
    proxy,
    h,
    scratchFolder(name) {
      const path = join(hermes.scratchDir, name);
      mkdirSync(path);
      return path;
    },
    async close() {
      await h.connector.close();
      await proxy.close();
      await hermes.stop();
      await model.close();
    },
  };
}

/**
 * describeEachRelease with one real Hermes per release for the whole block: `endpoint()` is the
 * running one (started before the block's tests, stopped after them).
 */
export function describeEachReleaseWithEndpoint(name: string, body: (endpoint: () => RealEndpoint, version: string) => void): void {
  describeEachRelease(name, {}, (version) => {
    let endpoint: RealEndpoint | undefined;
    beforeAll(async () => {
      endpoint = await startRealEndpoint({ version });
    }, START_TIMEOUT_MS);
    afterAll(async () => {
      await endpoint?.close();
    }, START_TIMEOUT_MS);
    body(() => endpoint as RealEndpoint, version);
  });
}

/** An endpoints file for the CLI naming the real Hermes directly (id `real`), its key in a file beside it. */
export function endpointsFileFor(endpoint: RealEndpoint, folder: string): string {
  writeFileSync(join(folder, 'api-key'), `${endpoint.hermes.apiKey}\n`, { mode: 0o600 });
  const config = join(folder, 'endpoints.json');
  writeFileSync(config, JSON.stringify({ endpoints: [{ id: 'real', baseUrl: endpoint.hermes.baseUrl, apiKeyFile: 'api-key' }] }));
  return config;
}
