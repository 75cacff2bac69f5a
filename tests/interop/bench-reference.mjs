// The bench workload on the TypeScript reference's JSONL backend (plain logs, as ours), run by
// `python -m bench` in the same round as ours. Prints one JSON object of figures.
// Usage: node tests/interop/bench-reference.mjs ROOT [STEPS] [CHUNKS] [SESSIONS] [BULK]
import { Context } from '@deepseek-ai/cordis';
import { SessionStore } from '@deepseek-ai/dsh-session';
import JsonlSessionPersistence from '@deepseek-ai/dsh-session-persistence-jsonl';

const [root, steps = '200', chunks = '20', sessions = '16', bulk = '100000'] = process.argv.slice(2);
const source = { kind: 'model', provider: 'bench', model: 'bench-1' };

function stack(dir) {
  const ctx = new Context();
  ctx.sessions = new SessionStore(ctx);
  const backend = new JsonlSessionPersistence(ctx, { root: dir, compression: 'none' });
  return { ctx, backend };
}

function appendStep(session, step, count, turn = 1) {
  session.append('step/start', { turn, step });
  for (let i = 0; i < count; i++) {
    session.append('assistant/chunk', { turn, step, chunk: { type: 'text-delta', index: 0, text: `token${i} ` } });
  }
  session.append('assistant/message', {
    turn, step,
    message: { role: 'assistant', content: [{ type: 'text', text: `step ${step} done` }], source, id: `m-${turn}-${step}` },
  }, { surfaceOp: 'append', sourceEventSeqs: [] });
  session.append('step/end', { turn, step });
}

async function runSteps(ctx, session, n, count) {
  session.append('turn/start', { turn: 1 });
  const flushes = [];
  const start = performance.now();
  for (let step = 1; step <= n; step++) {
    appendStep(session, step, count);
    const before = performance.now();
    await ctx.sessions.flush(session);
    flushes.push(performance.now() - before);
  }
  return { total: (performance.now() - start) / 1000, flushes };
}

async function checkpoints(dir, n, count, many) {
  const { ctx } = stack(dir);
  const live = [];
  for (let i = 0; i < many; i++) live.push(ctx.sessions.create(`c${i}`));
  const start = performance.now();
  const runs = await Promise.all(live.map((s) => runSteps(ctx, s, n, count)));
  const elapsed = (performance.now() - start) / 1000;
  const quantile = (values, q) => values[Math.min(values.length - 1, Math.floor(q * values.length))];
  const flushes = runs.flatMap((r) => r.flushes).sort((a, b) => a - b);
  const later = runs.flatMap((r) => r.flushes.slice(1)).sort((a, b) => a - b); // (the first creates the log)
  return {
    perSecond: (many * n) / elapsed,
    p50: quantile(flushes, 0.5),
    p99: quantile(flushes, 0.99),
    p99Later: quantile(later.length ? later : flushes, 0.99),
  };
}

async function bulkAppend(dir, n) {
  const { ctx } = stack(dir);
  const session = ctx.sessions.create('bulk');
  session.append('turn/start', { turn: 1 });
  session.append('step/start', { turn: 1, step: 1 });
  const start = performance.now();
  for (let i = 0; i < n; i++) {
    session.append('assistant/chunk', { turn: 1, step: 1, chunk: { type: 'text-delta', index: 0, text: `token${i} ` } });
  }
  await ctx.sessions.flush(session);
  return n / ((performance.now() - start) / 1000); // end to end, as ours: appends and the flush
}

const one = await checkpoints(`${root}/one`, Number(steps), Number(chunks), 1);
const many = await checkpoints(`${root}/many`, Math.max(1, Math.floor(Number(steps) / 4)), Number(chunks), Number(sessions));
const appends = await bulkAppend(`${root}/bulk`, Number(bulk));
console.log(JSON.stringify({
  ref_checkpoints_per_s_1: one.perSecond,
  ref_checkpoints_per_s_16: many.perSecond,
  ref_checkpoint_p99_ms_16: many.p99,
  ref_checkpoint_p99_ms_16_later: many.p99Later,
  ref_append_events_per_s: appends,
}));
process.exit(0);
