/**
 * A fresh PostgreSQL schema on a test server, outside vitest (the torture runner is a plain
 * script too): suites never see each other's rows; the connection string selects the schema
 * through `search_path`. `drop()` removes it with its tables.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

export interface PgSchema {
  name: string;
  connectionString: string;
  drop(): Promise<void>;
}

/**
 * A connected client that carries an 'error' listener for its whole life: a backend ended under
 * it (a restart, pg_terminate_backend) fails its next query instead of crashing the process.
 */
export async function connectPg(connectionString: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString });
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** Runs one statement on its own short-lived connection. */
export async function pgAdmin(connectionString: string, sql: string): Promise<Array<Record<string, unknown>>> {
  const client = await connectPg(connectionString);
  try {
    return (await client.query(sql)).rows as Array<Record<string, unknown>>;
  } finally {
    await client.end();
  }
}

export async function createPgSchemaOn(serverUrl: string, prefix: string): Promise<PgSchema> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  await pgAdmin(serverUrl, `CREATE SCHEMA ${name}`);
  const url = new URL(serverUrl);
  url.searchParams.set('options', `-c search_path=${name}`);
  return { name, connectionString: url.toString(), drop: async () => void (await pgAdmin(serverUrl, `DROP SCHEMA ${name} CASCADE`)) };
}
