-- Authors are written by the embedding service; books by the API.
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

-- ON DELETE SET NULL looks books up by author.
CREATE INDEX books_author_id ON books (author_id);
