/**
 * A private certificate authority made for one test with `openssl` (Node 20 cannot issue
 * certificates): its root PEM, and leaf certificates it signs for the names a loopback HTTPS
 * server presents. Keys are throwaway P-256 keys in a temporary folder, removed by `remove()`.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface PrivateCa {
  /** The root certificate (PEM), what `AIP_CONNECTOR_HOST_TLS_CA_FILE` holds. */
  readonly caPem: string;
  /** A key and certificate signed by this root for `subjectAltName` (e.g. `IP:127.0.0.1`). */
  leaf(subjectAltName: string): { key: string; cert: string };
  remove(): void;
}

function openssl(args: string[], cwd: string): void {
  try {
    execFileSync('openssl', args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
  } catch (error) {
    const stderr = (error as { stderr?: Buffer }).stderr?.toString('utf8') ?? '';
    throw new Error(`openssl ${args[0]} failed (the TLS tests need the openssl command): ${(error as Error).message} ${stderr}`);
  }
}

/** Arguments as openssl's manual writes them; none of these holds a space. */
const args = (line: string) => line.split(' ');
const P256 = '-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes';

export function createPrivateCa(): PrivateCa {
  const folder = mkdtempSync(join(tmpdir(), 'private-ca-'));
  openssl(
    [
      ...args(`req -x509 ${P256} -keyout ca.key -out ca.pem -days 2 -subj /CN=hermes-aip-test-root`),
      ...args('-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign'),
    ],
    folder,
  );
  let leaves = 0;
  return {
    caPem: readFileSync(join(folder, 'ca.pem'), 'utf8'),
    leaf(subjectAltName) {
      const name = `leaf-${++leaves}`;
      writeFileSync(join(folder, `${name}.ext`), `subjectAltName=${subjectAltName}\nextendedKeyUsage=serverAuth\n`);
      openssl(args(`req ${P256} -keyout ${name}.key -out ${name}.csr -subj /CN=${name}`), folder);
      openssl(args(`x509 -req -in ${name}.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 -extfile ${name}.ext -out ${name}.pem`), folder);
      return { key: readFileSync(join(folder, `${name}.key`), 'utf8'), cert: readFileSync(join(folder, `${name}.pem`), 'utf8') };
    },
    remove: () => rmSync(folder, { recursive: true, force: true }),
  };
}
