import { createRequire } from 'node:module';
import { ConnectorConfigError } from '../config.js';

const require = createRequire(import.meta.url);

/** Loads an optional peer dependency, or says plainly how to install it. */
export function loadOptional<T>(name: string, install: string, feature: string): T {
  try {
    return require(name) as T;
  } catch {
    throw new ConnectorConfigError('ledger_unavailable', `${feature} needs the optional dependency ${name}: npm install ${install}`);
  }
}
