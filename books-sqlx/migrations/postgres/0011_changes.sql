-- A second counter beside the version: `changes` moves with every write to books or
-- authors except inserts of books. The version check reads it with the total, the
-- greatest id and how many books lie above an id the caller names, so the API's cache
-- can tell a create (anyone's) from other writes and keep its full pages across it.
-- Inserts keep their trigger as it was (they leave `changes` alone).
ALTER TABLE book_count ADD COLUMN changes BIGINT NOT NULL DEFAULT 0;

CREATE OR REPLACE FUNCTION books_version_bumped() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    slot INTEGER := 1 + floor(random() * 16)::int;
BEGIN
    UPDATE book_count SET version = version + 1, changes = changes + 1 WHERE id = slot;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION books_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE book_count SET n = n - d.c, version = version + 1, changes = changes + 1
        FROM (SELECT COUNT(*) AS c, MIN(id) AS first FROM old_rows) d
        WHERE book_count.id = 1 + (d.first & 15);
    INSERT INTO book_ranges AS r (bucket, slot, n)
        SELECT id >> 10, id & 15, -COUNT(*) FROM old_rows GROUP BY 1, 2
        ON CONFLICT (bucket, slot) DO UPDATE SET n = r.n + excluded.n;
    INSERT INTO book_groups AS g (grp, slot, n)
        SELECT id >> 15, id & 15, -COUNT(*) FROM old_rows GROUP BY 1, 2
        ON CONFLICT (grp, slot) DO UPDATE SET n = g.n + excluded.n;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION books_truncated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE book_count SET n = 0, version = version + 1, changes = changes + 1;
    DELETE FROM book_ranges;
    DELETE FROM book_groups;
    RETURN NULL;
END
$$;

-- CREATE OR REPLACE drops a function's settings: pinned again.
ALTER FUNCTION books_version_bumped() SET search_path FROM CURRENT;
ALTER FUNCTION books_deleted() SET search_path FROM CURRENT;
ALTER FUNCTION books_truncated() SET search_path FROM CURRENT;
