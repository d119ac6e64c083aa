import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["src/**/*.test.ts", "test/**/*.test.ts", "scripts/**/*.test.ts"],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // e2e tests spawn real gateway processes; two cores, so keep parallelism modest.
    maxWorkers: 2,
    // A worker keeps its modules from one test file to the next instead of importing the whole
    // gateway again for each (test:fast: 187 s of CPU down to 87 s). Safe because nothing of ours
    // keeps module state (house rule), no test mocks modules or fakes timers, and
    // every test owns its resources. Forks, not threads: the pid-file race tests need processes.
    isolate: false,
  },
});
