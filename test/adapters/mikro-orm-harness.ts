/**
 * What the MikroORM behaviour suites share, whatever the driver: the library's own transactions
 * (`em.transactional()`, `em.begin()` … `em.rollback()`), what is not one, and closing the ORM.
 */
import type { MikroOrmEntityManager } from 'outboxer/mikro-orm';
import type { Opened } from './behaviour.js';

interface Fork extends MikroOrmEntityManager {
  transactional<T>(fn: (em: MikroOrmEntityManager) => Promise<T>): Promise<T>;
  begin(): Promise<void>;
  rollback(): Promise<void>;
}

/** The part of a `MikroORM` instance the harness uses. */
export interface HarnessOrm {
  readonly em: MikroOrmEntityManager & { fork(): Fork };
  close(force?: boolean): Promise<void>;
}

/** The harness of `orm`, less its adapter. */
export function mikroOrmHarness(orm: HarnessOrm): Omit<Opened<MikroOrmEntityManager>, 'database'> {
  return {
    transaction: (fn) => orm.em.fork().transactional(async (em) => fn(em)),
    async rollback(fn) {
      const em = orm.em.fork();
      await em.begin();
      try {
        await fn(em);
      } finally {
        await em.rollback();
      }
    },
    notTransactions: () => ({
      'the global EntityManager': orm.em,
      'a fork outside a transaction': orm.em.fork(),
    }),
    close: () => orm.close(true),
  };
}
