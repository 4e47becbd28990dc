-- Each write counts in a counter slot that no open transaction holds (`SKIP LOCKED`), and
-- in the range and group slot of the same number, instead of the slot of the first id it
-- wrote (inserts, deletes) or one drawn at random (other writes). Another program's
-- write transaction left open then holds up none of the API's writes, nor the host's
-- other unrelated ones, unless all 16 slots are held at once (then a slot at random, and
-- it waits, as before).
CREATE FUNCTION books_free_slot() RETURNS INTEGER LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    free INTEGER;
BEGIN
    SELECT id INTO free FROM book_count ORDER BY random() FOR UPDATE SKIP LOCKED LIMIT 1;
    RETURN COALESCE(free, 1 + floor(random() * 16)::int);
END
$$;

CREATE OR REPLACE FUNCTION books_inserted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    first BIGINT;
    added BIGINT;
    free INTEGER;
    ranged BOOLEAN := false;
    grouped BOOLEAN := false;
BEGIN
    SELECT MIN(id), COUNT(*) INTO first, added FROM new_rows;
    IF added = 0 THEN
        RETURN NULL;
    END IF;
    free := books_free_slot();
    UPDATE book_count SET n = n + added, version = version + 1 WHERE id = free;
    -- One row into slots that exist already: two updates, nothing else.
    IF added = 1 THEN
        UPDATE book_ranges SET n = n + 1 WHERE bucket = first >> 10 AND slot = free - 1;
        ranged := FOUND;
        UPDATE book_groups SET n = n + 1 WHERE grp = first >> 15 AND slot = free - 1;
        grouped := FOUND;
    END IF;
    IF NOT ranged THEN
        INSERT INTO book_ranges AS r (bucket, slot, n)
            SELECT id >> 10, free - 1, COUNT(*) FROM new_rows GROUP BY 1
            ON CONFLICT (bucket, slot) DO UPDATE SET n = r.n + excluded.n;
        WITH entered AS (
            SELECT DISTINCT (id >> 10) - 1 AS bucket FROM new_rows WHERE id & 1023 < 16
        ), folded AS (
            DELETE FROM book_ranges r USING entered e
                WHERE r.bucket = e.bucket AND r.slot <> 0
                RETURNING r.bucket, r.n
        )
        INSERT INTO book_ranges AS r (bucket, slot, n)
            SELECT bucket, 0, SUM(n) FROM folded GROUP BY bucket
            ON CONFLICT (bucket, slot) DO UPDATE SET n = r.n + excluded.n;
    END IF;
    IF NOT grouped THEN
        INSERT INTO book_groups AS g (grp, slot, n)
            SELECT id >> 15, free - 1, COUNT(*) FROM new_rows GROUP BY 1
            ON CONFLICT (grp, slot) DO UPDATE SET n = g.n + excluded.n;
        WITH entered AS (
            SELECT DISTINCT (id >> 15) - 1 AS grp FROM new_rows WHERE id & 32767 < 16
        ), folded AS (
            DELETE FROM book_groups g USING entered e
                WHERE g.grp = e.grp AND g.slot <> 0
                RETURNING g.grp, g.n
        )
        INSERT INTO book_groups AS g (grp, slot, n)
            SELECT grp, 0, SUM(n) FROM folded GROUP BY grp
            ON CONFLICT (grp, slot) DO UPDATE SET n = g.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION books_deleted() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    free INTEGER;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM old_rows) THEN
        RETURN NULL;
    END IF;
    free := books_free_slot();
    UPDATE book_count SET n = n - (SELECT COUNT(*) FROM old_rows), version = version + 1,
        changes = changes + 1 WHERE id = free;
    INSERT INTO book_ranges AS r (bucket, slot, n)
        SELECT id >> 10, free - 1, -COUNT(*) FROM old_rows GROUP BY 1
        ON CONFLICT (bucket, slot) DO UPDATE SET n = r.n + excluded.n;
    INSERT INTO book_groups AS g (grp, slot, n)
        SELECT id >> 15, free - 1, -COUNT(*) FROM old_rows GROUP BY 1
        ON CONFLICT (grp, slot) DO UPDATE SET n = g.n + excluded.n;
    RETURN NULL;
END
$$;

-- The slot in a variable: a function in the WHERE clause would be called (and lock a
-- slot) per row.
CREATE OR REPLACE FUNCTION books_version_bumped() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
DECLARE
    free INTEGER := books_free_slot();
BEGIN
    UPDATE book_count SET version = version + 1, changes = changes + 1 WHERE id = free;
    RETURN NULL;
END
$$;
