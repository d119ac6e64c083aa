/**
 * `keel usage [--json]`: each budget per key (spent, left, period end), spend per chat and user
 * this day and month, and the pauses waiting; read from the store, so it works with or without
 * a running gateway. And the answer to a budget pause from `keel approvals approve|deny ID`.
 */
import type { Command } from "commander";
import { isBudgetPauseId } from "../budgets/budgets.js";
import { localTimeZone } from "../budgets/local-zone.js";
import { pauseJson, usageReport, usageReportText } from "../budgets/report.js";
import { storeTarget } from "../config/store-target.js";
import { openCommandStore } from "../sessions/open-store.js";
import { answerWaiting } from "./answer-waiting.js";
import type { CommandContext } from "./command-context.js";
import { type CliIo, EXIT } from "./io.js";
import { type GlobalOptions, loadForCommand } from "./load.js";
import { withStore } from "./store-commands.js";

export function registerUsageCommand(program: Command, { io, global, run }: CommandContext): void {
  program
    .command("usage")
    .description("spend per budget, chat and user; turns paused by a budget")
    .option("--json", "machine-readable output")
    .action((opts: { json?: boolean }) => run(() => usage({ ...global(), ...opts }, io)));
}

export async function usage(options: GlobalOptions & { json?: boolean }, io: CliIo) {
  const loaded = loadForCommand(options, io);
  if (!loaded.ok) return loaded.code;
  const { config } = loaded.loaded;
  return withStore(options, io, async (store) => {
    const report = await usageReport({
      store,
      rules: config.budgets,
      prices: config.model.prices,
      timeZone: localTimeZone(),
      now: Date.now(),
    });
    io.out(options.json ? JSON.stringify(report, null, 2) : usageReportText(report));
    return EXIT.ok;
  });
}

export { isBudgetPauseId };

/**
 * `keel approvals approve ID [--raise]` / `deny ID` for a budget pause: through the running
 * gateway (the turn goes on at once), else written to the store for its next start.
 */
export function budgetPauseAnswer(
  id: string,
  decision: "approve" | "raise" | "deny",
  options: GlobalOptions,
  io: CliIo,
): Promise<number> {
  return answerWaiting(id, decision, options, io, {
    report: (status) => reportAnswer(status, id, decision, io),
    store: async (config) => {
      const store = await openCommandStore(storeTarget(config));
      try {
        const decided = await store.decideBudgetPause({ id, decision, decidedBy: "an operator" });
        if (!decided) return null;
        const detail = decided.changed ? undefined : JSON.stringify(pauseJson(decided.record));
        return { changed: decided.changed, body: null, ...(detail !== undefined && { detail }) };
      } finally {
        await store.close();
      }
    },
  });
}

function reportAnswer(status: number, id: string, decision: string, io: CliIo): number {
  if (status === 200) {
    io.out(`${id}: ${decision}`);
    return EXIT.ok;
  }
  if (status === 409) io.err(`Budget pause ${id} was already answered.`);
  else if (status === 404) io.err(`No budget pause has the id ${id}.`);
  else io.err(`The control API answered ${status}.`);
  return EXIT.failure;
}
