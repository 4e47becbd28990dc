//! The test gates of `books-sqlx/build.rs` (the same cfgs, for the server's tests): a case
//! whose database or tool is missing shows as ignored, except under `CI=true`.

#[path = "books-sqlx/build.rs"]
mod gates;

fn main() {
    gates::main();
}
