import { describe, expect, it } from 'vitest';
import { escapeHtml, renderReport } from '../../src/cli/report-html.js';
import type { QualificationEvidence } from '../../src/cli/evidence.js';

const HOSTILE = '<script>alert("x")</script> & \'quoted\'';

function evidenceWith(text: string): QualificationEvidence {
  const at = '2030-01-01T00:00:00.000Z';
  return {
    $schema: 'https://schemas.aip-connector-hermes-agent.local/qualification/evidence.schema.json',
    qualification_id: 'qual_000000000000000000000000',
    result: 'failed',
    started_at: at,
    finished_at: at,
    duration_ms: 1,
    target: { kind: 'live', config_source: `file ${text}`, simulator_profile: null, note: text },
    identities: {
      aip_protocol_version: '1.0',
      contracts_digest: `sha256:${'0'.repeat(64)}`,
      hermes_pinned_revision: '0'.repeat(40),
      connector: { package: 'aip-connector-hermes-agent', version: '0.1.0', git_revision: 'unknown', git_dirty: null },
      host: { node_version: 'v20', platform: 'linux', arch: 'x64' },
    },
    settings: {
      step_timeout_ms: 1000,
      approval_choice: 'once',
      approval_prompt: { default: true, sha256: '0'.repeat(64), length: 1 },
      harmless_prompt: { default: true, sha256: '0'.repeat(64), length: 1 },
      ledger: { kind: 'sqlite', location: text },
    },
    endpoints: [
      {
        endpoint_id: 'local',
        display_name: text,
        base_url: 'http://127.0.0.1:1',
        hermes: { version: text, platform: text, read_from: 'GET /health', problem: null },
        offer: { source: 'capabilities', read_at: at, durable_run_idempotency: { retention_seconds: 86400 }, run_steer: true },
        tenant_binding: text,
        credential_revision: '0'.repeat(12),
        credential_source: text,
        result: 'failed',
        started_at: at,
        finished_at: at,
        duration_ms: 1,
        checks: [
          {
            id: 'discovery',
            number: 1,
            title: text,
            result: 'failed',
            reason: text,
            started_at: at,
            finished_at: at,
            duration_ms: 1,
            evidence: { note: text },
          },
        ],
        cleanup: [{ run_id: text, started_by: text, actions: [text] }],
      },
    ],
    summary: { endpoints: 1, checks: 1, passed: 0, failed: 1 },
  };
}

describe('report.html escaping', () => {
  it('escapes every value: no markup from evidence reaches the page', () => {
    const html = renderReport(evidenceWith(HOSTILE));
    expect(html).not.toContain('<script');
    expect(html).not.toContain("'quoted'");
    expect(html).toContain(escapeHtml(HOSTILE));
    expect(escapeHtml(HOSTILE)).toBe('&#60;script&#62;alert(&#34;x&#34;)&#60;/script&#62; &#38; &#39;quoted&#39;');
  });

  it('is self-contained: inline style only, no link, src or url() to another resource', () => {
    const html = renderReport(evidenceWith('plain'));
    expect(html).toMatch(/<style>[\s\S]+<\/style>/);
    expect(html).not.toMatch(/<link|\ssrc=|url\(|@import|https?:\/\/(?!127\.0\.0\.1)/);
    expect(html).toContain(`content="default-src 'none'; style-src 'unsafe-inline'"`);
  });
});
