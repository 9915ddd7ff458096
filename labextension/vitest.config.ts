/**
 * Vitest settings for the panel's unit tests.
 *
 * Tests live beside the sources in `src/__tests__/`; pinning `include` keeps vitest from
 * wandering into `lib/` or the built extension. Tests that need a DOM opt into happy-dom
 * per file (`// @vitest-environment happy-dom`), so the rest stay on the faster node one.
 */
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts'],
    environment: 'node'
  }
});
