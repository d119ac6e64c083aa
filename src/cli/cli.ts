/** The `keel` command line (commander). Each command body is `(args, io) => exit code`. */
import { Command, CommanderError } from "commander";
import { KEEL_VERSION } from "../version.js";
import { chat } from "./chat.js";
import { doctor } from "./doctor.js";
import { gatewayRun } from "./gateway-run.js";
import { type CliIo, EXIT } from "./io.js";
import type { GlobalOptions } from "./load.js";
import {
  backup,
  pairingApprove,
  pairingList,
  sessionsList,
  sessionsShow,
} from "./store-commands.js";

export async function runCli(argv: string[], io: CliIo): Promise<number> {
  let result: Promise<number> = Promise.resolve(EXIT.ok);
  const program = new Command("keel")
    .description(
      "Keel: a gateway between chat platforms and a tool-using LLM agent that never loses work.",
    )
    .version(KEEL_VERSION)
    .option("--home <dir>", "Keel home folder (default $KEEL_HOME or ~/.keel)")
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.out(s.trimEnd()),
      writeErr: (s) => io.err(s.trimEnd()),
    });
  const global = (): GlobalOptions => program.opts<GlobalOptions>();
  const run = (fn: () => Promise<number>) => {
    result = fn();
  };

  const gateway = program.command("gateway").description("run and control the gateway");
  gateway
    .command("run")
    .description("run in the foreground until stopped")
    .action(() => run(() => gatewayRun(global(), io)));

  const sessions = program.command("sessions").description("inspect stored sessions");
  sessions
    .command("list")
    .option("--limit <n>", "how many", "50")
    .option("--json", "machine-readable output")
    .action((opts: { limit: string; json?: boolean }) =>
      run(() => sessionsList({ ...global(), ...opts }, io)),
    );
  sessions
    .command("show <id>")
    .option("--json", "machine-readable output")
    .action((id: string, opts: { json?: boolean }) =>
      run(() => sessionsShow(id, { ...global(), ...opts }, io)),
    );

  const pairing = program.command("pairing").description("chat users waiting for access");
  pairing.command("list").action(() => run(() => pairingList(global(), io)));
  pairing
    .command("approve <code>")
    .action((code: string) => run(() => pairingApprove(code, global(), io)));

  program
    .command("chat")
    .description("talk to the agent from the terminal")
    .option("--session <id>", "continue a stored API session")
    .action((opts: { session?: string }) => run(() => chat({ ...global(), ...opts }, io)));

  program
    .command("doctor")
    .description("check config, home folder, model endpoint and platform tokens")
    .action(() => run(() => doctor(global(), io)));

  program
    .command("backup <path>")
    .description("online copy of state.db")
    .action((path: string) => run(() => backup(path, global(), io)));

  try {
    await program.parseAsync(argv, { from: "user" });
  } catch (err) {
    if (err instanceof CommanderError) {
      return err.exitCode === 0 ? EXIT.ok : EXIT.usage;
    }
    throw err;
  }
  return result;
}
