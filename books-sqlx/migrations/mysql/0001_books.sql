-- The books API's schema on MariaDB (10.6 or later: the store uses JSON_TABLE). Authors
-- are written by the embedding service, books by the API (and by a host's own SQL, which
-- every trigger below follows as well). utf8mb4 throughout; times are DATETIME(6) in
-- UTC, whatever the session's time zone; InnoDB keeps AUTO_INCREMENT across restarts, so
-- no id is handed out twice.
--
-- MariaDB commits before and after every CREATE (DDL is not transactional): a migration
-- cut in half leaves what it had created. Every statement here is written to be run
-- again (IF NOT EXISTS, INSERT IGNORE), and the store runs a migration its bookkeeping
-- marks unfinished again in full at the next start (`MySqlStore::migrate`).
CREATE TABLE IF NOT EXISTS authors (
    id   BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY,
    name TEXT
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE IF NOT EXISTS books (
    id         BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
    title      VARCHAR(255) NOT NULL,
    author_id  BIGINT,
    year       INT          NOT NULL,
    created_at DATETIME(6)  NOT NULL, -- UTC
    updated_at DATETIME(6)  NOT NULL, -- UTC
    -- The title as the title filter and sort compare it: ASCII letters lowered (MariaDB's
    -- LOWER() lowers every letter), compared by code point without padding. Stored, not
    -- virtual: a title-filtered page walks the rows in id order, and computing this for
    -- each row it passes made that walk 4x slower (8 ms against 2 ms at 20,000 books).
    title_key  VARCHAR(255) COLLATE utf8mb4_nopad_bin AS (REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(REPLACE(title, 'A', 'a'), 'B', 'b'), 'C', 'c'), 'D', 'd'), 'E', 'e'), 'F', 'f'), 'G', 'g'), 'H', 'h'), 'I', 'i'), 'J', 'j'), 'K', 'k'), 'L', 'l'), 'M', 'm'), 'N', 'n'), 'O', 'o'), 'P', 'p'), 'Q', 'q'), 'R', 'r'), 'S', 's'), 'T', 't'), 'U', 'u'), 'V', 'v'), 'W', 'w'), 'X', 'x'), 'Y', 'y'), 'Z', 'z')) STORED,
    -- Also the index ON DELETE SET NULL looks books up by (an InnoDB index ends in the
    -- primary key: this one is (author_id, id), the author filter's order).
    CONSTRAINT books_author FOREIGN KEY (author_id) REFERENCES authors (id)
        ON DELETE SET NULL,
    -- The year filter and sort, either way, ties by id.
    INDEX books_year (year),
    INDEX books_year_desc (year DESC),
    -- The title sort, and the title filter's scan (of this index, not of the rows).
    INDEX books_title (title_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- A host's own `authors` or `books` table is never taken for ours: these fail (unknown
-- column) unless the tables have our columns. A store with tables of its own goes in a
-- database of its own (`MySqlStore::in_database`).
SELECT id, name FROM authors LIMIT 0;
SELECT id, title, author_id, year, created_at, updated_at, title_key FROM books LIMIT 0;

-- `TRUNCATE books` fires no trigger, so it would leave the counters below (and every
-- cached answer) behind. InnoDB refuses to truncate a table another table's foreign key
-- references, so this empty table references `books` to make `TRUNCATE books` fail
-- (error 1701) rather than go unseen; `authors` is referenced by `books` already. A
-- session with foreign_key_checks=0 can still truncate: see docs/stores.md.
CREATE TABLE IF NOT EXISTS books_truncate_guard (
    book_id BIGINT NOT NULL PRIMARY KEY,
    CONSTRAINT books_truncate_guard FOREIGN KEY (book_id) REFERENCES books (id)
) ENGINE = InnoDB;

-- The counters, kept by triggers in the writing transaction, so a reader gets them in the
-- same statement as its data, summed over 16 slots (rows 1 to 16): a write counts in the
-- slot of its connection, so concurrent writers (several rows each, too) do not queue on
-- one row until each commits. `n`: the page envelope's total without COUNT(*) over every
-- row. `version`: moves with every committed write to books or authors, whoever makes it
-- (the API's cache serves an answer only while it holds). `changes`: moves with every
-- such write except inserts of books (the version check reads it with the total, the
-- greatest id and how many books lie above an id, so the cache can tell a create from
-- other writes and keep its full pages across it).
CREATE TABLE IF NOT EXISTS book_count (
    id      INT    NOT NULL PRIMARY KEY,
    n       BIGINT NOT NULL DEFAULT 0,
    version BIGINT NOT NULL DEFAULT 0,
    changes BIGINT NOT NULL DEFAULT 0,
    CONSTRAINT book_count_slot CHECK (id BETWEEN 1 AND 16)
) ENGINE = InnoDB;

INSERT IGNORE INTO book_count (id) VALUES
    (1), (2), (3), (4), (5), (6), (7), (8), (9), (10), (11), (12), (13), (14), (15), (16);

-- Books per range of 1,024 ids and per group of 32 ranges (32,768 ids), each count in the
-- slot of the connection that wrote, as the counters are: a deep page sums the groups
-- before its own, then the ranges of its group, and skips fewer than 1,024 rows inside
-- one, instead of walking every row before it. A range or group has a row per connection
-- slot that wrote into it (one or two for the API's own writes; `recount()` folds them
-- into one). Unlike PostgreSQL's, they are not folded as ranges close: folding takes
-- locks on the gaps between rows, which deadlock with concurrent writers' counts.
CREATE TABLE IF NOT EXISTS book_ranges (
    bucket BIGINT   NOT NULL,
    slot   SMALLINT NOT NULL,
    n      BIGINT   NOT NULL,
    PRIMARY KEY (bucket, slot)
) ENGINE = InnoDB;

CREATE TABLE IF NOT EXISTS book_groups (
    grp  BIGINT   NOT NULL,
    slot SMALLINT NOT NULL,
    n    BIGINT   NOT NULL,
    PRIMARY KEY (grp, slot)
) ENGINE = InnoDB;

-- A deep page (at an offset of 1,024 books or more): the group of ranges it starts in,
-- then the range, each by a short prefix sum, then the page from the range's first id,
-- skipping fewer than 1,024 books. Three statements in one snapshot (a read-only
-- transaction) and one round trip: MariaDB takes neither an expression in LIMIT nor a
-- subquery's value as the start of an index range, but takes a procedure's variables as
-- both. A failed statement rolls the transaction back.
CREATE PROCEDURE IF NOT EXISTS books_deep_page(page_size BIGINT, page_offset BIGINT)
READS SQL DATA
BEGIN
    DECLARE v_group BIGINT DEFAULT NULL;
    DECLARE v_group_skip BIGINT DEFAULT 0;
    DECLARE v_start BIGINT DEFAULT NULL;
    DECLARE v_skip BIGINT DEFAULT 0;
    DECLARE EXIT HANDLER FOR SQLEXCEPTION
    BEGIN
        ROLLBACK;
        RESIGNAL;
    END;
    START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY;
    SELECT grp, page_offset - (upto - n) INTO v_group, v_group_skip
        FROM (SELECT grp, SUM(n) AS n,
                     SUM(SUM(n)) OVER (ORDER BY grp ROWS UNBOUNDED PRECEDING) AS upto
              FROM book_groups GROUP BY grp) g
        WHERE upto > page_offset ORDER BY grp LIMIT 1;
    SELECT bucket * 1024, v_group_skip - (upto - n) INTO v_start, v_skip
        FROM (SELECT bucket, SUM(n) AS n,
                     SUM(SUM(n)) OVER (ORDER BY bucket ROWS UNBOUNDED PRECEDING) AS upto
              FROM book_ranges WHERE bucket BETWEEN v_group * 32 AND v_group * 32 + 31
              GROUP BY bucket) r
        WHERE upto > v_group_skip ORDER BY bucket LIMIT 1;
    SELECT b.id, b.title, b.year, b.author_id, a.name AS author_name, b.created_at,
           b.updated_at,
           (SELECT CAST(SUM(n) AS SIGNED) FROM book_count) AS total,
           (SELECT CAST(SUM(version) AS SIGNED) FROM book_count) AS version
    FROM (SELECT id FROM books WHERE id >= v_start ORDER BY id
          LIMIT page_size OFFSET v_skip) p
    JOIN books b ON b.id = p.id LEFT JOIN authors a ON a.id = b.author_id
    ORDER BY b.id;
    COMMIT;
END;

-- Every book counts in its range and group, in the writing connection's slot; each
-- statement written out in the trigger (a procedure call per row costs a seventh more on
-- a bulk insert).
CREATE TRIGGER IF NOT EXISTS books_insert AFTER INSERT ON books FOR EACH ROW
BEGIN
    UPDATE book_count SET n = n + 1, version = version + 1 WHERE id = 1 + (CONNECTION_ID() & 15);
    INSERT INTO book_ranges (bucket, slot, n) VALUES (NEW.id >> 10, CONNECTION_ID() & 15, 1)
        ON DUPLICATE KEY UPDATE n = n + 1;
    INSERT INTO book_groups (grp, slot, n) VALUES (NEW.id >> 15, CONNECTION_ID() & 15, 1)
        ON DUPLICATE KEY UPDATE n = n + 1;
END;

CREATE TRIGGER IF NOT EXISTS books_delete AFTER DELETE ON books FOR EACH ROW
BEGIN
    UPDATE book_count SET n = n - 1, version = version + 1, changes = changes + 1
        WHERE id = 1 + (CONNECTION_ID() & 15);
    INSERT INTO book_ranges (bucket, slot, n) VALUES (OLD.id >> 10, CONNECTION_ID() & 15, -1)
        ON DUPLICATE KEY UPDATE n = n - 1;
    INSERT INTO book_groups (grp, slot, n) VALUES (OLD.id >> 15, CONNECTION_ID() & 15, -1)
        ON DUPLICATE KEY UPDATE n = n - 1;
END;

-- The API never changes an id; a host's own SQL might.
CREATE TRIGGER IF NOT EXISTS books_update AFTER UPDATE ON books FOR EACH ROW
BEGIN
    UPDATE book_count SET version = version + 1, changes = changes + 1
        WHERE id = 1 + (CONNECTION_ID() & 15);
    IF NEW.id <> OLD.id THEN
        INSERT INTO book_ranges (bucket, slot, n) VALUES (OLD.id >> 10, CONNECTION_ID() & 15, -1)
            ON DUPLICATE KEY UPDATE n = n - 1;
        INSERT INTO book_groups (grp, slot, n) VALUES (OLD.id >> 15, CONNECTION_ID() & 15, -1)
            ON DUPLICATE KEY UPDATE n = n - 1;
        INSERT INTO book_ranges (bucket, slot, n) VALUES (NEW.id >> 10, CONNECTION_ID() & 15, 1)
            ON DUPLICATE KEY UPDATE n = n + 1;
        INSERT INTO book_groups (grp, slot, n) VALUES (NEW.id >> 15, CONNECTION_ID() & 15, 1)
            ON DUPLICATE KEY UPDATE n = n + 1;
    END IF;
END;

-- Authors' names show in pages and books (`include=author`). Foreign-key actions fire no
-- trigger in MariaDB: deleting an author sets its books' author_id to null unseen by the
-- books triggers, and seen by this one.
CREATE TRIGGER IF NOT EXISTS authors_insert AFTER INSERT ON authors FOR EACH ROW
    UPDATE book_count SET version = version + 1, changes = changes + 1
        WHERE id = 1 + (CONNECTION_ID() & 15);

CREATE TRIGGER IF NOT EXISTS authors_update AFTER UPDATE ON authors FOR EACH ROW
    UPDATE book_count SET version = version + 1, changes = changes + 1
        WHERE id = 1 + (CONNECTION_ID() & 15);

CREATE TRIGGER IF NOT EXISTS authors_delete AFTER DELETE ON authors FOR EACH ROW
    UPDATE book_count SET version = version + 1, changes = changes + 1
        WHERE id = 1 + (CONNECTION_ID() & 15);

-- Idempotency keys (`Idempotency-Key` on creates): each key's request fingerprint and
-- the answer it got, written in the transaction that writes the book, so a retried
-- create finds either both or neither. Not data the version covers: no trigger. Expired
-- keys are forgotten a small batch at a time.
CREATE TABLE IF NOT EXISTS idempotency_keys (
    `key`        VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
    fingerprint  BLOB          NOT NULL,
    status       INT           NOT NULL,
    content_type TEXT          NOT NULL,
    location     TEXT          NOT NULL,
    etag         TEXT          NOT NULL,
    body         MEDIUMBLOB    NOT NULL,
    expires_at   DATETIME(6)   NOT NULL,
    KEY idempotency_keys_expiry (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
