/**
 * Messages per second through the Matrix adapter: the built gateway (a child process) long-polling
 * the stand-in homeserver's `/sync` and answering with room sends, with a model that answers "ok"
 * at once. Each user (a direct room) writes again once the previous message is answered, so the
 * latency is event in the room -> reply shown (including the sync, the inbox commit before the
 * position moves on, and the turn).
 */
import { startFakeMatrix } from "../test/fakes/matrix-server.js";
import {
  closedLoop,
  type ThroughputOptions,
  type ThroughputResult,
  withBenchGateway,
} from "./throughput.js";

export async function runMatrixThroughput(options: ThroughputOptions): Promise<ThroughputResult> {
  const mx = await startFakeMatrix();
  const userOf = new Map<string, string>();
  for (let i = 0; i < options.chats; i += 1) {
    const roomId = `!bench${i}:fake.test`;
    userOf.set(roomId, `@bench${i}:fake.test`);
    mx.setMembers(roomId, [mx.userId, userOf.get(roomId)!]);
  }
  // A new bot answers nothing said before its first sync: the users start once it synced twice.
  const synced = () => mx.sinceSeen.length >= 2;
  return withBenchGateway(
    options,
    {
      env: {
        MATRIX_HOMESERVER: mx.homeserver,
        MATRIX_USER_ID: mx.userId,
        MATRIX_ACCESS_TOKEN: mx.accessToken,
        MATRIX_ALLOWED_USERS: [...userOf.values()].join(","),
      },
      close: () => mx.close(),
    },
    async (messages, gatewayRssMb) => {
      while (!synced()) await new Promise((resolve) => setTimeout(resolve, 20));
      return closedLoop({
        messages,
        timeoutMs: options.timeoutMs,
        chats: [...userOf.keys()],
        write: (roomId, body) => mx.userSays({ roomId, sender: userOf.get(roomId)!, body }),
        // The first time the room shows the answer: a message, or a preview edited into it.
        onReply: (replied) =>
          mx.onCall((call) => {
            const send = /\/rooms\/([^/]+)\/send\/m\.room\.message\//.exec(call.path);
            const body = call.body as { body?: string; "m.new_content"?: { body?: string } };
            const shown = body["m.new_content"]?.body ?? body.body;
            if (send && call.status === 200 && shown === "ok") replied(send[1]!);
          }),
        gatewayRssMb,
      });
    },
  );
}
