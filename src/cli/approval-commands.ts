/**
 * `keel approvals list|show|approve|deny`: answers through the running gateway's control API (so the
 * turn continues at once and the chat is told); when no gateway answers, the decision is written
 * to the store and the next start applies it.
 */
import type { Command } from "commander";
import { makeVisible } from "../approvals/visible-text.js";
import { storeTarget } from "../config/store-target.js";
import { approvalJson } from "../control/approval-routes.js";
import { openCommandStore } from "../sessions/open-store.js";
import type { ApprovalDecision, ApprovalStore } from "../sessions/store.js";
import { answerWaiting } from "./answer-waiting.js";
import type { CommandContext } from "./command-context.js";
import { type CliIo, EXIT } from "./io.js";
import type { GlobalOptions } from "./load.js";
import { withStore } from "./store-commands.js";
import { budgetPauseAnswer, isBudgetPauseId } from "./usage-commands.js";

type Answer = Extract<ApprovalDecision, "approve" | "approve_session" | "deny">;
type ApprovalJson = ReturnType<typeof approvalJson>;

/** Registers `keel approvals ...` on the program. */
export function registerApprovalCommands(
  program: Command,
  { io, global, run }: CommandContext,
): void {
  const approvals = program.command("approvals").description("tool calls waiting for a human");
  approvals
    .command("list")
    .description("approvals waiting for an answer (--all: answered ones too)")
    .option("--all", "include answered approvals")
    .option("--json", "machine-readable output")
    .action((opts: { all?: boolean; json?: boolean }) =>
      run(() => approvalsList({ ...global(), ...opts }, io)),
    );
  approvals
    .command("show <id>")
    .description("one approval with its command whole (--json: exactly as it will run)")
    .option("--json", "machine-readable output")
    .action((id: string, opts: { json?: boolean }) =>
      run(() => approvalsShow(id, { ...global(), ...opts }, io)),
    );
  approvals
    .command("approve <id>")
    .description(
      "run the waiting call (--session: also allow exactly it, for its asker, in the session)",
    )
    .option("--session", "let its asker run the same command unasked for the rest of the session")
    .option("--raise", "a budget pause (b-…): raise the budget for the rest of its period")
    .action((id: string, opts: { session?: boolean; raise?: boolean }) =>
      run(() =>
        isBudgetPauseId(id)
          ? budgetPauseAnswer(id, opts.raise ? "raise" : "approve", global(), io)
          : approvalsAnswer(id, opts.session ? "approve_session" : "approve", global(), io),
      ),
    );
  approvals
    .command("deny <id>")
    .description("do not run the waiting call (the agent is told), or end a turn a budget paused")
    .action((id: string) =>
      run(() =>
        isBudgetPauseId(id)
          ? budgetPauseAnswer(id, "deny", global(), io)
          : approvalsAnswer(id, "deny", global(), io),
      ),
    );
}

export async function approvalsList(
  options: GlobalOptions & { all?: boolean; json?: boolean },
  io: CliIo,
): Promise<number> {
  return withStore(options, io, async (store: ApprovalStore) => {
    const records = await store.listApprovals(options.all ? {} : { state: "pending" });
    const rows = records.map(approvalJson);
    if (options.json) io.out(JSON.stringify(rows, null, 2));
    else if (rows.length === 0) io.out("Nothing is waiting for approval.");
    else for (const row of rows) io.out(describe(row));
    return EXIT.ok;
  });
}

/**
 * Prints one approval and its command whole. Hidden characters are shown as on the card (a
 * terminal would obey escape sequences in it); `--json` gives the exact text.
 */
export async function approvalsShow(
  id: string,
  options: GlobalOptions & { json?: boolean },
  io: CliIo,
): Promise<number> {
  return withStore(options, io, async (store: ApprovalStore) => {
    const record = await store.getApproval(id);
    if (!record) {
      io.err(`No approval has the id ${id}.`);
      return EXIT.failure;
    }
    const row = approvalJson(record);
    if (options.json) io.out(JSON.stringify(row, null, 2));
    else {
      io.out(headline(row));
      io.out(`why: ${row.reason}`);
      io.out(`${row.tool} (${record.summary.length} characters):`);
      io.out(makeVisible(record.summary));
    }
    return EXIT.ok;
  });
}

export function approvalsAnswer(
  id: string,
  decision: Answer,
  options: GlobalOptions,
  io: CliIo,
): Promise<number> {
  return answerWaiting(id, decision, options, io, {
    report: (status, body) => report(status, body, id, io),
    store: async (config) => {
      const store = await openCommandStore(storeTarget(config));
      try {
        const decided = await store.decideApproval({ id, decision, decidedBy: "an operator" });
        if (!decided) return null;
        return { changed: decided.changed, body: { approval: approvalJson(decided.record) } };
      } finally {
        await store.close();
      }
    },
  });
}

function report(status: number, body: unknown, id: string, io: CliIo): number {
  const approval = (body as { approval?: ApprovalJson } | null)?.approval;
  if (status === 200 && approval) {
    io.out(`${approval.id}: ${approval.decision} (${approval.tool}: ${approval.summary})`);
    return EXIT.ok;
  }
  if (status === 409) {
    const message = (body as { error?: { message?: string } } | null)?.error?.message;
    io.err(message ?? `${id} was already answered: ${approval?.decision ?? approval?.state}.`);
    return EXIT.failure;
  }
  if (status === 404) {
    io.err(`No approval has the id ${id}.`);
    return EXIT.failure;
  }
  io.err(`The control API answered ${status}.`);
  return EXIT.failure;
}

function describe(a: ApprovalJson): string {
  // One line of the command, visible characters only; `keel approvals show ID` prints it whole.
  const first = makeVisible(a.summary).split("\n")[0]!;
  const more = first.length < makeVisible(a.summary).length ? " …" : "";
  return `${headline(a)}\n    ${a.tool}: ${first}${more}\n    why: ${a.reason}`;
}

/** Id, state, the answer and who gave it, deadline, session. */
function headline(a: ApprovalJson): string {
  const answered = a.decision ? `  ${a.decision}${a.decided_by ? ` by ${a.decided_by}` : ""}` : "";
  return `${a.id}  ${a.state}${answered}  until ${a.deadline_at}  ${a.session_key}`;
}
