// Rewrites every code block that follows `<!-- example: path -->` in README.md and docs/ with the
// current content of that file (test/docs.test.ts checks they agree).
import { readFileSync, readdirSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';

const walk = (dir) =>
  readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : e.name.endsWith('.md') ? [join(dir, e.name)] : []));

for (const file of ['README.md', ...walk('docs')].filter((f) => existsSync(f))) {
  const text = readFileSync(file, 'utf8');
  const updated = text.replace(/(<!-- example: (\S+) -->\n```(\w*)\n)[\s\S]*?```/g, (_, head, path) => `${head}${readFileSync(path, 'utf8')}\`\`\``);
  if (updated !== text) {
    writeFileSync(file, updated);
    console.log(`updated ${file}`);
  }
}
