import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The package root: src/ and dist/ both sit directly below it (this file is in their internal/), so this resolves the same from either. */
export const PACKAGE_ROOT = fileURLToPath(new URL('../..', import.meta.url));

const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  name: string;
  version: string;
};

export const PACKAGE_NAME = packageJson.name;
export const PACKAGE_VERSION = packageJson.version;
export const USER_AGENT = `${PACKAGE_NAME}/${PACKAGE_VERSION}`;

export const CONNECTOR_ID = 'hermes-agent';
export const CONNECTOR_PROFILE = 'aip.connector.hermes_agent.v1';
export const AGENT_ID = 'agent:hermes_agent:connector';
export const CAPABILITY_PREFIX = 'cap:hermes_agent:';
export const ERROR_CODE_PREFIX = 'connector.hermes_agent.';
/** The Hermes Agent revision this connector is written against ("the pin"). */
export const HERMES_PINNED_REVISION = '7426c09beee73bdff94d916015bac71384f6bc92';
export const AIP_VERSION = '1.0';
