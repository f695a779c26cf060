import { describe, expect, it } from 'vitest';
import { ConnectorConfigError, DEFAULT_LIMITS, resolveConfig, type ConfigErrorCode } from '../src/config.js';
import { createHermesConnector } from '../src/connector.js';
import type { HermesConnectorOptions } from '../src/types.js';
import { LOCAL_BASE_URL, TEST_API_KEY, caught } from './helpers/fixtures.js';

const MiB = 1024 * 1024;
const SECRET_KEY = 'sk-config-canary-7f3a9c';

function endpoint(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { id: 'ep1', baseUrl: LOCAL_BASE_URL, apiKey: SECRET_KEY, ...overrides };
}

/** Builds the connector from loosely typed options and returns the ConnectorConfigError it throws. */
function configError(opts: unknown): ConnectorConfigError {
  const error = caught(() => createHermesConnector(opts as HermesConnectorOptions));
  expect(error).toBeInstanceOf(ConnectorConfigError);
  expect(error).toBeInstanceOf(Error);
  expect((error as Error).name).toBe('ConnectorConfigError');
  return error as ConnectorConfigError;
}

function expectCode(opts: unknown, code: ConfigErrorCode): ConnectorConfigError {
  const error = configError(opts);
  expect(error.code).toBe(code);
  // The same validation is reachable through resolveConfig.
  const direct = caught(() => resolveConfig(opts as HermesConnectorOptions)) as ConnectorConfigError;
  expect(direct.code).toBe(code);
  expect(direct.message).toBe(error.message);
  return error;
}

describe('createHermesConnector accepts a valid configuration', () => {
  it('builds a connector without I/O and exposes id hermes-agent', async () => {
    const connector = createHermesConnector({ endpoints: [{ id: 'ep1', baseUrl: LOCAL_BASE_URL, apiKey: TEST_API_KEY }] });
    expect(connector.id).toBe('hermes-agent');
    expect(connector.capabilities()).toHaveLength(5);
    await connector.close();
  });

  it('resolves the origin, keeps optional fields and applies default limits', () => {
    const config = resolveConfig({
      endpoints: [
        { id: 'a-1_b', baseUrl: 'https://hermes.example:8443/', apiKey: TEST_API_KEY, displayName: 'Hermes A', tenantId: 'tenant-1' },
        { id: 'b', baseUrl: 'http://127.0.0.1:8642' },
      ],
    });
    expect(config.endpoints.map((e) => [e.id, e.origin, e.displayName, e.tenantId])).toEqual([
      ['a-1_b', 'https://hermes.example:8443', 'Hermes A', 'tenant-1'],
      ['b', 'http://127.0.0.1:8642', undefined, undefined],
    ]);
    expect(config.endpoints[0]?.apiKey?.reveal()).toBe(TEST_API_KEY);
    expect(config.endpoints[1]?.apiKey).toBeUndefined();
    expect(config.limits).toEqual(DEFAULT_LIMITS);
    expect(config.logger).toBeUndefined();
    expect(config.dispatcher).toBeUndefined();
    expect(config.now).toBe(Date.now);
  });

  it('accepts boundary values: 128-char id, 16384-char key, 256 MiB limits, maxEvents 1 and 100000', () => {
    const id = 'a'.repeat(128);
    const config = resolveConfig({
      endpoints: [{ id, baseUrl: LOCAL_BASE_URL, apiKey: 'k'.repeat(16384), displayName: 'd'.repeat(256), tenantId: 't'.repeat(512) }],
      limits: { maxJsonResponseBytes: 256 * MiB, maxStreamResponseBytes: 256 * MiB, maxSseFrameBytes: 256 * MiB, defaultMaxEvents: 100_000 },
    });
    expect(config.endpoints[0]?.id).toBe(id);
    expect(config.limits.maxSseFrameBytes).toBe(256 * MiB);
    expect(config.limits.defaultMaxEvents).toBe(100_000);
    expect(resolveConfig({ endpoints: [{ id: 'x', baseUrl: LOCAL_BASE_URL }], limits: { defaultMaxEvents: 1 } }).limits.defaultMaxEvents).toBe(1);
  });

  it('merges partial limits over the defaults', () => {
    const config = resolveConfig({ endpoints: [{ id: 'x', baseUrl: LOCAL_BASE_URL }], limits: { maxSseFrameBytes: 4096 } });
    expect(config.limits).toEqual({ ...DEFAULT_LIMITS, maxSseFrameBytes: 4096 });
  });
});

describe('options object and top-level options', () => {
  it.each([
    ['null', null],
    ['a string', 'endpoints'],
    ['an array', [endpoint()]],
    ['a number', 1],
  ])('refuses options that are %s with invalid_options', (_name, opts) => {
    expectCode(opts, 'invalid_options');
  });

  it('refuses an unknown top-level option with unknown_option and names it', () => {
    const error = expectCode({ endpoints: [endpoint()], retries: 3 }, 'unknown_option');
    expect(error.message).toContain('retries');
  });

  it('does not echo an unknown option name that does not look like an identifier', () => {
    const error = expectCode({ endpoints: [endpoint()], [`Bearer ${SECRET_KEY} x`]: 1 }, 'unknown_option');
    expect(error.message).not.toContain(SECRET_KEY);
  });

  it('refuses an unknown endpoint field with unknown_option', () => {
    expectCode({ endpoints: [endpoint({ token: 'x' })] }, 'unknown_option');
  });
});

describe('endpoints list', () => {
  it.each([
    ['missing', undefined],
    ['empty', []],
    ['an object', { ep1: endpoint() }],
    ['a string', 'ep1'],
    ['null', null],
  ])('refuses an endpoints list that is %s with no_endpoints', (_name, endpoints) => {
    expectCode({ endpoints }, 'no_endpoints');
  });

  it.each([
    ['null', null],
    ['a string', 'http://127.0.0.1'],
    ['an array', [endpoint()]],
  ])('refuses an endpoint that is %s with invalid_endpoint', (_name, value) => {
    expectCode({ endpoints: [value] }, 'invalid_endpoint');
  });

  it('refuses duplicate endpoint ids with duplicate_endpoint_id', () => {
    const error = expectCode(
      { endpoints: [endpoint({ id: 'dup' }), endpoint({ id: 'other' }), endpoint({ id: 'dup', baseUrl: 'http://127.0.0.2' })] },
      'duplicate_endpoint_id',
    );
    expect(error.message).toContain('dup');
  });
});

describe('endpoint id', () => {
  it.each([
    ['uppercase', 'Hermes-1'],
    ['leading space', ' x'],
    ['trailing space', 'x '],
    ['empty', ''],
    ['129 chars', 'a'.repeat(129)],
    ['a dot', 'a.b'],
    ['a slash', 'a/b'],
    ['a colon', 'a:b'],
    ['non-ASCII', 'héllo'],
    ['a number', 1],
    ['missing', undefined],
  ])('refuses an id with %s (not normalized) with invalid_endpoint_id', (_name, id) => {
    expectCode({ endpoints: [endpoint({ id })] }, 'invalid_endpoint_id');
  });
});

describe('endpoint baseUrl', () => {
  it.each([
    ['a path', 'http://127.0.0.1:8642/v1'],
    ['a path with trailing slash', 'http://127.0.0.1:8642/hermes/'],
    ['a query', 'http://127.0.0.1:8642/?a=1'],
    ['an empty query', 'http://127.0.0.1:8642/?'],
    ['a fragment', 'http://127.0.0.1:8642/#top'],
    ['an empty fragment', 'http://127.0.0.1:8642#'],
    ['user info', 'http://alice:hunter2@127.0.0.1:8642/'],
    ['a user name only', 'https://alice@hermes.example/'],
    ['scheme ftp:', 'ftp://127.0.0.1/'],
    ['scheme file:', 'file:///tmp/x'],
    ['scheme ws:', 'ws://127.0.0.1/'],
    ['not a URL', 'not a url'],
    ['a relative path', '/v1/runs'],
    ['an empty string', ''],
    ['a number', 8642],
    ['missing', undefined],
  ])('refuses a baseUrl with %s with invalid_base_url', (_name, baseUrl) => {
    expectCode({ endpoints: [endpoint({ baseUrl })] }, 'invalid_base_url');
  });

  it('never echoes the user info (or the URL) in the message', () => {
    for (const baseUrl of ['http://alice:hunter2-pw@127.0.0.1:8642/', 'http://alice:hunter2-pw@127.0.0.1:8642/path', 'ftp://alice:hunter2-pw@host/']) {
      const error = expectCode({ endpoints: [endpoint({ baseUrl })] }, 'invalid_base_url');
      expect(error.message).not.toContain('hunter2-pw');
      expect(error.message).not.toContain('alice');
      expect(String(error.stack)).not.toContain('hunter2-pw');
    }
  });
});

describe('endpoint apiKey', () => {
  it.each([
    ['blank', ''],
    ['a space', 'sk-abc def'],
    ['only spaces', '   '],
    ['a leading space', ' sk-abc'],
    ['a newline', 'sk-abc\n'],
    ['a carriage return', 'sk-\rabc'],
    ['a tab', 'sk-\tabc'],
    ['a NUL', 'sk-\u0000abc'],
    ['DEL', 'sk-\u007fabc'],
    ['non-ASCII', 'sk-abcé'],
    ['16385 chars', 'k'.repeat(16385)],
    ['a number', 12345],
    ['null', null],
  ])('refuses an apiKey with %s with invalid_api_key', (_name, apiKey) => {
    expectCode({ endpoints: [endpoint({ apiKey })] }, 'invalid_api_key');
  });

  it('never puts the API key in any error message', () => {
    const secretish = ['sk-canary-LEAK-1 x', 'sk-canary-LEAK-2\n', 'sk-canary-LEAK-3é'];
    for (const apiKey of secretish) {
      const error = expectCode({ endpoints: [endpoint({ apiKey })] }, 'invalid_api_key');
      expect(error.message).not.toContain('LEAK');
      expect(String(error.stack)).not.toContain('LEAK');
    }
    // A valid key next to another bad field is not echoed either.
    const other = [
      { endpoints: [endpoint({ apiKey: 'sk-canary-LEAK-4', baseUrl: 'http://127.0.0.1/x' })] },
      { endpoints: [endpoint({ apiKey: 'sk-canary-LEAK-5', tenantId: ' t' })] },
      { endpoints: [endpoint({ apiKey: 'sk-canary-LEAK-6' }), endpoint({ apiKey: 'sk-canary-LEAK-6' })] },
      { endpoints: [endpoint({ apiKey: 'sk-canary-LEAK-7' })], limits: { maxSseFrameBytes: 0 } },
    ];
    for (const opts of other) expect(configError(opts).message).not.toContain('LEAK');
  });
});

describe.each([
  ['tenantId', 'invalid_tenant_id', 512],
  ['displayName', 'invalid_display_name', 256],
] as const)('endpoint %s', (field, code, maxBytes) => {
  it.each([
    ['empty', ''],
    ['blank', '   '],
    ['a leading space', ' padded'],
    ['a trailing space', 'padded '],
    ['a trailing newline', 'value\n'],
    ['an inner newline', 'a\nb'],
    ['an inner NUL', 'a\u0000b'],
    ['an inner DEL', 'a\u007fb'],
    ['an inner C1 control', 'a\u0085b'],
    ['too many bytes', 'x'.repeat(maxBytes + 1)],
    ['too many bytes in UTF-8', 'é'.repeat(maxBytes / 2 + 1)],
    ['a number', 7],
    ['null', null],
  ])(`refuses a ${field} with %s`, (_name, value) => {
    expectCode({ endpoints: [endpoint({ [field]: value })] }, code);
  });

  it(`accepts a ${field} of exactly ${maxBytes} bytes with inner spaces and non-ASCII`, () => {
    const value = `é ${'x'.repeat(maxBytes - 3)}`;
    expect(Buffer.byteLength(value)).toBe(maxBytes);
    const resolved = resolveConfig({ endpoints: [endpoint({ [field]: value }) as never] }).endpoints[0];
    expect(resolved?.[field]).toBe(value);
  });
});

describe('limits', () => {
  const base = { endpoints: [endpoint()] };

  it.each([
    ['null', null],
    ['a number', 5],
    ['an array', [1]],
    ['a string', 'big'],
  ])('refuses limits that are %s with invalid_limits', (_name, limits) => {
    expectCode({ ...base, limits }, 'invalid_limits');
  });

  it.each(['maxJsonResponseBytes', 'maxStreamResponseBytes', 'maxSseFrameBytes', 'maxRequestBodyBytes'])('refuses bad %s values', (key) => {
    for (const value of [0, -1, 1.5, 256 * MiB + 1, Number.NaN, Number.POSITIVE_INFINITY, '1024', null, true]) {
      const error = expectCode({ ...base, limits: { [key]: value } }, 'invalid_limits');
      expect(error.message).toContain(key);
    }
  });

  it('refuses defaultMaxEvents 0, 100001, 1.5 and a string', () => {
    for (const value of [0, 100_001, 1.5, '10']) {
      const error = expectCode({ ...base, limits: { defaultMaxEvents: value } }, 'invalid_limits');
      expect(error.message).toContain('defaultMaxEvents');
    }
  });

  it('refuses a frame limit larger than the stream limit', () => {
    expectCode({ ...base, limits: { maxSseFrameBytes: 2048, maxStreamResponseBytes: 1024 } }, 'invalid_limits');
    // Equal is allowed.
    expect(
      resolveConfig({ ...base, limits: { maxSseFrameBytes: 1024, maxStreamResponseBytes: 1024 } } as unknown as HermesConnectorOptions).limits.maxSseFrameBytes,
    ).toBe(1024);
  });

  it('refuses a default frame limit larger than a lowered stream limit', () => {
    expectCode({ ...base, limits: { maxStreamResponseBytes: 1024 } }, 'invalid_limits');
  });

  it('refuses an unknown limit key with unknown_option', () => {
    const error = expectCode({ ...base, limits: { maxEvents: 10 } }, 'unknown_option');
    expect(error.message).toContain('maxEvents');
  });

  it.each(['toString', 'constructor', 'hasOwnProperty', 'valueOf'])('refuses the inherited name %s as a limit key with unknown_option', (key) => {
    expectCode({ ...base, limits: { [key]: 5 } }, 'unknown_option');
  });
});

describe('logger, dispatcher and clock', () => {
  const base = { endpoints: [endpoint()] };

  it.each([
    ['an empty object', {}],
    ['a string', 'info'],
    ['null', null],
    ['console-like without child()', { info() {}, error() {} }],
  ])('refuses a logger that is %s with invalid_logger', (_name, logger) => {
    expectCode({ ...base, logger }, 'invalid_logger');
  });

  it.each([
    ['an empty object', {}],
    ['a string', 'pool'],
    ['null', null],
    ['an object whose request is not a function', { request: true, dispatch: () => true }],
    ['an object with request() but no dispatch()', { request: () => undefined }],
  ])('refuses a dispatcher that is %s with invalid_dispatcher', (_name, dispatcher) => {
    expectCode({ ...base, dispatcher }, 'invalid_dispatcher');
  });

  it.each([
    ['a number', 1_700_000_000_000],
    ['a string', 'now'],
    ['null', null],
    ['an object', { now: () => 1 }],
  ])('refuses a clock that is %s with invalid_clock', (_name, now) => {
    expectCode({ ...base, now }, 'invalid_clock');
  });

  it('accepts an object with child() as logger, one with request() and dispatch() as dispatcher and a function as clock', () => {
    const logger = { child: () => logger };
    const dispatcher = { request: () => undefined, dispatch: () => true };
    const now = () => 42;
    const config = resolveConfig({ ...base, logger, dispatcher, now } as unknown as HermesConnectorOptions);
    expect(config.logger).toBe(logger);
    expect(config.dispatcher).toBe(dispatcher);
    expect(config.now()).toBe(42);
  });
});

describe('validation order', () => {
  it('reports unknown top-level options before looking at endpoints', () => {
    expectCode({ endpoints: [], bogus: 1 }, 'unknown_option');
  });

  it('validates endpoints before limits, limits before logger, logger before dispatcher, dispatcher before clock', () => {
    expectCode({ endpoints: [endpoint({ id: 'BAD' })], limits: { maxSseFrameBytes: 0 } }, 'invalid_endpoint_id');
    expectCode({ endpoints: [endpoint()], limits: { maxSseFrameBytes: 0 }, logger: {} }, 'invalid_limits');
    expectCode({ endpoints: [endpoint()], logger: {}, dispatcher: {} }, 'invalid_logger');
    expectCode({ endpoints: [endpoint()], dispatcher: {}, now: 1 }, 'invalid_dispatcher');
  });
});

describe('ConnectorConfigError instanceof', () => {
  it('holds for errors thrown by the connector', () => {
    const error = caught(() => createHermesConnector({ endpoints: [] } as HermesConnectorOptions));
    expect(error instanceof ConnectorConfigError).toBe(true);
    expect((error as ConnectorConfigError).code).toBe('no_endpoints');
  });

  it('holds for a directly constructed error, with code, name and message', () => {
    const error = new ConnectorConfigError('invalid_limits', 'msg');
    expect(error instanceof ConnectorConfigError).toBe(true);
    expect(error instanceof Error).toBe(true);
    expect(error.code).toBe('invalid_limits');
    expect(error.name).toBe('ConnectorConfigError');
    expect(error.message).toBe('msg');
  });

  it('holds for any object carrying the global brand symbol (a second copy of the package)', () => {
    const foreign = { code: 'no_endpoints', [Symbol.for('aip-connector-hermes-agent.ConnectorConfigError')]: true };
    expect(foreign instanceof ConnectorConfigError).toBe(true);
    class OtherCopyError extends Error {
      constructor() {
        super('x');
        Object.defineProperty(this, Symbol.for('aip-connector-hermes-agent.ConnectorConfigError'), { value: true });
      }
    }
    expect(new OtherCopyError() instanceof ConnectorConfigError).toBe(true);
  });

  it('does not hold for plain errors, look-alikes, a wrong brand value or non-objects', () => {
    expect(new Error('x') instanceof ConnectorConfigError).toBe(false);
    expect(Object.assign(new Error('x'), { name: 'ConnectorConfigError', code: 'no_endpoints' }) instanceof ConnectorConfigError).toBe(false);
    expect({ [Symbol.for('aip-connector-hermes-agent.ConnectorConfigError')]: 'yes' } instanceof ConnectorConfigError).toBe(false);
    expect({ [Symbol('aip-connector-hermes-agent.ConnectorConfigError')]: true } instanceof ConnectorConfigError).toBe(false);
    expect((null as unknown) instanceof ConnectorConfigError).toBe(false);
    expect(('ConnectorConfigError' as unknown) instanceof ConnectorConfigError).toBe(false);
  });
});
