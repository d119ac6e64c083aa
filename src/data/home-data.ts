/** Where a Keel home keeps the data the lifecycle commands handle (interface.md, "Home folder"). */
import { join } from "node:path";

export interface HomeData {
  home: string;
  /** SQLite store file (absent with a Postgres store). */
  stateDb: string;
  /** Per-person memory files, `<platform>-<user id>.md`. */
  memoryDir: string;
  /** Files people sent on chat platforms, `<inbox>/<transcript id>/` (`agent.cwd`/inbox). */
  inboxDir: string;
  /** Web chat uploads. */
  uploadsDir: string;
  /** Files the agent sent (`send_file`, browser downloads), named by id. */
  filesDir: string;
  config: string;
  controlToken: string;
  /** `keel user forget` and `keel restore` append a line here (no content). */
  auditLog: string;
}

export function homeData(home: string, cwd: string): HomeData {
  return {
    home,
    stateDb: join(home, "state.db"),
    memoryDir: join(home, "memory"),
    inboxDir: join(cwd, "inbox"),
    uploadsDir: join(home, "uploads"),
    filesDir: join(home, "files"),
    config: join(home, "config.yaml"),
    controlToken: join(home, "control_token"),
    auditLog: join(home, "logs", "audit.log"),
  };
}
