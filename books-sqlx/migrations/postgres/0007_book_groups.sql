-- Books per group of 32 ranges (32,768 ids), kept like the ranges (slots picked from
-- the first written id, a closed group's slots folded into slot 0 by the first writes
-- into the next): a deep page sums the groups before its own, then the ranges of its
-- group, so each prefix sum covers a few dozen rows instead of one row per range.
-- Writers wait while the counts are filled, so none is missed.
LOCK TABLE books IN SHARE ROW EXCLUSIVE MODE;

CREATE TABLE book_groups (
    grp  BIGINT   NOT NULL,
    slot SMALLINT NOT NULL,
    n    BIGINT   NOT NULL,
    PRIMARY KEY (grp, slot)
);

INSERT INTO book_groups (grp, slot, n) SELECT id >> 15, 0, COUNT(*) FROM books GROUP BY 1;

CREATE OR REPLACE FUNCTION books_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    first BIGINT;
    added BIGINT;
    ranged BOOLEAN := false;
    grouped BOOLEAN := false;
BEGIN
    SELECT MIN(id), COUNT(*) INTO first, added FROM new_rows;
    IF added = 0 THEN
        RETURN NULL;
    END IF;
    UPDATE book_count SET n = n + added, version = version + 1 WHERE id = 1 + (first & 15);
    -- One row into slots that exist already: two updates, nothing else.
    IF added = 1 THEN
        UPDATE book_ranges SET n = n + 1 WHERE bucket = first >> 10 AND slot = first & 15;
        ranged := FOUND;
        UPDATE book_groups SET n = n + 1 WHERE grp = first >> 15 AND slot = first & 15;
        grouped := FOUND;
    END IF;
    IF NOT ranged THEN
        INSERT INTO book_ranges AS r (bucket, slot, n)
            SELECT id >> 10, first & 15, COUNT(*) FROM new_rows GROUP BY 1
            ON CONFLICT (bucket, slot) DO UPDATE SET n = r.n + excluded.n;
        IF first & 1023 < 16 THEN
            WITH folded AS (
                DELETE FROM book_ranges WHERE bucket = (first >> 10) - 1 AND slot <> 0
                RETURNING n
            )
            INSERT INTO book_ranges AS r (bucket, slot, n)
                SELECT (first >> 10) - 1, 0, SUM(n) FROM folded HAVING COUNT(*) > 0
                ON CONFLICT (bucket, slot) DO UPDATE SET n = r.n + excluded.n;
        END IF;
    END IF;
    IF NOT grouped THEN
        INSERT INTO book_groups AS g (grp, slot, n)
            SELECT id >> 15, first & 15, COUNT(*) FROM new_rows GROUP BY 1
            ON CONFLICT (grp, slot) DO UPDATE SET n = g.n + excluded.n;
        IF first & 32767 < 16 THEN
            WITH folded AS (
                DELETE FROM book_groups WHERE grp = (first >> 15) - 1 AND slot <> 0
                RETURNING n
            )
            INSERT INTO book_groups AS g (grp, slot, n)
                SELECT (first >> 15) - 1, 0, SUM(n) FROM folded HAVING COUNT(*) > 0
                ON CONFLICT (grp, slot) DO UPDATE SET n = g.n + excluded.n;
        END IF;
    END IF;
    RETURN NULL;
END
$$;

CREATE OR REPLACE FUNCTION books_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE book_count SET n = n - d.c, version = version + 1
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

CREATE OR REPLACE FUNCTION books_ranges_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO book_ranges AS r (bucket, slot, n)
        SELECT bucket, 0, SUM(delta) FROM (
            SELECT id >> 10 AS bucket, -1 AS delta FROM old_rows
            UNION ALL SELECT id >> 10, 1 FROM new_rows
        ) d GROUP BY bucket HAVING SUM(delta) <> 0
        ON CONFLICT (bucket, slot) DO UPDATE SET n = r.n + excluded.n;
    INSERT INTO book_groups AS g (grp, slot, n)
        SELECT grp, 0, SUM(delta) FROM (
            SELECT id >> 15 AS grp, -1 AS delta FROM old_rows
            UNION ALL SELECT id >> 15, 1 FROM new_rows
        ) d GROUP BY grp HAVING SUM(delta) <> 0
        ON CONFLICT (grp, slot) DO UPDATE SET n = g.n + excluded.n;
    RETURN NULL;
END
$$;

ALTER FUNCTION books_inserted() SET search_path FROM CURRENT;
ALTER FUNCTION books_deleted() SET search_path FROM CURRENT;
ALTER FUNCTION books_ranges_moved() SET search_path FROM CURRENT;
