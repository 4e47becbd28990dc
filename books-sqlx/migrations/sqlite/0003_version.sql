-- A version that changes with every committed write to books or authors, whoever makes
-- it (this process, another one, a host's own SQL): kept by triggers in the writing
-- transaction, in the counter's row, so readers get it in the same round trip.
ALTER TABLE book_count ADD COLUMN version INTEGER NOT NULL DEFAULT 0;

DROP TRIGGER books_count_insert;
CREATE TRIGGER books_count_insert AFTER INSERT ON books
BEGIN
    UPDATE book_count SET n = n + 1, version = version + 1 WHERE id = 1;
END;

DROP TRIGGER books_count_delete;
CREATE TRIGGER books_count_delete AFTER DELETE ON books
BEGIN
    UPDATE book_count SET n = n - 1, version = version + 1 WHERE id = 1;
END;

CREATE TRIGGER books_version_update AFTER UPDATE ON books
BEGIN
    UPDATE book_count SET version = version + 1 WHERE id = 1;
END;

CREATE TRIGGER authors_version_insert AFTER INSERT ON authors
BEGIN
    UPDATE book_count SET version = version + 1 WHERE id = 1;
END;

CREATE TRIGGER authors_version_update AFTER UPDATE ON authors
BEGIN
    UPDATE book_count SET version = version + 1 WHERE id = 1;
END;

CREATE TRIGGER authors_version_delete AFTER DELETE ON authors
BEGIN
    UPDATE book_count SET version = version + 1 WHERE id = 1;
END;
