import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The image's own tests need `npm run image` and root: `npm run test:image` (vitest.image.config.ts).
    exclude: ['test/image/**', 'node_modules/**'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    pool: 'forks',
  },
});
