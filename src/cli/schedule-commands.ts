/**
 * `keel schedule list|add|delete|pause|resume`: edits the jobs in the store directly, so it works
 * whether or not the gateway runs; a running gateway picks the change up within a few seconds
 * (its scheduler looks at the jobs at least every 5 s).
 */
import type { Command } from "commander";
import type { ChatAddress } from "../contract/platform.js";
import { describeJob, jobJson, ScheduleBook } from "../schedules/book.js";
import { ScheduleInputError } from "../schedules/timing.js";
import type { CommandContext } from "./command-context.js";
import { type CliIo, EXIT } from "./io.js";
import type { GlobalOptions } from "./load.js";
import { withStore } from "./store-commands.js";

export interface ScheduleAddOptions extends GlobalOptions {
  cron?: string;
  tz?: string;
  every?: string;
  at?: string;
  prompt: string;
  chat?: string;
  misfire?: string;
}

/** Registers `keel schedule ...` on the program. */
export function registerScheduleCommands(
  program: Command,
  { io, global, run }: CommandContext,
): void {
  const schedule = program.command("schedule").description("scheduled agent tasks");
  schedule
    .command("list")
    .description("every scheduled task, its next and last run")
    .option("--json", "machine-readable output")
    .action((opts: { json?: boolean }) => run(() => scheduleList({ ...global(), ...opts }, io)));
  schedule
    .command("add <name>")
    .description("add a task: one of --cron, --every, --at, and a --prompt")
    .option("--cron <expr>", 'cron expression, e.g. "0 8 * * 1-5"')
    .option("--tz <zone>", "time zone of --cron or --at (default: this machine's)")
    .option("--every <duration>", "interval: 30s, 15m, 2h, 1d")
    .option("--at <time>", "one run: +2h, or an ISO time like 2026-12-24T18:00")
    .requiredOption("--prompt <text>", "what the agent is asked each time")
    .option("--chat <platform:chat_id>", "where the output goes (default: the task's own session)")
    .option("--misfire <policy>", "missed runs after downtime: once (default), skip, all")
    .action((name: string, opts: ScheduleAddOptions) =>
      run(() => scheduleAdd(name, { ...global(), ...opts }, io)),
    );
  for (const verb of ["delete", "pause", "resume"] as const) {
    schedule
      .command(`${verb} <name>`)
      .description(`${verb} a task`)
      .action((name: string) => run(() => scheduleChange(verb, name, global(), io)));
  }
}

function withBook(
  options: GlobalOptions,
  io: CliIo,
  fn: (book: ScheduleBook) => Promise<number>,
): Promise<number> {
  return withStore(options, io, async (store) => {
    try {
      return await fn(new ScheduleBook(store));
    } catch (err) {
      if (!(err instanceof ScheduleInputError)) throw err;
      io.err(err.message);
      return EXIT.usage;
    }
  });
}

export function scheduleList(
  options: GlobalOptions & { json?: boolean },
  io: CliIo,
): Promise<number> {
  return withBook(options, io, async (book) => {
    const jobs = await book.list();
    if (options.json) io.out(JSON.stringify(jobs.map(jobJson), null, 2));
    else if (jobs.length === 0) io.out("No scheduled tasks.");
    else for (const job of jobs) io.out(describeJob(job, Date.now()));
    return EXIT.ok;
  });
}

export function scheduleAdd(name: string, options: ScheduleAddOptions, io: CliIo): Promise<number> {
  return withBook(options, io, async (book) => {
    const job = await book.create({
      name,
      cron: options.cron,
      tz: options.tz,
      every: options.every,
      at: options.at,
      prompt: options.prompt,
      chat: options.chat === undefined ? null : parseChat(options.chat),
      misfire: options.misfire,
      createdBy: "cli",
    });
    io.out(`Added ${describeJob(job, Date.now())}`);
    return EXIT.ok;
  });
}

export function scheduleChange(
  verb: "delete" | "pause" | "resume",
  name: string,
  options: GlobalOptions,
  io: CliIo,
): Promise<number> {
  return withBook(options, io, async (book) => {
    const done =
      verb === "delete"
        ? await book.delete(name)
        : verb === "pause"
          ? await book.pause(name)
          : await book.resume(name);
    if (!done) {
      io.err(`No scheduled task named ${name}. See \`keel schedule list\`.`);
      return EXIT.failure;
    }
    io.out(done === true ? `Deleted ${name}.` : describeJob(done, Date.now()));
    return EXIT.ok;
  });
}

/** `telegram:4242` → the chat address; the chat id may itself contain colons. */
function parseChat(text: string): ChatAddress {
  const colon = text.indexOf(":");
  if (colon <= 0 || colon === text.length - 1) {
    throw new ScheduleInputError(
      `Invalid --chat "${text}": write PLATFORM:CHAT_ID, e.g. telegram:4242.`,
    );
  }
  return { platform: text.slice(0, colon), chatId: text.slice(colon + 1) };
}
