-- The books API's schema on SQLite. Authors are written by the embedding service, books
-- by the API (and by a host's own SQL, which every trigger below follows as well).
-- AUTOINCREMENT: ids of deleted rows are never handed out again.
CREATE TABLE authors (
    id   INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT
);

CREATE TABLE books (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    title      TEXT    NOT NULL,
    author_id  INTEGER REFERENCES authors (id) ON DELETE SET NULL,
    year       INTEGER NOT NULL,
    created_at TEXT    NOT NULL, -- UTC
    updated_at TEXT    NOT NULL  -- UTC
);

-- The list's filters and sorts, each index ending in the rowid (ties by id): the author
-- filter (and ON DELETE SET NULL's look-up), the year filter and sort either way, the
-- title sort (SQLite's lower() lowers ASCII letters only, as the title rules want).
CREATE INDEX books_author_id ON books (author_id);
CREATE INDEX books_year ON books (year);
CREATE INDEX books_year_desc ON books (year DESC);
CREATE INDEX books_title ON books (lower(title));

-- The title filter (a substring of 3 characters or more) through trigrams: an FTS5 index
-- of the titles (it folds case more widely than the filter, so the filter checks each
-- book it finds), kept by triggers in the writing transaction, whoever writes.
CREATE VIRTUAL TABLE books_title_trigrams USING fts5 (
    title, content = 'books', content_rowid = 'id', tokenize = 'trigram'
);

CREATE TRIGGER books_title_trigrams_insert AFTER INSERT ON books
BEGIN
    INSERT INTO books_title_trigrams (rowid, title) VALUES (NEW.id, NEW.title);
END;

CREATE TRIGGER books_title_trigrams_delete AFTER DELETE ON books
BEGIN
    INSERT INTO books_title_trigrams (books_title_trigrams, rowid, title)
        VALUES ('delete', OLD.id, OLD.title);
END;

CREATE TRIGGER books_title_trigrams_update AFTER UPDATE OF id, title ON books
BEGIN
    INSERT INTO books_title_trigrams (books_title_trigrams, rowid, title)
        VALUES ('delete', OLD.id, OLD.title);
    INSERT INTO books_title_trigrams (rowid, title) VALUES (NEW.id, NEW.title);
END;

-- One row, kept by triggers in the writing transaction, so a reader gets it in the same
-- statement as its data: `n`, the page envelope's total without COUNT(*) over every row;
-- `version`, which moves with every committed write to books or authors, whoever makes
-- it (the API's cache serves an answer only while it holds); `changes`, which moves with
-- every such write except inserts of books (the version check reads it with the total,
-- the greatest id and how many books lie above an id, so the cache can tell a create
-- from other writes and keep its full pages across it).
CREATE TABLE book_count (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    n       INTEGER NOT NULL,
    version INTEGER NOT NULL DEFAULT 0,
    changes INTEGER NOT NULL DEFAULT 0
);

INSERT INTO book_count (id, n) VALUES (1, 0);

CREATE TRIGGER books_count_insert AFTER INSERT ON books
BEGIN
    UPDATE book_count SET n = n + 1, version = version + 1 WHERE id = 1;
END;

CREATE TRIGGER books_count_delete AFTER DELETE ON books
BEGIN
    UPDATE book_count SET n = n - 1, version = version + 1, changes = changes + 1 WHERE id = 1;
END;

CREATE TRIGGER books_version_update AFTER UPDATE ON books
BEGIN
    UPDATE book_count SET version = version + 1, changes = changes + 1 WHERE id = 1;
END;

CREATE TRIGGER authors_version_insert AFTER INSERT ON authors
BEGIN
    UPDATE book_count SET version = version + 1, changes = changes + 1 WHERE id = 1;
END;

CREATE TRIGGER authors_version_update AFTER UPDATE ON authors
BEGIN
    UPDATE book_count SET version = version + 1, changes = changes + 1 WHERE id = 1;
END;

CREATE TRIGGER authors_version_delete AFTER DELETE ON authors
BEGIN
    UPDATE book_count SET version = version + 1, changes = changes + 1 WHERE id = 1;
END;

-- Books per range of 1,024 ids, and per group of 32 ranges (32,768 ids), kept by
-- triggers in the writing transaction: a deep page sums the groups before its own, then
-- the ranges of its group, and skips fewer than 1,024 rows inside one, instead of
-- walking every row before it.
CREATE TABLE book_ranges (
    bucket INTEGER PRIMARY KEY,
    n      INTEGER NOT NULL
);

CREATE TRIGGER books_ranges_insert AFTER INSERT ON books
BEGIN
    INSERT INTO book_ranges (bucket, n) VALUES (NEW.id >> 10, 1)
        ON CONFLICT (bucket) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER books_ranges_delete AFTER DELETE ON books
BEGIN
    UPDATE book_ranges SET n = n - 1 WHERE bucket = OLD.id >> 10;
END;

-- The API never changes an id; a host's own SQL might.
CREATE TRIGGER books_ranges_move AFTER UPDATE OF id ON books
    WHEN OLD.id >> 10 != NEW.id >> 10
BEGIN
    UPDATE book_ranges SET n = n - 1 WHERE bucket = OLD.id >> 10;
    INSERT INTO book_ranges (bucket, n) VALUES (NEW.id >> 10, 1)
        ON CONFLICT (bucket) DO UPDATE SET n = n + 1;
END;

CREATE TABLE book_groups (
    grp INTEGER PRIMARY KEY,
    n   INTEGER NOT NULL
);

CREATE TRIGGER books_groups_insert AFTER INSERT ON books
BEGIN
    INSERT INTO book_groups (grp, n) VALUES (NEW.id >> 15, 1)
        ON CONFLICT (grp) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER books_groups_delete AFTER DELETE ON books
BEGIN
    UPDATE book_groups SET n = n - 1 WHERE grp = OLD.id >> 15;
END;

CREATE TRIGGER books_groups_move AFTER UPDATE OF id ON books
    WHEN OLD.id >> 15 != NEW.id >> 15
BEGIN
    UPDATE book_groups SET n = n - 1 WHERE grp = OLD.id >> 15;
    INSERT INTO book_groups (grp, n) VALUES (NEW.id >> 15, 1)
        ON CONFLICT (grp) DO UPDATE SET n = n + 1;
END;

-- Idempotency keys (`Idempotency-Key` on creates): each key's request fingerprint and
-- the answer it got, written in the transaction that writes the book, so a retried
-- create finds either both or neither. Not data the version covers: no trigger. Expired
-- keys are forgotten a small batch at a time.
CREATE TABLE idempotency_keys (
    key          TEXT    PRIMARY KEY,
    fingerprint  BLOB    NOT NULL,
    status       INTEGER NOT NULL,
    content_type TEXT    NOT NULL,
    location     TEXT    NOT NULL,
    etag         TEXT    NOT NULL,
    body         BLOB    NOT NULL,
    expires_at   TEXT    NOT NULL
);

CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
