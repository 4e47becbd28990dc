//! The books API workspace's root package: it owns the runnable `examples/` and the
//! `benches/`. The library crates are `books-core` and `books-memstore`.
