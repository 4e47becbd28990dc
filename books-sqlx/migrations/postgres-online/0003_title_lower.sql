-- Migration 3 (0003_title_lower.sql) as the PostgreSQL store runs it on its own
-- connections: the same indexes, built without stopping writes. Each step runs on its own,
-- outside a transaction (CREATE INDEX CONCURRENTLY cannot run inside one): each index is
-- built CONCURRENTLY under a name of its own, the old one dropped CONCURRENTLY, and the
-- new one renamed (PostgreSQL 12 and later rename an index under a lock that stops
-- neither reads nor writes). Every step may run again: a build cut in half (a crash, a
-- lost connection) leaves an INVALID index under the new name, which the next run's
-- first step drops. The migration is recorded, under 0003's checksum, once every step
-- has run. A host applying our SQL with its own tooling may run 0003 as it is (in one
-- transaction, writes held while the indexes build) or these steps, one at a time.
-- step
DROP INDEX CONCURRENTLY IF EXISTS books_title_next;
-- step
CREATE INDEX CONCURRENTLY books_title_next ON books ((lower(title COLLATE "C")), id);
-- step
DROP INDEX CONCURRENTLY IF EXISTS books_title;
-- step
ALTER INDEX books_title_next RENAME TO books_title;
-- step: each statement this query returns, in order (the title filter's trigram index,
-- where pg_trgm is, its operator class named in the extension's schema)
SELECT statement FROM pg_extension e
    JOIN pg_namespace n ON n.oid = e.extnamespace,
    LATERAL unnest(ARRAY[
        'DROP INDEX CONCURRENTLY IF EXISTS books_title_trigrams_next',
        format('CREATE INDEX CONCURRENTLY books_title_trigrams_next ON books USING gin '
               '((lower(title COLLATE "C")) %I.gin_trgm_ops)', n.nspname),
        'DROP INDEX CONCURRENTLY IF EXISTS books_title_trigrams',
        'ALTER INDEX books_title_trigrams_next RENAME TO books_title_trigrams'
    ]) WITH ORDINALITY AS s(statement, step)
    WHERE e.extname = 'pg_trgm'
    ORDER BY step;
