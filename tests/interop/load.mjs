// Load (cold, repairing) one session with the reference's JSONL backend and print
// {meta, events, derived} or {error} as one JSON line. Usage: node load.mjs ROOT ID [none|zstd]
import { Context } from '@deepseek-ai/cordis';
import { Session, SessionStore } from '@deepseek-ai/dsh-session';
import JsonlSessionPersistence from '@deepseek-ai/dsh-session-persistence-jsonl';

const [root, id, compression] = process.argv.slice(2);
const ctx = new Context();
ctx.sessions = new SessionStore(ctx);
const backend = new JsonlSessionPersistence(ctx, { root, compression: compression ?? 'zstd' });
try {
  const loaded = await backend.load(id);
  // The model history the reference derives from what it loaded (its surface rules).
  const derived = Session.fromRestore(id, loaded.events, loaded.meta).deriveMessages();
  console.log(JSON.stringify({ meta: loaded.meta, events: loaded.events, derived }));
} catch (error) {
  console.log(JSON.stringify({ error: String(error?.message ?? error) }));
}
process.exit(0);
