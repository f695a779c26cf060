/**
 * `npm run test:image`: the image's own checks (test/image) and the §3 reference cases with every
 * host started inside the built image (HERMES_AIP_HOST_IMAGE → test/helpers/aip-runtime/image-runner.ts).
 * Needs `npm run image` first and root (runc); the default `vitest run` leaves test/image out. Without
 * a built image only test/image is collected, and it reports itself skipped with the reason.
 */
import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { defineConfig } from 'vitest/config';

const image = process.env['HERMES_AIP_HOST_IMAGE'] ?? resolve('build/image');
const built = existsSync(join(image, 'bundle', 'config.json'));

export default defineConfig({
  test: {
    include: ['test/image/**/*.test.ts', ...(built ? ['test/host/reference-cases/*.test.ts'] : [])],
    exclude: ['test/host/reference-cases/runtime-double.test.ts'],
    env: { HERMES_AIP_HOST_IMAGE: image },
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
    // Each file starts its own containers; two at a time keeps the 2-core machines responsive.
    maxWorkers: 2,
  },
});
