import type { HermesIdentity } from '../evidence.js';

/** Hermes answers /health at once; this only bounds a silent endpoint. */
const HEALTH_TIMEOUT_MS = 10_000;

/** What a Hermes installed from source (not from a release) reports as its version. */
const SOURCE_INSTALL_VERSIONS: ReadonlySet<string> = new Set(['0.0.0', 'unknown']);

/**
 * Which Hermes answers at `baseUrl`: the released versions (0.18.2, 0.19.0, 0.20.1) serve `GET /health`
 * without a key, as `{"status": "ok", "platform": "hermes-agent", "version": "<version>"}`; the
 * simulator answers the same with a version marked `+aip-simulator`. A source install may report
 * `0.0.0` or `unknown`: recorded as reported, with a problem saying it names no release. No key is sent.
 */
export async function readHermesIdentity(baseUrl: string): Promise<HermesIdentity> {
  const url = new URL('health', baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`);
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS), redirect: 'error' });
    const body = (await response.json().catch(() => undefined)) as { version?: unknown; platform?: unknown } | undefined;
    if (!response.ok) return unknown(`GET /health answered HTTP ${response.status}`);
    if (typeof body?.version !== 'string' || body.version === '') return unknown('GET /health gave no version');
    const problem = SOURCE_INSTALL_VERSIONS.has(body.version)
      ? `GET /health reports version "${body.version}", as a Hermes installed from source does: no release is named`
      : null;
    return { version: body.version, platform: typeof body.platform === 'string' ? body.platform : null, read_from: 'GET /health', problem };
  } catch (error) {
    return unknown(`GET /health failed: ${(error as Error).message}`);
  }
}

function unknown(problem: string): HermesIdentity {
  return { version: null, platform: null, read_from: 'GET /health', problem };
}
