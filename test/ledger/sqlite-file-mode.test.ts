/**
 * The SQLite ledger file holds run inputs, outputs and journal text: a new one (and the -wal and
 * -shm files SQLite keeps beside it) is owner-only, and an existing one that its group or others
 * may write is refused, untouched, with a typed error naming the file and its mode.
 */
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ConnectorConfigError, createSqliteLedger } from 'aip-connector-hermes-agent';

const folders: string[] = [];
afterAll(() => {
  for (const folder of folders.splice(0)) rmSync(folder, { recursive: true, force: true });
});

const modeOf = (path: string) => statSync(path).mode & 0o7777;

/** A ledger file with its schema and one binding, closed, in a folder of its own. */
async function existingLedger(): Promise<string> {
  const folder = mkdtempSync(join(tmpdir(), 'aip-ledger-mode-'));
  folders.push(folder);
  const path = join(folder, 'ledger.db');
  const ledger = createSqliteLedger({ path });
  await ledger.recordRun({
    action_id: 'act_1',
    capability_id: 'cap:hermes_agent:local:run_start',
    endpoint_id: 'local',
    tenant_id: null,
    run_id: 'run_1',
    session_id: 'session_1',
    credential_revision: null,
    created_at: 1,
    updated_at: 1,
    last_status: 'started',
    terminal_event: null,
    evidence_lost: false,
  });
  await ledger.close();
  return path;
}

function refusal(path: string): ConnectorConfigError {
  try {
    createSqliteLedger({ path });
  } catch (error) {
    if (error instanceof ConnectorConfigError) return error;
    throw error;
  }
  throw new Error(`${path} was opened`);
}

describe('the SQLite ledger file', () => {
  it('is created owner-only, and so are its -wal and -shm files', async () => {
    const folder = mkdtempSync(join(tmpdir(), 'aip-ledger-mode-'));
    folders.push(folder);
    const path = join(folder, 'ledger.db');
    const ledger = createSqliteLedger({ path });
    try {
      expect(await ledger.evidence('act_1', null)).toBeNull();
      expect([path, `${path}-wal`, `${path}-shm`].map((file) => [file, modeOf(file)])).toEqual([
        [path, 0o600],
        [`${path}-wal`, 0o600],
        [`${path}-shm`, 0o600],
      ]);
    } finally {
      await ledger.close();
    }
  });

  it.each([
    ['the file', '0666', ''],
    ['the file', '0620', ''],
    ['its -wal file', '0666', '-wal'],
    ['its -shm file', '0602', '-shm'],
  ])('with %s of mode %s: refused, naming the file and its mode, and left as it was', async (_which, octal, suffix) => {
    const path = await existingLedger();
    const file = `${path}${suffix}`;
    if (!existsSync(file)) writeFileSync(file, '');
    chmodSync(file, Number.parseInt(octal, 8));
    const before = readFileSync(path);
    const error = refusal(path);
    expect(error.code).toBe('insecure_ledger_file');
    expect(error.message).toContain(`${file} is writable by its group or others (mode ${octal})`);
    expect(modeOf(file)).toBe(Number.parseInt(octal, 8));
    expect(readFileSync(path).equals(before)).toBe(true);
  });

  it.each(['0600', '0640'])('with mode %s: opened, and its records read', async (octal) => {
    const path = await existingLedger();
    const mode = Number.parseInt(octal, 8);
    chmodSync(path, mode);
    const ledger = createSqliteLedger({ path });
    try {
      expect((await ledger.evidence('act_1', null))?.run_id).toBe('run_1');
    } finally {
      await ledger.close();
    }
    expect(modeOf(path)).toBe(mode);
  });
});
