/**
 * `npm run chaos -- [--platform telegram|whatsapp|matrix] [--store sqlite|postgres] [--turns N] [--seed S] [--conversations C] [--minutes M] [--instances N] [--metrics] [--verbose]`:
 * runs the chaos harness against the built gateway and prints one line of figures. `--platform`
 * names where the users write (default Telegram; chats.ts), each through its stand-in. `--store
 * postgres` runs the same single-gateway chaos with the store in a schema of its own on the tests'
 * Postgres (KEEL_TEST_PG_URL), the gateway started again within a second of each kill. With
 * `--instances N` (2 or more), N gateways share one Postgres database (cluster-run.ts): with
 * `--store postgres` on the shipped lease TTL and default instance ids, each killed gateway back
 * within a second; without it, on a 2 s TTL and fixed ids, with up to 3 s down. `--kill-gap
 * MIN,MAX` runs that cluster schedule (random SIGKILLs only, each gateway running MIN to MAX ms
 * before the next) with any number of gateways, one included. `--metrics` prints the last
 * gateway's `GET /metrics` (single-gateway chaos) before the figures. Exits 1 when a message was lost, a tool ran twice, an
 * answer was shown twice or an interrupted session did not resume (the work folder, with
 * chaos-report.json and the gateway log, is kept and named on stderr), 2 on bad flags.
 */
import { rmSync } from "node:fs";
import { parseArgs } from "node:util";
import { formatFigures, runChaos } from "./chaos-run.js";
import { CHAOS_PLATFORMS, type ChaosPlatform } from "./chats.js";
import { runClusterChaos } from "./cluster-run.js";

function positiveInt(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 0) {
    console.error(`chaos: --${name} must be a non-negative integer, got ${raw}`);
    process.exit(2);
  }
  return n;
}

/** `--kill-gap MIN,MAX` (ms a gateway runs before the next kill). */
function gapOf(raw: string): [number, number] {
  const [min, max] = raw.split(",").map(Number);
  if (!Number.isInteger(min) || !Number.isInteger(max) || min! < 0 || max! < min!) {
    console.error(`chaos: --kill-gap must be MIN,MAX in ms (0 <= MIN <= MAX), got ${raw}`);
    process.exit(2);
  }
  return [min!, max!];
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      turns: { type: "string" },
      seed: { type: "string" },
      conversations: { type: "string" },
      minutes: { type: "string" },
      verbose: { type: "boolean", default: false },
      keep: { type: "boolean", default: false },
      instances: { type: "string" },
      store: { type: "string" },
      platform: { type: "string" },
      "kill-gap": { type: "string" },
      metrics: { type: "boolean", default: false },
    },
  });
  const store = values.store ?? "sqlite";
  if (store !== "sqlite" && store !== "postgres") {
    console.error(`chaos: --store must be sqlite or postgres, got ${store}`);
    process.exit(2);
  }
  const platform = (values.platform ?? "telegram") as ChaosPlatform;
  if (!CHAOS_PLATFORMS.includes(platform)) {
    console.error(
      `chaos: --platform must be one of ${CHAOS_PLATFORMS.join(", ")}, got ${platform}`,
    );
    process.exit(2);
  }
  const turns = positiveInt("turns", values.turns, 200);
  const seed = positiveInt("seed", values.seed, 1);
  const conversations = values.conversations
    ? positiveInt("conversations", values.conversations, 0)
    : undefined;
  // Generous: on the shipped defaults every crash loop costs a stable breaker window (60 s).
  const minutes = positiveInt("minutes", values.minutes, 40);
  const started = Date.now();
  const instances = positiveInt("instances", values.instances, 1);
  const onProgress = values.verbose ? (line: string) => console.error(line) : undefined;
  const killGap = values["kill-gap"] === undefined ? undefined : gapOf(values["kill-gap"]);
  if ((instances > 1 || killGap) && platform !== "telegram") {
    console.error("chaos: several gateways (--instances, --kill-gap) run on Telegram only");
    process.exit(2);
  }
  // Several gateways run on the Postgres the tests use (KEEL_TEST_PG_URL), in a schema of their own;
  // so does one with `--kill-gap` (random SIGKILLs only, at that pace, no crash loops or points).
  const result =
    instances > 1 || killGap
      ? await runClusterChaos({
          turns,
          seed,
          instances,
          conversations,
          timeLimitMs: minutes * 60_000,
          onProgress,
          // Named explicitly: the shipped lease TTL, and a service manager's quick restart.
          ...(values.store === "postgres" && {
            leaseTtlSeconds: null,
            maxDownMs: 1000,
            defaultInstanceIds: true,
          }),
          ...(killGap && { killGapMs: killGap }),
        })
      : await runChaos({
          turns,
          seed,
          conversations,
          timeLimitMs: minutes * 60_000,
          onProgress,
          store,
          ...(platform !== "telegram" && { platform }),
          // The last gateway's /metrics, printed before the figures.
          ...(values.metrics && { onMetrics: (text: string) => console.log(text) }),
        });
  console.log(formatFigures(result.figures));
  if (values.verbose) {
    const seconds = Math.round((Date.now() - started) / 1000);
    console.error(
      `chaos: seed=${seed} ${seconds}s crash points hit: ${JSON.stringify(result.crashPointsHit)}`,
    );
  }
  if (!result.ok) {
    console.error(`chaos: FAILED (seed ${seed}); history kept in ${result.dir}`);
    process.exit(1);
  }
  if (values.keep) console.error(`chaos: history kept in ${result.dir}`);
  else rmSync(result.dir, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
