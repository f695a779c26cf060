/**
 * The `webhooks` option is checked before any I/O: a bad one is `invalid_webhooks` (an unknown field
 * `unknown_option`) and builds nothing; the secret file must be owner-only and hold a Standard Webhooks
 * secret; plain http only to loopback with allowLoopbackHttp; webhooks need the journal.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { ConnectorConfigError, DEFAULT_WEBHOOK_TIMEOUT_MS, resolveConfig } from '../../src/config.js';
import { createHermesConnector } from '../../src/connector.js';
import { caught } from '../helpers/fixtures.js';
import { resolveWebhooks, secretFile, webhookOptions } from '../helpers/webhooks.js';

const URL_OK = 'https://hooks.example.com/hermes';

function refusal(webhooks: unknown, overrides: Record<string, unknown> = {}): ConnectorConfigError {
  const error = caught(() => createHermesConnector(webhookOptions(webhooks, overrides)));
  expect(error).toBeInstanceOf(ConnectorConfigError);
  return error as ConnectorConfigError;
}

function expectRefused(webhooks: unknown, message: RegExp, code = 'invalid_webhooks', overrides: Record<string, unknown> = {}): void {
  const error = refusal(webhooks, overrides);
  expect(error.code).toBe(code);
  expect(error.message).toMatch(message);
}

describe('webhooks that are accepted', () => {
  it('resolves an https webhook with its defaults, a stable id from origin and path only', () => {
    const { path, secret } = secretFile();
    const [webhook] = resolveWebhooks([{ url: `${URL_OK}?token=abc`, secretFile: path }]);
    expect(webhook).toMatchObject({ origin: 'https://hooks.example.com', events: 'all', timeoutMs: DEFAULT_WEBHOOK_TIMEOUT_MS });
    expect(webhook?.id).toMatch(/^webhook:[0-9a-f]{16}$/);
    expect(webhook?.secret.reveal()).toBe(secret);
    const [again] = resolveWebhooks([{ url: `${URL_OK}?token=other`, secretFile: secretFile().path, events: 'lifecycle' }]);
    expect(again?.id).toBe(webhook?.id);
    const [elsewhere] = resolveWebhooks([{ url: `${URL_OK}/2`, secretFile: path }]);
    expect(elsewhere?.id).not.toBe(webhook?.id);
  });

  it.each(['http://127.0.0.1:8080/h', 'http://localhost/h', 'http://[::1]:9/h'])('plain http to loopback %s with allowLoopbackHttp', (url) => {
    expect(resolveWebhooks([{ url, secretFile: secretFile().path, allowLoopbackHttp: true }])).toHaveLength(1);
  });

  it('accepts secrets of 24 and 64 bytes, and none or an empty list without a journal', () => {
    for (const size of [24, 64]) {
      const { path } = secretFile(0o600, `whsec_${randomBytes(size).toString('base64')}`);
      expect(resolveWebhooks([{ url: URL_OK, secretFile: path }])).toHaveLength(1);
    }
    expect(resolveConfig(webhookOptions([], { journal: undefined })).webhooks).toEqual([]);
    expect(resolveConfig(webhookOptions(undefined, { journal: undefined })).webhooks).toEqual([]);
  });
});

describe('webhooks that are refused', () => {
  it('without the journal', () => {
    expectRefused([{ url: URL_OK, secretFile: secretFile().path }], /needs the run event journal/, 'invalid_webhooks', { journal: undefined });
  });

  it('plain http to a host that is not loopback, even with allowLoopbackHttp', () => {
    expectRefused([{ url: 'http://hooks.example.com/h', secretFile: secretFile().path, allowLoopbackHttp: true }], /must use https/);
    expectRefused([{ url: 'http://10.0.0.1/h', secretFile: secretFile().path, allowLoopbackHttp: true }], /must use https/);
  });

  it('plain http to loopback without allowLoopbackHttp', () => {
    expectRefused([{ url: 'http://127.0.0.1:9/h', secretFile: secretFile().path }], /set allowLoopbackHttp/);
  });

  it.each([
    ['not a URL', 'hooks.example.com/h', /not a valid URL/],
    ['another scheme', 'ftp://hooks.example.com/h', /must use https/],
    ['user info', 'https://user:pw@hooks.example.com/h', /user info/],
    ['a fragment', 'https://hooks.example.com/h#x', /fragment/],
    ['not a string', 42, /url must be a string/],
  ])('a url that is %s', (_name, url, message) => {
    expectRefused([{ url, secretFile: secretFile().path }], message);
  });

  it.each([0o640, 0o604, 0o660, 0o644])('a secret file of mode %o (not owner-only)', (mode) => {
    expectRefused([{ url: URL_OK, secretFile: secretFile(mode).path }], /owner-only \(chmod 600\)/);
  });

  it('a missing secret file, without echoing its path', () => {
    const error = refusal([{ url: URL_OK, secretFile: '/nonexistent/whsec_pasted-secret-canary' }]);
    expect(error.message).toBe('webhooks[0] secretFile: cannot read the file: file not found');
  });

  it.each([
    ['no whsec_ prefix', randomBytes(32).toString('base64')],
    ['too short a key', `whsec_${randomBytes(16).toString('base64')}`],
    ['too long a key', `whsec_${randomBytes(65).toString('base64')}`],
    ['not base64', `whsec_${'!'.repeat(44)}`],
  ])('a secret file holding %s, without echoing it', (_name, content) => {
    const error = refusal([{ url: URL_OK, secretFile: secretFile(0o600, content).path }]);
    expect(error.message).toMatch(/must hold a Standard Webhooks secret/);
    expect(error.message).not.toContain(content.slice(6, 20));
  });

  it.each([['every'], ['ALL'], [true]])('events %j', (events) => {
    expectRefused([{ url: URL_OK, secretFile: secretFile().path, events }], /events must be "all" or "lifecycle"/);
  });

  it.each([[99], [120_001], [1.5], ['1000']])('timeoutMs %j', (timeoutMs) => {
    expectRefused([{ url: URL_OK, secretFile: secretFile().path, timeoutMs }], /timeoutMs must be an integer from 100 to 120000/);
  });

  it('a flag that is not a boolean, a webhook that is not an object, webhooks that are not an array', () => {
    expectRefused([{ url: URL_OK, secretFile: secretFile().path, allowLoopbackHttp: 'yes' }], /allowLoopbackHttp must be true or false/);
    expectRefused(['https://hooks.example.com'], /webhooks\[0\] must be an object/);
    expectRefused({ url: URL_OK }, /options.webhooks must be an array/);
  });

  it('an unknown field (a secret given inline, say) as unknown_option', () => {
    expectRefused([{ url: URL_OK, secretFile: secretFile().path, secret: 'whsec_x' }], /unknown field `secret`/, 'unknown_option');
  });

  it('two webhooks with the same origin and path', () => {
    const { path } = secretFile();
    expectRefused(
      [
        { url: `${URL_OK}?a=1`, secretFile: path },
        { url: `${URL_OK}?a=2`, secretFile: path },
      ],
      /webhooks\[1\] has the origin and path of an earlier webhook/,
    );
  });
});
