// Writes tests/data/js_numbers.json.gz: doubles (as big-endian IEEE-754 hex) with the text
// JSON.stringify gives for each, so the Python encoder is checked against real JavaScript.
// Run with: node tests/data/tools/js_numbers.mjs | gzip -9 > tests/data/js_numbers.json.gz
const view = new DataView(new ArrayBuffer(8));
const hex = (x) => { view.setFloat64(0, x); let s = ""; for (let i = 0; i < 8; i++) s += view.getUint8(i).toString(16).padStart(2, "0"); return s; };
let seed = 20261129n;
const next = () => { seed = (seed * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn; return seed; };
const values = [1, 1.5, 0.1, 1e21, 1e20, 123456789012345680000, 1e-7, 1e-6, 1.5e-6, 1.2345e-8, 5e-324,
  1.7976931348623157e308, 1e16, 2.5e25, -1.5e-10, 0.000001, 9007199254740993, 2 ** 53, 2 ** 60, 1 / 3,
  -2 / 3, 100, 0.5, 123.456, 1e-5, 1e-4, 0.001, 4.35, 1e300, 2.2250738585072014e-308];
for (let i = 0; i < 3000; i++) {
  view.setBigUint64(0, next());
  const x = view.getFloat64(0);
  if (Number.isFinite(x) && !Object.is(x, -0)) values.push(x);
}
for (let i = 0; i < 1000; i++) { values.push(Number(next() % 100000000n) / 10 ** Number(next() % 12n)); }
for (let e = -30; e <= 30; e++) { values.push(7 * 10 ** e); values.push(1.25 * 10 ** e); }
console.log(JSON.stringify(values.map((x) => [hex(x), JSON.stringify(x)])));
