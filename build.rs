//! The test gates of `test-support/gates.rs` (the same cfgs, for the server's tests): a
//! case whose database or tool is missing shows as ignored, except under `CI=true`.

#[path = "test-support/gates.rs"]
mod gates;

fn main() {
    gates::main();
}
