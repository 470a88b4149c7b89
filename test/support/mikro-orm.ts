/**
 * Why MikroORM's tests are skipped on this Node, or `undefined` where they run: MikroORM 7 needs the
 * Node of its `engines` field (22.17+, one minor above outboxer's floor). The MikroORM test files
 * import the ORM only where it runs, so that on an older Node they load and report their tests as
 * skipped, saying why, instead of failing.
 */
import { engineMismatch } from './engines.js';

export const mikroOrmMissing: string | undefined = engineMismatch('@mikro-orm/core');
