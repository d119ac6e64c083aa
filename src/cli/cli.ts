/** The `keel` command line (commander). Each command body is `(args, io) => exit code`. */
import { Command, CommanderError } from "commander";
import { KEEL_VERSION } from "../lib/version.js";
import { registerApprovalCommands } from "./approval-commands.js";
import type { CommandContext } from "./command-context.js";
import type { ControlOptions } from "./gateway-control.js";
import { gatewayRun } from "./gateway-run.js";
import { type CliIo, EXIT } from "./io.js";
import type { GlobalOptions } from "./load.js";
import { registerMcpCommands } from "./mcp-list.js";
import type { OpenOptions } from "./open.js";
import { registerScheduleCommands } from "./schedule-commands.js";
import type { SetupOptions } from "./setup.js";
import { registerTaskCommands } from "./task-commands.js";
import { registerUsageCommand } from "./usage-commands.js";

// Every command body but `gateway run` is imported when its command runs: a gateway's start
// then neither loads nor compiles setup, doctor, the backups' tar and zip code and the rest.
const control = () => import("./gateway-control.js");
const stored = () => import("./store-commands.js");
const data = () => import("./data-commands.js");
const memory = () => import("./memory-commands.js");

export async function runCli(argv: string[], io: CliIo): Promise<number> {
  let result: Promise<number> = Promise.resolve(EXIT.ok);
  const program = new Command("keel")
    .description(
      "Keel: a gateway between chat platforms and a tool-using LLM agent that never loses work.",
    )
    .version(KEEL_VERSION, "-V, --version", "print the version")
    .option("--home <dir>", "Keel home folder (default $KEEL_HOME or ~/.keel)")
    // Every subcommand's --help lists --home too (subcommands inherit this setting).
    .configureHelp({ showGlobalOptions: true })
    .exitOverride()
    .configureOutput({
      writeOut: (s) => io.out(s.trimEnd()),
      writeErr: (s) => io.err(s.trimEnd()),
    });
  const cli: CommandContext = {
    io,
    global: () => program.opts<GlobalOptions>(),
    run: (fn) => {
      result = fn();
    },
  };
  for (const register of [
    registerGatewayCommands,
    registerStoreCommands,
    registerScheduleCommands,
    registerTaskCommands,
    registerApprovalCommands,
    registerUsageCommand,
    registerMcpCommands,
    registerLocalCommands,
    registerDataCommands,
  ]) {
    register(program, cli);
  }

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

/** `keel gateway …`: run, control and install the gateway. */
function registerGatewayCommands(program: Command, { io, global, run }: CommandContext): void {
  const gateway = program.command("gateway").description("run and control the gateway");
  gateway
    .command("run")
    .description("run in the foreground until stopped")
    .option(
      "--no-supervisor",
      "ignore service-manager and container detection: a restart starts a detached successor",
    )
    .action((opts: { supervisor: boolean }) => run(() => gatewayRun({ ...global(), ...opts }, io)));
  const timeoutHelp = (what: string) => `seconds to wait ${what}`;
  gateway
    .command("start")
    .description("start in the background (via the installed service if any); returns when ready")
    .option("--timeout <seconds>", timeoutHelp("for /readyz (default 60)"))
    .action((opts: ControlOptions) =>
      run(async () => (await control()).gatewayStart({ ...global(), ...opts }, io)),
    );
  gateway
    .command("stop")
    .description("planned stop: mark it planned, SIGTERM, wait until the process is gone")
    .option("--timeout <seconds>", timeoutHelp("for the exit (default restart_drain_timeout + 30)"))
    .option("--force", "SIGKILL the gateway if it has not exited when the timeout passes")
    .action((opts: ControlOptions) =>
      run(async () => (await control()).gatewayStop({ ...global(), ...opts }, io)),
    );
  gateway
    .command("restart")
    .description("planned restart; returns when the new process is ready")
    .option(
      "--timeout <seconds>",
      timeoutHelp("for the new process (default restart_drain_timeout + 90)"),
    )
    .action((opts: ControlOptions) =>
      run(async () => (await control()).gatewayRestart({ ...global(), ...opts }, io)),
    );
  gateway
    .command("status")
    .description("state, pid, uptime, active turns, platforms (exit 3 when not running)")
    .option("--json", "one machine-readable JSON object")
    .action((opts: { json?: boolean }) =>
      run(async () =>
        (await import("./gateway-status.js")).gatewayStatus({ ...global(), ...opts }, io),
      ),
    );
  gateway
    .command("drain")
    .description("request an external drain: finish running turns, refuse new ones")
    .option("--cancel", "cancel the drain")
    .action((opts: { cancel?: boolean }) =>
      run(async () =>
        (await import("./gateway-drain.js")).gatewayDrain({ ...global(), ...opts }, io),
      ),
    );
  gateway
    .command("install")
    .description("install the systemd user unit (Linux) or launchd agent (macOS)")
    .option("--force", "replace an installed file that differs")
    .option("--dry-run", "print the unit and the commands; touch nothing")
    .option("--system", "a system-wide systemd unit (run as root)")
    .action((opts: { force?: boolean; dryRun?: boolean; system?: boolean }) =>
      run(async () =>
        (await import("./gateway-install.js")).gatewayInstall({ ...global(), ...opts }, io),
      ),
    );
  gateway
    .command("uninstall")
    .description("stop and remove the installed unit or agent")
    .option("--dry-run", "print the commands; touch nothing")
    .option("--system", "the system-wide systemd unit")
    .action((opts: { dryRun?: boolean; system?: boolean }) =>
      run(async () =>
        (await import("./gateway-install.js")).gatewayUninstall({ ...global(), ...opts }, io),
      ),
    );
}

/** `keel sessions …` and `keel pairing …`: the store, read and changed from the terminal. */
function registerStoreCommands(program: Command, { io, global, run }: CommandContext): void {
  const sessions = program.command("sessions").description("inspect stored sessions");
  sessions
    .command("list")
    .option("--limit <n>", "how many", "50")
    .option("--json", "machine-readable output")
    .option("--all", "include Keel's internal sessions (notice lanes)")
    .action((opts: { limit: string; json?: boolean; all?: boolean }) =>
      run(async () => (await stored()).sessionsList({ ...global(), ...opts }, io)),
    );
  sessions
    .command("show <id>")
    .option("--json", "machine-readable output")
    .action((id: string, opts: { json?: boolean }) =>
      run(async () => (await stored()).sessionsShow(id, { ...global(), ...opts }, io)),
    );

  const pairing = program.command("pairing").description("chat users waiting for access");
  pairing
    .command("list")
    .description("pending requests, or with --approved the users let in")
    .option("--approved", "users approved through pairing")
    .option("--json", "machine-readable output")
    .action((opts: { approved?: boolean; json?: boolean }) =>
      run(async () => (await stored()).pairingList({ ...global(), ...opts }, io)),
    );
  pairing
    .command("approve <code>")
    .description("let a user in; they are told so in their chat")
    .action((code: string) => run(async () => (await stored()).pairingApprove(code, global(), io)));
  pairing
    .command("revoke <user>")
    .description("take back a pairing approval (user id, or platform:id)")
    .action((user: string) => run(async () => (await stored()).pairingRevoke(user, global(), io)));
}

/** `keel chat`, `open`, `setup`, `memory` and `doctor`. */
function registerLocalCommands(program: Command, { io, global, run }: CommandContext): void {
  program
    .command("chat")
    .description("talk to the agent from the terminal")
    .option("--session <id>", "continue a stored API session")
    .action((opts: { session?: string }) =>
      run(async () => (await import("./chat.js")).chat({ ...global(), ...opts }, io)),
    );

  program
    .command("open")
    .description("print the browser login link (sets the web session) and open it in a browser")
    .option("--no-browser", "only print the link")
    .action((opts: OpenOptions) =>
      run(async () => (await import("./open.js")).open({ ...global(), ...opts }, io)),
    );

  program
    .command("setup")
    .description("first run: test the model (and Telegram) and write config.yaml")
    .option("--model-url <url>", "OpenAI-compatible endpoint, e.g. http://127.0.0.1:11434/v1")
    .option("--model <name>", "model name (default: the first the endpoint lists)")
    .option("--api-key <key>", "API key for the model endpoint")
    .option("--telegram-token <token>", "Telegram bot token (tested with getMe)")
    .option(
      "--yes",
      "no questions: flags and defaults (never replaces config.yaml without --force)",
    )
    .option("--force", "replace an existing config.yaml")
    .action((opts: Omit<SetupOptions, "home">) =>
      run(async () => (await import("./setup.js")).setup({ ...global(), ...opts }, io)),
    );

  const memoryCommand = program
    .command("memory")
    .description("what the agent remembers about a chat user");
  memoryCommand
    .command("show <user>")
    .description("print a user's memory file (user = <platform>-<user id>, e.g. telegram-4242)")
    .action((user: string) => run(async () => (await memory()).memoryShow(user, global(), io)));
  memoryCommand
    .command("clear <user>")
    .description("delete a user's memory file")
    .action((user: string) => run(async () => (await memory()).memoryClear(user, global(), io)));

  program
    .command("doctor")
    .description("check config, home folder, model endpoint and platform tokens")
    .action(() => run(async () => (await import("./doctor.js")).doctor(global(), io)));
}

/** `keel backup`, `restore`, `prune` and `user export|forget`: the data lifecycle. */
function registerDataCommands(program: Command, { io, global, run }: CommandContext): void {
  program
    .command("backup [path]")
    .description(
      "verified backup (store, memory, uploads, config without secrets) to PATH or backup.dir",
    )
    .option("--with-secrets", "include config.yaml's secrets and control_token")
    .option("--verify <file>", "check a backup: checksums, database integrity, schema, counts")
    .action((path: string | undefined, opts: { withSecrets?: boolean; verify?: string }) =>
      run(async () => (await data()).backupCommand(path, { ...global(), ...opts }, io)),
    );
  program
    .command("restore <file>")
    .description("restore a backup into this stopped home (the replaced data is kept aside)")
    .action((file: string) => run(async () => (await data()).restoreCommand(file, global(), io)));
  program
    .command("prune")
    .description("remove what retention.* says is too old (the gateway also does this hourly)")
    .option("--dry-run", "only say what would be removed")
    .action((opts: { dryRun?: boolean }) =>
      run(async () => (await data()).pruneCommand({ ...global(), ...opts }, io)),
    );
  const user = program.command("user").description("one person's data: export or erase it");
  user
    .command("export <person>")
    .description("write everything Keel holds about PLATFORM:ID to a zip")
    .option("--out <file>", "the zip to write (default keel-export-<platform>-<id>.zip)")
    .action((person: string, opts: { out?: string }) =>
      run(async () => (await data()).userExport(person, { ...global(), ...opts }, io)),
    );
  user
    .command("forget <person>")
    .description("erase PLATFORM:ID: their chats, messages, memory, uploads, pairing, approvals")
    .action((person: string) => run(async () => (await data()).userForget(person, global(), io)));
}
