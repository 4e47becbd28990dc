//! The test gates (`gates.rs`): which databases and tools the tests were given.

#[path = "gates.rs"]
mod gates;

fn main() {
    gates::main();
}
