// Load (cold, repairing) one session with the reference's SQLite backend and print
// {meta, events} or {error} as one JSON line. Usage: node load-sqlite.mjs DATABASE ID
import { Context } from '@deepseek-ai/cordis';
import { SessionStore } from '@deepseek-ai/dsh-session';
import SqliteSessionPersistence from '@deepseek-ai/dsh-session-persistence-sqlite';

const [path, id] = process.argv.slice(2);
const ctx = new Context();
ctx.sessions = new SessionStore(ctx);
const backend = new SqliteSessionPersistence(ctx, { path, journalMode: 'wal' });
try {
  const loaded = await backend.load(id);
  console.log(JSON.stringify({ meta: loaded.meta, events: loaded.events }));
} catch (error) {
  console.log(JSON.stringify({ error: String(error?.message ?? error) }));
}
await backend.close();
process.exit(0);
